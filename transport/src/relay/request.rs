//! What a relayed command request holds (sans-IO): whole MySQL packets from the client, that is
//! commands without an answer (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA) riding ahead of at
//! most one command that has one, which decides how its answer is framed.

use common::mysql::{command, packet};

use super::framing::Expect;
use super::packets::PacketHead;

/// Why a request body cannot be relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadCommands {
    /// The body does not end on a packet boundary.
    #[error("the body is not whole MySQL packets")]
    Truncated,
    /// A command with an answer is not the last one.
    #[error("only the last command of a request may have an answer")]
    AnswerNotLast,
    /// A command the tunnel does not carry (replication streams, COM_QUIT).
    #[error("command 0x{0:02x} is not relayed")]
    NotRelayed(u8),
    /// An empty command packet.
    #[error("an empty command packet")]
    Empty,
}

/// The answer the last command of `body` expects, or `None` when no command in it has one.
pub fn expected_answer(body: &[u8]) -> Result<Option<Expect>, BadCommands> {
    let mut at = 0;
    let mut expect = None;
    let mut continued = false;
    while at < body.len() {
        let head = PacketHead::parse(&body[at..]).ok_or(BadCommands::Truncated)?;
        let payload = body.get(at + PacketHead::LEN..at + PacketHead::LEN + head.len);
        let payload = payload.ok_or(BadCommands::Truncated)?;
        if !continued {
            if expect.is_some() {
                return Err(BadCommands::AnswerNotLast);
            }
            expect = answer_of(*payload.first().ok_or(BadCommands::Empty)?)?;
        }
        continued = head.len == packet::MAX_PAYLOAD;
        at += PacketHead::LEN + head.len;
    }
    if continued {
        return Err(BadCommands::Truncated);
    }
    Ok(expect)
}

/// The payload of the last command in `body` (the one answered; its first 16 MiB packet),
/// for logs and the audit log.
pub fn last_command(body: &[u8]) -> Option<&[u8]> {
    let (mut at, mut last, mut continued) = (0, None, false);
    while let Some(head) = body.get(at..).and_then(PacketHead::parse) {
        if !continued {
            last = body.get(at + PacketHead::LEN..at + PacketHead::LEN + head.len);
        }
        continued = head.len == packet::MAX_PAYLOAD;
        at += PacketHead::LEN + head.len;
    }
    last
}

/// How the answer to a command starts; `None` for commands without one.
pub fn answer_of(cmd: u8) -> Result<Option<Expect>, BadCommands> {
    Ok(Some(match cmd {
        command::STMT_CLOSE | command::STMT_SEND_LONG_DATA => return Ok(None),
        command::QUIT
        | command::BINLOG_DUMP
        | command::TABLE_DUMP
        | command::REGISTER_SLAVE
        | command::BINLOG_DUMP_GTID => return Err(BadCommands::NotRelayed(cmd)),
        command::QUERY
        | command::STMT_EXECUTE
        | command::STMT_BULK_EXECUTE
        | command::PROCESS_INFO => Expect::Result,
        command::STMT_PREPARE => Expect::Prepare,
        command::STMT_FETCH => Expect::Rows,
        command::FIELD_LIST => Expect::FieldList,
        command::CHANGE_USER => Expect::Auth,
        _ => Expect::OnePacket,
    }))
}

/// True when the body ends with an empty packet: the end of a LOAD DATA LOCAL file.
pub fn ends_file(body: &[u8]) -> bool {
    let mut at = 0;
    let mut last_empty = false;
    while let Some(head) = body.get(at..).and_then(PacketHead::parse) {
        last_empty = head.len == 0;
        at += PacketHead::LEN + head.len;
    }
    at == body.len() && last_empty
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        PacketHead::write(&mut p, payload.len(), seq);
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn closes_ride_ahead_of_the_command() {
        let mut body = packet(0, &[command::STMT_CLOSE, 1, 0, 0, 0]);
        body.extend(packet(0, &[command::STMT_SEND_LONG_DATA, 2, 0, 0, 0, 0, 0, b'x']));
        body.extend(packet(0, b"\x17\x02\x00\x00\x00\x00\x01\x00\x00\x00"));
        assert_eq!(expected_answer(&body), Ok(Some(Expect::Result)));
        assert_eq!(expected_answer(&packet(0, &[command::STMT_CLOSE, 1, 0, 0, 0])), Ok(None));
    }

    #[test]
    fn refuses_what_cannot_be_framed() {
        let mut two = packet(0, b"\x03SELECT 1");
        two.extend(packet(0, b"\x0e"));
        assert_eq!(expected_answer(&two), Err(BadCommands::AnswerNotLast));
        assert_eq!(expected_answer(&packet(0, b"\x12\x00")), Err(BadCommands::NotRelayed(0x12)));
        assert_eq!(expected_answer(&packet(0, b"")), Err(BadCommands::Empty));
        assert_eq!(expected_answer(&[5, 0, 0, 0, 3]), Err(BadCommands::Truncated));
    }

    #[test]
    fn a_split_command_is_one_command() {
        let mut big = vec![0u8; packet::MAX_PAYLOAD];
        big[0] = command::QUERY;
        let mut body = packet(0, &big);
        body.extend(packet(1, b"rest"));
        assert_eq!(expected_answer(&body), Ok(Some(Expect::Result)));
        assert_eq!(expected_answer(&packet(0, &big)), Err(BadCommands::Truncated));
    }

    #[test]
    fn finds_the_end_of_a_file() {
        let mut body = packet(2, b"1,a\n");
        assert!(!ends_file(&body));
        body.extend(packet(3, b""));
        assert!(ends_file(&body));
        assert!(!ends_file(&body[..body.len() - 1]));
    }
}
