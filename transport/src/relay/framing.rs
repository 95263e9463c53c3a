//! Where an upstream answer ends: a sans-IO state machine fed the raw bytes the server sends.
//! It reads only packet headers and the few first bytes of a packet that decide the shape
//! (OK/ERR/EOF, a column count, a prepare's counts); every byte passes on unchanged. Commands a
//! client pipelined are answered one after the other in the same stream: the framing then
//! walks their answers in order and ends after the last.

use std::collections::VecDeque;

use common::mysql::err_packet::ErrPacket;
use common::mysql::packets::{PacketHead, lenenc_int, ok_status};
use common::mysql::{packet, status};
use common::wire::TurnEnd;

/// Payload bytes the framing needs to see before it can classify a packet (an OK packet's
/// status lies after two length-encoded integers of up to 9 bytes each).
pub const PEEK: usize = 32;

pub use super::answer_shape::{Answered, Expect, Malformed, Scan, Shape, Tally};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum State {
    ResultHead,
    Columns { left: u64 },
    MetadataEof,
    Rows,
    PrepareHead,
    Definitions { left: u16, then: u16 },
    DefinitionsEof { then: u16 },
    FieldList,
    Auth { login: bool },
    OnePacket,
    Ended(TurnEnd),
}

/// Finds the end of one answer, or of the answers to a pipelined batch, in the upstream's
/// byte stream.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Framing {
    /// What the answer said so far.
    pub tally: Tally,
    /// The answers still to come after the current one (a pipelined batch).
    queued: VecDeque<Expect>,
    /// Answers of the batch that ended, not yet taken.
    answered: Vec<Answered>,
    /// Bytes scanned and used before the current buffer.
    offset: u64,
    shape: Shape,
    state: State,
    /// Payload bytes of the current packet still to pass.
    skip: usize,
    /// The current packet is 16 MiB − 1 long: the next one continues it.
    continued: bool,
    /// Sequence id of the last packet seen.
    last_seq: u8,
    /// An authentication exchange waiting for the client is a login's.
    login: bool,
    /// The files a LOCAL INFILE request may name: those the client's LOAD DATA LOCAL
    /// statements named. A request for any other is the classic rogue-server file read.
    files: Vec<Vec<u8>>,
}

/// Longest file name a LOCAL INFILE request may carry (a path's most on common systems).
const MAX_FILE_NAME: usize = 4096;

impl Framing {
    /// Framing for the answer a command expects.
    pub fn new(expect: Expect, shape: Shape) -> Self {
        Self {
            shape,
            state: first_state(expect),
            skip: 0,
            continued: false,
            last_seq: 0,
            login: expect == Expect::Login,
            files: Vec::new(),
            tally: Tally::default(),
            queued: VecDeque::new(),
            answered: Vec::new(),
            offset: 0,
        }
    }

    /// Framing for the answers to pipelined commands, in order (`None` when there are none).
    /// Only the last may end waiting for the client (a file, an auth packet): the upstream
    /// would read the commands behind it as the client's reply.
    pub fn pipelined(expects: impl IntoIterator<Item = Expect>, shape: Shape) -> Option<Self> {
        let mut expects = expects.into_iter();
        let mut framing = Self::new(expects.next()?, shape);
        framing.queued.extend(expects);
        Some(framing)
    }

    /// The answers of the batch that ended since the last call, oldest first (the last
    /// answer's end is the turn's end instead).
    pub fn take_answered(&mut self) -> Vec<Answered> {
        std::mem::take(&mut self.answered)
    }

    /// What the client must send before this answer goes on (its file, an auth packet), if
    /// the last turn ended waiting for it.
    pub fn waiting_for(&self) -> Option<TurnEnd> {
        match self.state {
            State::Ended(end @ (TurnEnd::AwaitFile | TurnEnd::AwaitAuth)) => Some(end),
            _ => None,
        }
    }

    /// The files the client's statements named for LOAD DATA LOCAL: a LOCAL INFILE request
    /// for one of them ends the turn waiting for it; any other breaks the answer.
    pub fn allow_files(&mut self, files: Vec<Vec<u8>>) {
        self.files = files;
    }

    /// Sequence id of the last packet seen (a login's next packet follows it).
    pub fn last_seq(&self) -> u8 {
        self.last_seq
    }

    /// The client's packets while the turn waited for it (its file) went up to `seq`.
    pub fn set_last_seq(&mut self, seq: u8) {
        self.last_seq = seq;
    }

    /// The sequence id a packet put in next would take, if what was scanned ends on a packet
    /// boundary (a packet of the tunnel's own, an error, may go there).
    pub fn next_seq_at_boundary(&self) -> Option<u8> {
        (self.skip == 0 && !self.continued).then(|| self.last_seq.wrapping_add(1))
    }

    /// Goes on after the client answered what ended the last turn: its file (the rest is a
    /// result) or its auth packet (the exchange goes on).
    pub fn resume(&mut self) {
        self.state = match self.state {
            State::Ended(TurnEnd::AwaitFile) => State::ResultHead,
            State::Ended(TurnEnd::AwaitAuth) => State::Auth { login: self.login },
            other => other,
        };
    }

    /// Scans `buf` (bytes not yet passed on, oldest first) for whole packets of the answer.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Scan, Malformed> {
        let scan = self.scan_packets(buf)?;
        self.offset += scan.used as u64;
        Ok(scan)
    }

    fn scan_packets(&mut self, buf: &[u8]) -> Result<Scan, Malformed> {
        let mut at = 0;
        loop {
            if self.skip > 0 {
                let n = self.skip.min(buf.len() - at);
                at += n;
                self.skip -= n;
                if self.skip > 0 {
                    return Ok(Scan { used: at, end: None });
                }
            }
            if let State::Ended(end) = self.state
                && !self.continued
            {
                if self.queued.is_empty() {
                    return Ok(Scan { used: at, end: Some(end) });
                }
                if end != TurnEnd::Done {
                    return Err(Malformed("an answer waiting for the client inside a pipeline"));
                }
                self.next_answer(at);
                continue;
            }
            let Some(head) = PacketHead::parse(&buf[at..]) else {
                return Ok(Scan { used: at, end: None });
            };
            self.last_seq = head.seq;
            if self.continued {
                self.continued = head.len == packet::MAX_PAYLOAD;
                at += PacketHead::LEN;
                self.skip = head.len;
                continue;
            }
            let start = at + PacketHead::LEN;
            let mut peek_len = head.len.min(PEEK);
            if self.state == State::ResultHead && buf.get(start) == Some(&packet::LOCAL_INFILE) {
                // A file request is read whole: the name it asks for decides.
                peek_len = head.len.min(1 + MAX_FILE_NAME);
            }
            if buf.len() < start + peek_len {
                return Ok(Scan { used: at, end: None });
            }
            self.decide(&buf[start..start + peek_len], head.len)?;
            at = start;
            self.skip = head.len;
            self.continued = head.len == packet::MAX_PAYLOAD;
        }
    }

    /// The answer that ended at `at` of the current buffer is done: the next queued one starts.
    fn next_answer(&mut self, at: usize) {
        let tally = std::mem::take(&mut self.tally);
        self.answered.push(Answered { tally, end: self.offset + at as u64 });
        if let Some(expect) = self.queued.pop_front() {
            self.state = first_state(expect);
            self.login = expect == Expect::Login;
            // The next answer's packets are numbered from its command's.
            self.last_seq = 0;
        }
    }

    /// Moves on by one packet whose payload starts with `p` (at most [`PEEK`] bytes) and is
    /// `len` bytes long.
    fn decide(&mut self, p: &[u8], len: usize) -> Result<(), Malformed> {
        let first = p.first().copied();
        self.count(p, len);
        let mut ended_with = None;
        let mut done = |status: u16| {
            ended_with = Some(status);
            if status & status::MORE_RESULTS_EXISTS != 0 {
                State::ResultHead
            } else {
                State::Ended(TurnEnd::Done)
            }
        };
        self.state = match self.state {
            State::ResultHead => match first {
                Some(packet::OK) => done(ok_status(p).ok_or(Malformed("a short OK packet"))?),
                Some(packet::ERR) if self.is_progress(p) => State::ResultHead,
                Some(packet::ERR) => State::Ended(TurnEnd::Done),
                Some(packet::LOCAL_INFILE) => {
                    let asked = p.get(1..).filter(|_| len <= 1 + MAX_FILE_NAME);
                    if !asked.is_some_and(|name| self.files.iter().any(|f| f == name)) {
                        return Err(Malformed(
                            "a LOCAL INFILE request for a file no LOAD DATA LOCAL of the client named",
                        ));
                    }
                    State::Ended(TurnEnd::AwaitFile)
                }
                Some(_) => match lenenc_int(p) {
                    Some((0, _)) | None => return Err(Malformed("a bad column count")),
                    Some((n, _)) => State::Columns { left: n },
                },
                None => return Err(Malformed("an empty packet for a result")),
            },
            State::Columns { left } => match (left - 1, self.shape.deprecate_eof) {
                (0, true) => State::Rows,
                (0, false) => State::MetadataEof,
                (left, _) => State::Columns { left },
            },
            State::MetadataEof => match first {
                Some(packet::EOF) if len < 9 => {
                    let status = eof_status(p).ok_or(Malformed("a short EOF"))?;
                    if status & status::CURSOR_EXISTS != 0 { done(status) } else { State::Rows }
                }
                Some(packet::ERR) => State::Ended(TurnEnd::Done),
                _ => return Err(Malformed("no EOF after column definitions")),
            },
            State::Rows => match first {
                Some(packet::EOF) if self.is_terminator(len) => {
                    let status =
                        if self.shape.deprecate_eof { ok_status(p) } else { eof_status(p) };
                    done(status.ok_or(Malformed("a short row terminator"))?)
                }
                Some(packet::ERR) if self.is_progress(p) => State::Rows,
                Some(packet::ERR) => State::Ended(TurnEnd::Done),
                _ => State::Rows,
            },
            State::PrepareHead => match first {
                Some(packet::OK) => {
                    let count =
                        |at: usize| p.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
                    let (Some(columns), Some(params)) = (count(5), count(7)) else {
                        return Err(Malformed("a short prepare OK"));
                    };
                    definitions(params, columns)
                }
                _ => State::Ended(TurnEnd::Done),
            },
            State::Definitions { left, then } => match (left - 1, self.shape.deprecate_eof) {
                (0, true) => definitions(then, 0),
                (0, false) => State::DefinitionsEof { then },
                (left, _) => State::Definitions { left, then },
            },
            State::DefinitionsEof { then } => definitions(then, 0),
            State::FieldList => match first {
                // A definition starts with the catalog "def": 0xFE or 0xFF can only end the list.
                Some(packet::EOF | packet::ERR) => State::Ended(TurnEnd::Done),
                _ => State::FieldList,
            },
            State::Auth { login } => match (first, p.get(1).copied()) {
                (Some(packet::OK), _) => State::Ended(TurnEnd::Done),
                (Some(packet::ERR), _) if login => State::Ended(TurnEnd::Closed),
                (Some(packet::ERR), _) => State::Ended(TurnEnd::Done),
                (Some(packet::AUTH_MORE_DATA), Some(packet::FAST_AUTH_OK)) if len == 2 => {
                    State::Auth { login }
                }
                _ => State::Ended(TurnEnd::AwaitAuth),
            },
            State::OnePacket => State::Ended(TurnEnd::Done),
            State::Ended(_) => return Err(Malformed("data after the end of an answer")),
        };
        self.tally.status = ended_with.or(self.tally.status);
        Ok(())
    }

    /// Adds what the packet starting with `p` says to the tally (before the state moves on).
    fn count(&mut self, p: &[u8], len: usize) {
        let progress = self.is_progress(p);
        let terminator = self.is_terminator(len);
        let tally = &mut self.tally;
        match (self.state, p.first().copied()) {
            // A login's or a COM_CHANGE_USER's refusal (an auth answer has no progress report).
            (State::Auth { .. }, Some(packet::ERR)) => {
                tally.error = ErrPacket::parse(p).map(|err| err.code);
            }
            (State::Auth { .. }, _) => {}
            (_, Some(packet::ERR)) if !progress => {
                tally.error = ErrPacket::parse(p).map(|err| err.code);
            }
            (State::ResultHead, Some(packet::OK)) => {
                let affected = p.get(1..).and_then(lenenc_int).map_or(0, |(n, _)| n);
                tally.affected = tally.affected.saturating_add(affected);
            }
            (State::PrepareHead, Some(packet::OK)) => {
                let id = p.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                tally.statement_id = id;
            }
            (State::Rows, Some(packet::EOF)) if terminator => {}
            (State::Rows, Some(packet::ERR)) => {}
            (State::Rows, _) => tally.rows = tally.rows.saturating_add(1),
            _ => {}
        }
    }

    fn is_progress(&self, p: &[u8]) -> bool {
        self.shape.progress && ErrPacket::parse(p).is_some_and(|err| err.is_progress_report())
    }

    /// A 0xFE packet in the rows is their terminator when it is short: an EOF (< 9 bytes) or,
    /// with CLIENT_DEPRECATE_EOF, an OK (a row starting with 0xFE is at least 16 MiB long).
    fn is_terminator(&self, len: usize) -> bool {
        if self.shape.deprecate_eof { len < packet::MAX_PAYLOAD } else { len < 9 }
    }
}

/// Where the answer to a command starts.
fn first_state(expect: Expect) -> State {
    match expect {
        Expect::Result => State::ResultHead,
        Expect::Prepare => State::PrepareHead,
        Expect::Rows => State::Rows,
        Expect::FieldList => State::FieldList,
        Expect::Login => State::Auth { login: true },
        Expect::Auth => State::Auth { login: false },
        Expect::OnePacket => State::OnePacket,
    }
}

/// After a prepare's OK: `first` definitions, then `second`.
fn definitions(first: u16, second: u16) -> State {
    match (first, second) {
        (0, 0) => State::Ended(TurnEnd::Done),
        (0, n) => State::Definitions { left: n, then: 0 },
        (n, then) => State::Definitions { left: n, then },
    }
}

/// Status flags of an EOF payload (`0xfe`, warnings, status).
fn eof_status(p: &[u8]) -> Option<u16> {
    p.get(3..5).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

#[cfg(test)]
#[path = "framing_tests.rs"]
mod tests;
