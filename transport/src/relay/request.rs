//! What a relayed command request holds (sans-IO): whole MySQL packets from the client, that is
//! the commands the client sent before waiting for an answer (one, or several pipelined),
//! commands without an answer (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA) among them. Each
//! command with an answer decides how its answer is framed.

use common::mysql::{command, packet};
use common::wire::MAX_PIPELINED_COMMANDS;

use super::framing::Expect;
use common::mysql::packets::PacketHead;

/// Why a request body cannot be relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadCommands {
    /// The body does not end on a packet boundary.
    #[error("the body is not whole MySQL packets")]
    Truncated,
    /// A command whose answer waits for the client (COM_CHANGE_USER) is not the last one.
    #[error("only the last command of a request may wait for the client")]
    AwaitNotLast,
    /// More commands with an answer than one request may carry.
    #[error("more than {MAX_PIPELINED_COMMANDS} commands with an answer in one request")]
    TooManyCommands,
    /// A command the tunnel does not carry (replication streams, COM_QUIT).
    #[error("command 0x{0:02x} is not relayed")]
    NotRelayed(u8),
    /// An empty command packet.
    #[error("an empty command packet")]
    Empty,
}

/// A command of a request that has an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked<'a> {
    /// How its answer starts.
    pub expect: Expect,
    /// Its payload (its first packet's, for a command of more than 16 MiB), for logs and the
    /// audit log.
    pub payload: &'a [u8],
}

/// The commands of `body` that have an answer, in order (none when only commands without
/// one ride in it).
pub fn commands_asked(body: &[u8]) -> Result<Vec<Asked<'_>>, BadCommands> {
    let mut asked: Vec<Asked<'_>> = Vec::new();
    let (mut at, mut continued) = (0, false);
    while at < body.len() {
        let head = PacketHead::parse(&body[at..]).ok_or(BadCommands::Truncated)?;
        let payload = body.get(at + PacketHead::LEN..at + PacketHead::LEN + head.len);
        let payload = payload.ok_or(BadCommands::Truncated)?;
        if !continued {
            if asked.last().is_some_and(|a| a.expect == Expect::Auth) {
                return Err(BadCommands::AwaitNotLast);
            }
            if let Some(expect) = answer_of(*payload.first().ok_or(BadCommands::Empty)?)? {
                if asked.len() == MAX_PIPELINED_COMMANDS {
                    return Err(BadCommands::TooManyCommands);
                }
                asked.push(Asked { expect, payload });
            }
        }
        continued = head.len == packet::MAX_PAYLOAD;
        at += PacketHead::LEN + head.len;
    }
    if continued {
        return Err(BadCommands::Truncated);
    }
    Ok(asked)
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

    fn expects(body: &[u8]) -> Result<Vec<Expect>, BadCommands> {
        commands_asked(body).map(|asked| asked.iter().map(|a| a.expect).collect())
    }

    #[test]
    fn closes_ride_ahead_of_the_command() {
        let mut body = packet(0, &[command::STMT_CLOSE, 1, 0, 0, 0]);
        body.extend(packet(0, &[command::STMT_SEND_LONG_DATA, 2, 0, 0, 0, 0, 0, b'x']));
        body.extend(packet(0, b"\x17\x02\x00\x00\x00\x00\x01\x00\x00\x00"));
        assert_eq!(expects(&body), Ok(vec![Expect::Result]));
        assert_eq!(commands_asked(&body).unwrap()[0].payload[0], command::STMT_EXECUTE);
        assert_eq!(expects(&packet(0, &[command::STMT_CLOSE, 1, 0, 0, 0])), Ok(vec![]));
    }

    #[test]
    fn pipelined_commands_are_answered_in_order() {
        let mut body = packet(0, b"\x16SELECT ?");
        body.extend(packet(0, &[command::STMT_CLOSE, 1, 0, 0, 0]));
        body.extend(packet(0, b"\x03SELECT 1"));
        body.extend(packet(0, b"\x0e"));
        body.extend(packet(0, b"\x11change user"));
        assert_eq!(
            expects(&body),
            Ok(vec![Expect::Prepare, Expect::Result, Expect::OnePacket, Expect::Auth])
        );
        let asked = commands_asked(&body).unwrap();
        assert_eq!(asked[1].payload, b"\x03SELECT 1");
    }

    #[test]
    fn refuses_what_cannot_be_framed() {
        let mut two = packet(0, b"\x11change user");
        two.extend(packet(0, b"\x0e"));
        assert_eq!(expects(&two), Err(BadCommands::AwaitNotLast));
        assert_eq!(expects(&packet(0, b"\x12\x00")), Err(BadCommands::NotRelayed(0x12)));
        assert_eq!(expects(&packet(0, b"")), Err(BadCommands::Empty));
        assert_eq!(expects(&[5, 0, 0, 0, 3]), Err(BadCommands::Truncated));
        let many: Vec<u8> = (0..=MAX_PIPELINED_COMMANDS).flat_map(|_| packet(0, b"\x0e")).collect();
        assert_eq!(expects(&many), Err(BadCommands::TooManyCommands));
        assert!(expects(&many[5..]).is_ok());
    }

    #[test]
    fn a_split_command_is_one_command() {
        let mut big = vec![0u8; packet::MAX_PAYLOAD];
        big[0] = command::QUERY;
        let mut body = packet(0, &big);
        body.extend(packet(1, b"rest"));
        assert_eq!(expects(&body), Ok(vec![Expect::Result]));
        assert_eq!(expects(&packet(0, &big)), Err(BadCommands::Truncated));
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
