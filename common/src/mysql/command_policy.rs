//! The one table of what the tunnel does with each MySQL command, chosen by its first byte
//! (sans-IO), read by both halves: the sidecar decides from it which commands ride, which go
//! alone and which it refuses itself, the transport which it relays and how their answers start.

use super::command;

/// What the tunnel does with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandPolicy {
    /// Relayed upstream, and answered: its answer starts as said.
    Answered(Answer),
    /// Relayed upstream, never answered (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA): it rides on
    /// the request of the client's next command.
    Unanswered,
    /// COM_QUIT: the sidecar ends the session itself; never relayed.
    Quit,
    /// A replication command, whose answer is a stream and not a turn: the sidecar refuses it
    /// before it is sent, and the transport would too.
    Replication,
    /// Not on the list of relayed commands (a clone stream, the server's internal commands,
    /// bytes no server knows): the sidecar passes it on as any other, and the transport refuses
    /// it before it reaches the server, whose protocol it could switch under the relay's feet.
    Unlisted,
}

/// How the answer to a relayed command starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A result: OK, ERR, a LOCAL INFILE request or a result set, possibly several
    /// (COM_QUERY, COM_STMT_EXECUTE, COM_STMT_BULK_EXECUTE, COM_PROCESS_INFO).
    Result,
    /// COM_STMT_PREPARE: its OK, then parameter and column definitions.
    Prepare,
    /// COM_STMT_FETCH: rows of a cursor and their terminator.
    Rows,
    /// COM_FIELD_LIST: column definitions until an EOF.
    FieldList,
    /// COM_CHANGE_USER: an authentication exchange, which may wait for the client, until OK
    /// or ERR.
    Auth,
    /// Any one packet (COM_PING, COM_INIT_DB, COM_STATISTICS, COM_SET_OPTION…).
    OnePacket,
}

impl CommandPolicy {
    /// The policy for the command whose first byte is `cmd`: the one place it is chosen.
    pub const fn of(cmd: u8) -> Self {
        match cmd {
            command::STMT_CLOSE | command::STMT_SEND_LONG_DATA => Self::Unanswered,
            command::QUERY
            | command::STMT_EXECUTE
            | command::STMT_BULK_EXECUTE
            | command::PROCESS_INFO => Self::Answered(Answer::Result),
            command::STMT_PREPARE => Self::Answered(Answer::Prepare),
            command::STMT_FETCH => Self::Answered(Answer::Rows),
            command::FIELD_LIST => Self::Answered(Answer::FieldList),
            command::CHANGE_USER => Self::Answered(Answer::Auth),
            command::INIT_DB
            | command::REFRESH
            | command::DEBUG
            | command::STATISTICS
            | command::PING
            | command::PROCESS_KILL
            | command::STMT_RESET
            | command::SET_OPTION
            | command::RESET_CONNECTION => Self::Answered(Answer::OnePacket),
            command::QUIT => Self::Quit,
            command::BINLOG_DUMP
            | command::BINLOG_DUMP_GTID
            | command::TABLE_DUMP
            | command::REGISTER_SLAVE => Self::Replication,
            _ => Self::Unlisted,
        }
    }

    /// True for a command the transport relays upstream; it refuses any other.
    pub const fn is_relayed(self) -> bool {
        matches!(self, Self::Answered(_) | Self::Unanswered)
    }

    /// True for a command that may go in the same request as the client's command before it.
    /// What the sidecar handles itself goes alone: COM_QUIT, COM_CHANGE_USER (which it may check
    /// itself) and replication commands. An unlisted command goes with the others, and the
    /// transport's refusal answers them all.
    pub const fn pipelines(self) -> bool {
        !matches!(self, Self::Quit | Self::Replication | Self::Answered(Answer::Auth))
    }
}

/// True for a command (`payload`, its first byte the command) whose answer may wait for the
/// client: a COM_CHANGE_USER (an auth switch) or a COM_QUERY that may be a LOAD DATA LOCAL (a
/// file). The server would take commands pipelined behind it for the client's reply, so none go
/// with it.
pub fn waits_for_the_client(payload: &[u8]) -> bool {
    let auth = |&cmd: &u8| matches!(CommandPolicy::of(cmd), CommandPolicy::Answered(Answer::Auth));
    payload.first().is_some_and(auth) || may_ask_for_a_file(payload)
}

/// True for a COM_QUERY (`payload`, its first byte the command) that may be a LOAD DATA LOCAL,
/// whose answer may then ask the client for a file: a quick look for the word `infile`, which
/// most statements lack.
pub fn may_ask_for_a_file(payload: &[u8]) -> bool {
    let Some((&command::QUERY, sql)) = payload.split_first() else { return false };
    // Only where an `i` is does the word get compared (memchr skips the rest many bytes at a time).
    memchr::memchr2_iter(b'i', b'I', sql)
        .any(|at| sql.get(at..at + 6).is_some_and(|w| w.eq_ignore_ascii_case(b"infile")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use CommandPolicy::*;

    /// Every listed command byte, its policy and whether it pipelines, as the sidecar's and the
    /// transport's own copies answered before they read this table. Any other byte is unlisted
    /// and pipelines.
    const LISTED: [(u8, CommandPolicy, bool); 24] = [
        (0x01, Quit, false),
        (0x02, Answered(Answer::OnePacket), true),
        (0x03, Answered(Answer::Result), true),
        (0x04, Answered(Answer::FieldList), true),
        (0x07, Answered(Answer::OnePacket), true),
        (0x09, Answered(Answer::OnePacket), true),
        (0x0a, Answered(Answer::Result), true),
        (0x0c, Answered(Answer::OnePacket), true),
        (0x0d, Answered(Answer::OnePacket), true),
        (0x0e, Answered(Answer::OnePacket), true),
        (0x11, Answered(Answer::Auth), false),
        (0x12, Replication, false),
        (0x13, Replication, false),
        (0x15, Replication, false),
        (0x16, Answered(Answer::Prepare), true),
        (0x17, Answered(Answer::Result), true),
        (0x18, Unanswered, true),
        (0x19, Unanswered, true),
        (0x1a, Answered(Answer::OnePacket), true),
        (0x1b, Answered(Answer::OnePacket), true),
        (0x1c, Answered(Answer::Rows), true),
        (0x1e, Replication, false),
        (0x1f, Answered(Answer::OnePacket), true),
        (0xfa, Answered(Answer::Result), true),
    ];

    #[test]
    fn every_command_byte_keeps_its_policy() {
        for cmd in 0..=255u8 {
            let listed = LISTED.iter().find(|(byte, ..)| *byte == cmd);
            let (policy, pipelines) = listed.map_or((Unlisted, true), |&(_, p, pipes)| (p, pipes));
            assert_eq!(CommandPolicy::of(cmd), policy, "0x{cmd:02x}");
            assert_eq!(policy.pipelines(), pipelines, "0x{cmd:02x}");
            let relayed = matches!(policy, Answered(_) | Unanswered);
            assert_eq!(policy.is_relayed(), relayed, "0x{cmd:02x}");
        }
    }

    #[test]
    fn only_a_change_user_or_a_load_data_query_waits_for_the_client() {
        for cmd in 0..=255u8 {
            let plain = [&[cmd][..], b"SELECT 'in', 'file'"].concat();
            assert_eq!(waits_for_the_client(&plain), cmd == 0x11, "0x{cmd:02x}");
            let load = [&[cmd][..], b"load data local InFile 'x' into table t"].concat();
            assert_eq!(waits_for_the_client(&load), cmd == 0x11 || cmd == 0x03, "0x{cmd:02x}");
            assert_eq!(may_ask_for_a_file(&load), cmd == 0x03, "0x{cmd:02x}");
        }
        assert!(waits_for_the_client(b"\x11"));
        assert!(!waits_for_the_client(b"\x03"));
        assert!(!waits_for_the_client(b"\x03INFIL"));
        assert!(!waits_for_the_client(b""));
        assert!(!may_ask_for_a_file(b""));
    }

    #[test]
    fn the_word_infile_is_found_anywhere_in_any_case() {
        // Every place and case of the word, among other `i`s, and an `i` too near the end.
        let filler = "id in (1, 2) -- i ";
        for at in 0..=filler.len() {
            for word in ["infile", "INFILE", "iNfIlE"] {
                let sql = format!("{}{word}{}", &filler[..at], &filler[at..]);
                assert!(may_ask_for_a_file(&[&[0x03][..], sql.as_bytes()].concat()), "{sql}");
            }
            let sql = format!("{}infil", &filler[..at]);
            assert!(!may_ask_for_a_file(&[&[0x03][..], sql.as_bytes()].concat()), "{sql}");
        }
        assert!(!may_ask_for_a_file(&[&[0x03][..], filler.repeat(20).as_bytes()].concat()));
    }
}
