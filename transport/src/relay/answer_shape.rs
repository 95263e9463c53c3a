//! What the framing reads and reports (sans-IO): the answer a command expects, the client
//! capabilities that shape it, and what a scan found and counted.

use common::wire::TurnEnd;

/// How the answer to a command starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Expect {
    /// A result: OK, ERR, a LOCAL INFILE request or a result set, possibly several
    /// (COM_QUERY, COM_STMT_EXECUTE, COM_STMT_BULK_EXECUTE, COM_PROCESS_INFO).
    Result,
    /// COM_STMT_PREPARE: its OK, then parameter and column definitions.
    Prepare,
    /// COM_STMT_FETCH: rows of a cursor and their terminator.
    Rows,
    /// COM_FIELD_LIST: column definitions until an EOF.
    FieldList,
    /// A login's authentication exchange until OK or ERR (after which a server hangs up).
    Login,
    /// COM_CHANGE_USER's authentication exchange until OK or ERR.
    Auth,
    /// Any one packet (COM_PING, COM_INIT_DB, COM_STATISTICS, COM_SET_OPTION…).
    OnePacket,
}

/// The client capabilities that change an answer's shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// CLIENT_DEPRECATE_EOF: no EOF after column definitions; rows end with an OK.
    pub deprecate_eof: bool,
    /// MARIADB_CLIENT_PROGRESS: ERR packets with code 0xFFFF are progress reports.
    pub progress: bool,
}

/// A protocol violation by the upstream: the conversation cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the upstream sent {0}")]
pub struct Malformed(pub &'static str);

/// What a [`Framing::scan`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Bytes at the start of the buffer that belong to the answer and can be passed on.
    pub used: usize,
    /// Set when the turn ended at `used`.
    pub end: Option<TurnEnd>,
}

/// What an answer said, as far as its headers and first bytes tell (for the audit log).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// Rows of result sets.
    pub rows: u64,
    /// Affected rows of OK results.
    pub affected: u64,
    /// The code of an ERR that ended the answer.
    pub error: Option<u16>,
    /// The statement id a prepare's OK gave.
    pub statement_id: Option<u32>,
    /// The server's status flags in the OK or EOF that ended the answer, if one did.
    pub status: Option<u16>,
}

/// An answer of a pipelined batch that ended before the batch's last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Answered {
    /// What it said.
    pub tally: Tally,
    /// Where it ended, in bytes from the start of the first answer.
    pub end: u64,
}
