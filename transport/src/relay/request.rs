//! What a relayed command request holds (sans-IO): whole MySQL packets from the client, that is
//! the commands the client sent before waiting for an answer (one, or several pipelined),
//! commands without an answer among them (as `common::mysql::command_policy` says). Each
//! command with an answer decides how its answer is framed.

use common::mysql::command_policy::{Answer, CommandPolicy};
use common::mysql::packet;
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
    // Room for one: most requests carry one command.
    let mut asked = Vec::with_capacity(1);
    each_asked(body, |one| asked.push(one))?;
    Ok(asked)
}

/// How many commands of `body` have an answer, checked as [`commands_asked`] checks them,
/// with nothing kept.
pub fn count_asked(body: &[u8]) -> Result<usize, BadCommands> {
    each_asked(body, |_| ())
}

/// Walks the commands of `body`, calling `each` for those that have an answer; how many.
fn each_asked<'a>(body: &'a [u8], mut each: impl FnMut(Asked<'a>)) -> Result<usize, BadCommands> {
    let (mut at, mut continued) = (0, false);
    let (mut count, mut last) = (0, None);
    while at < body.len() {
        let head = PacketHead::parse(&body[at..]).ok_or(BadCommands::Truncated)?;
        let payload = body.get(at + PacketHead::LEN..at + PacketHead::LEN + head.len);
        let payload = payload.ok_or(BadCommands::Truncated)?;
        if !continued {
            if last == Some(Expect::Auth) {
                return Err(BadCommands::AwaitNotLast);
            }
            if let Some(expect) = answer_of(*payload.first().ok_or(BadCommands::Empty)?)? {
                if count == MAX_PIPELINED_COMMANDS {
                    return Err(BadCommands::TooManyCommands);
                }
                count += 1;
                last = Some(expect);
                each(Asked { expect, payload });
            }
        }
        continued = head.len == packet::MAX_PAYLOAD;
        at += PacketHead::LEN + head.len;
    }
    if continued {
        return Err(BadCommands::Truncated);
    }
    Ok(count)
}

/// How the answer to a command starts; `None` for commands without one. Which commands are
/// relayed, and how each is answered, is `CommandPolicy`'s table; anything else is refused
/// before it reaches the server.
pub fn answer_of(cmd: u8) -> Result<Option<Expect>, BadCommands> {
    Ok(Some(match CommandPolicy::of(cmd) {
        CommandPolicy::Unanswered => return Ok(None),
        CommandPolicy::Answered(Answer::Result) => Expect::Result,
        CommandPolicy::Answered(Answer::Prepare) => Expect::Prepare,
        CommandPolicy::Answered(Answer::Rows) => Expect::Rows,
        CommandPolicy::Answered(Answer::FieldList) => Expect::FieldList,
        CommandPolicy::Answered(Answer::Auth) => Expect::Auth,
        CommandPolicy::Answered(Answer::OnePacket) => Expect::OnePacket,
        CommandPolicy::Quit | CommandPolicy::Replication | CommandPolicy::Unlisted => {
            return Err(BadCommands::NotRelayed(cmd));
        }
    }))
}

/// Why a piece of a LOAD DATA LOCAL file cannot go upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadFile {
    /// The piece does not end on a packet boundary.
    #[error("a file piece is not whole MySQL packets")]
    Truncated,
    /// A packet's sequence id does not follow the one before it.
    #[error("a file packet is out of sequence (0x{found:02x} where 0x{expected:02x} was due)")]
    OutOfSequence {
        /// The id it had.
        found: u8,
        /// The id due.
        expected: u8,
    },
    /// The file's terminating empty packet is missing from its last piece, or is not last.
    #[error("a file ends with its empty packet, in its last piece, and nothing follows it")]
    BadEnd,
}

/// Checks a piece of a LOAD DATA LOCAL file: whole packets, numbered on from `last_seq` (the
/// packet before it), the file's terminating empty packet last in the `last` piece and nowhere
/// else (an empty packet after a 16 MiB one only ends that packet). Anything behind the end
/// would reach the server as a command no one checked or audited. Returns the last packet's
/// sequence id.
pub fn check_file_piece(body: &[u8], last_seq: u8, last: bool) -> Result<u8, BadFile> {
    let (mut at, mut seq, mut continued, mut ended) = (0, last_seq, false, false);
    while at < body.len() {
        if ended {
            return Err(BadFile::BadEnd);
        }
        let head = PacketHead::parse(&body[at..]).ok_or(BadFile::Truncated)?;
        let end = at + PacketHead::LEN + head.len;
        if end > body.len() {
            return Err(BadFile::Truncated);
        }
        let expected = seq.wrapping_add(1);
        if head.seq != expected {
            return Err(BadFile::OutOfSequence { found: head.seq, expected });
        }
        ended = head.len == 0 && !continued;
        if ended && !last {
            return Err(BadFile::BadEnd);
        }
        continued = head.len == packet::MAX_PAYLOAD;
        (seq, at) = (head.seq, end);
    }
    if last && !ended {
        return Err(BadFile::BadEnd);
    }
    Ok(seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::mysql::command;

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
        for refused in [0x01, 0x12, 0x13, 0x14, 0x15, 0x1e, 0x20, 0x21, 0x08, 0x0b, 0x7f] {
            assert_eq!(expects(&packet(0, &[refused, 0])), Err(BadCommands::NotRelayed(refused)));
        }
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
    fn a_file_piece_is_whole_packets_in_sequence_ending_once() {
        let mut body = packet(2, b"1,a\n");
        body.extend(packet(3, b"2,b\n"));
        assert_eq!(check_file_piece(&body, 1, false), Ok(3));
        assert_eq!(check_file_piece(&body, 1, true), Err(BadFile::BadEnd), "no end");
        assert_eq!(
            check_file_piece(&body, 2, false),
            Err(BadFile::OutOfSequence { found: 2, expected: 3 })
        );
        assert_eq!(check_file_piece(&body[..body.len() - 1], 1, false), Err(BadFile::Truncated));
        body.extend(packet(4, b""));
        assert_eq!(check_file_piece(&body, 1, true), Ok(4));
        assert_eq!(
            check_file_piece(&body, 1, false),
            Err(BadFile::BadEnd),
            "an end in a middle piece"
        );
        // A command smuggled behind the end.
        let mut smuggled = body.clone();
        smuggled.extend(packet(0, b"\x03CREATE TABLE smuggled (i int)"));
        assert_eq!(check_file_piece(&smuggled, 1, true), Err(BadFile::BadEnd));
        let mut smuggled = body;
        smuggled.extend(packet(5, b"\x03DROP TABLE t"));
        assert_eq!(check_file_piece(&smuggled, 1, true), Err(BadFile::BadEnd));
        assert_eq!(check_file_piece(&packet(2, b""), 1, true), Ok(2), "an empty file");
    }

    #[test]
    fn an_empty_packet_after_a_full_one_only_ends_that_packet() {
        let mut body = packet(1, &vec![b'x'; packet::MAX_PAYLOAD]);
        body.extend(packet(2, b""));
        assert_eq!(check_file_piece(&body, 0, false), Ok(2));
        body.extend(packet(3, b""));
        assert_eq!(check_file_piece(&body, 0, true), Ok(3));
    }

    #[test]
    fn each_command_is_framed_as_the_policy_table_says() {
        for cmd in 0..=255u8 {
            let policy = CommandPolicy::of(cmd);
            assert_eq!(answer_of(cmd).is_ok(), policy.is_relayed(), "0x{cmd:02x}");
            let unanswered = policy == CommandPolicy::Unanswered;
            assert_eq!(answer_of(cmd) == Ok(None), unanswered, "0x{cmd:02x}");
        }
        let framed = [
            (0x03, Expect::Result),
            (0x16, Expect::Prepare),
            (0x1c, Expect::Rows),
            (0x04, Expect::FieldList),
            (0x11, Expect::Auth),
            (0x0e, Expect::OnePacket),
        ];
        for (cmd, expect) in framed {
            assert_eq!(answer_of(cmd), Ok(Some(expect)), "0x{cmd:02x}");
        }
    }
}
