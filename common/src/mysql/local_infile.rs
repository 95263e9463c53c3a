//! Whether a server's LOCAL INFILE request answers a `LOAD … LOCAL INFILE` the client sent,
//! sans-IO: the statement text is lexed just enough to find the file each such statement names.
//!
//! A server answers a COM_QUERY with a LOCAL INFILE request (0xFB, then a file name) when the
//! statement was `LOAD DATA [LOW_PRIORITY|CONCURRENT] LOCAL INFILE 'name' …` or `LOAD XML …`.
//! A rogue server (or anything between) can send one in answer to any query, and a client with
//! local files enabled then uploads whatever file it names: the request is honoured only when
//! the client's own text named that file.
//!
//! What counts as named:
//! - every statement of the text is looked at: a multi-statement query (`SELECT 1; LOAD DATA
//!   LOCAL INFILE 'x' …`) asks for its file in a later result. Statements are split at `;`
//!   outside string literals, quoted identifiers and comments;
//! - leading whitespace and comments (`/* */`, `-- `, `#`) are skipped, keywords are
//!   case-insensitive. Executable comments (`/*!50100 … */`, `/*M! … */`) are read as code,
//!   whatever their version;
//! - the name is read from `'…'` or `"…"` both ways a server may read it: with backslash escapes
//!   (`\0 \' \" \b \n \r \t \Z \\`, `\%` and `\_` kept as written, `\x` for any other `x`) and,
//!   as under `NO_BACKSLASH_ESCAPES`, with backslashes as plain bytes. The whole text is lexed
//!   in each of the two modes (a backslash can move where a literal ends, so where statements
//!   split too), and a name either reading finds is accepted. Doubled quotes stand for one.
//!
//! Not modelled (each makes a legitimate request refused, never a foreign one accepted, unless
//! the text holds the statement in the other reading): a `character_set_filesystem` that
//! differs from the client's character set (the server then asks for the converted name),
//! multi-byte character sets whose characters may contain a 0x5C byte.

use std::ops::Range;

/// True iff `requested` (the file name a LOCAL INFILE request carries after its 0xFB byte) is
/// named by a `LOAD DATA|XML … LOCAL INFILE` statement of `statement` (a COM_QUERY's text,
/// after the command byte), in either reading of its literal.
pub fn requested_file_allowed(statement: &[u8], requested: &[u8]) -> bool {
    named_files(statement).iter().any(|name| name == requested)
}

/// True iff `statement` (a COM_QUERY's text) holds a `LOAD DATA|XML … LOCAL INFILE 'name'`
/// statement, in either reading.
pub fn is_local_infile(statement: &[u8]) -> bool {
    !named_files(statement).is_empty()
}

/// Every file name the `LOAD … LOCAL INFILE` statements of `statement` name, each once (the
/// escaped readings first).
pub fn named_files(statement: &[u8]) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    if !holds_infile(statement) {
        // Most statements: the keyword is matched as these bytes, so none is named.
        return names;
    }
    for mode in [Backslashes::Escape, Backslashes::Plain] {
        for name in files_named_in(statement, mode) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Whether `text` holds the bytes `INFILE` in any case: every statement that names a file
/// does (its keyword is matched as those bytes), so the lexer need not read the others.
fn holds_infile(text: &[u8]) -> bool {
    memchr::memchr2_iter(b'i', b'I', text)
        .any(|at| text.get(at + 1..at + 6).is_some_and(|rest| rest.eq_ignore_ascii_case(b"nfile")))
}

/// How a backslash inside a string literal reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backslashes {
    /// The default: it escapes the next byte.
    Escape,
    /// `NO_BACKSLASH_ESCAPES`: a plain byte.
    Plain,
}

/// The file names of the `LOAD … LOCAL INFILE` statements of `text`, read in one mode.
fn files_named_in(text: &[u8], mode: Backslashes) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut lexer = Lexer { text, at: 0, mode };
    let mut expecting = Expecting::Load;
    std::iter::from_fn(move || {
        while let Some(token) = lexer.next_token() {
            if let Token::Semicolon = token {
                expecting = Expecting::Load;
                continue;
            }
            let (next, name) = expecting.after(&token, text, mode);
            expecting = next;
            if name.is_some() {
                return name;
            }
        }
        None
    })
}

/// Where a statement is in the `LOAD … LOCAL INFILE 'name'` sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expecting {
    /// At a statement's start.
    Load,
    /// After `LOAD`.
    DataOrXml,
    /// After `LOAD DATA|XML`.
    PriorityOrLocal,
    /// After `LOW_PRIORITY|CONCURRENT`.
    Local,
    /// After `LOCAL`.
    Infile,
    /// After `INFILE`.
    FileName,
    /// Not such a statement (up to the next `;`).
    Nothing,
}

impl Expecting {
    /// The state after `token`, and the file name when the token completed the sequence.
    fn after(self, token: &Token, text: &[u8], mode: Backslashes) -> (Self, Option<Vec<u8>>) {
        let word = |wanted: &[&str]| match token {
            Token::Word(range) => {
                wanted.iter().any(|w| text[range.clone()].eq_ignore_ascii_case(w.as_bytes()))
            }
            _ => false,
        };
        let next = match self {
            Expecting::Load if word(&["LOAD"]) => Expecting::DataOrXml,
            Expecting::DataOrXml if word(&["DATA", "XML"]) => Expecting::PriorityOrLocal,
            Expecting::PriorityOrLocal if word(&["LOW_PRIORITY", "CONCURRENT"]) => Expecting::Local,
            Expecting::PriorityOrLocal | Expecting::Local if word(&["LOCAL"]) => Expecting::Infile,
            Expecting::Infile if word(&["INFILE"]) => Expecting::FileName,
            Expecting::FileName => {
                if let Token::Literal { body, quote } = token {
                    return (
                        Expecting::Nothing,
                        Some(literal_value(&text[body.clone()], *quote, mode)),
                    );
                }
                Expecting::Nothing
            }
            _ => Expecting::Nothing,
        };
        (next, None)
    }
}

/// One token, as far as finding statements and their first words needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A run of identifier bytes (letters, digits, `_`, `$`, any non-ASCII byte).
    Word(Range<usize>),
    /// A string literal: where its body lies (between the quotes) and its quote.
    Literal {
        /// The bytes between the quotes, escapes not yet read.
        body: Range<usize>,
        /// `'` or `"`.
        quote: u8,
    },
    /// `;`: a statement ends.
    Semicolon,
    /// Anything else (a quoted identifier, an operator, punctuation).
    Other,
}

/// Reads tokens from a statement text, skipping whitespace and comments.
struct Lexer<'a> {
    /// The whole text.
    text: &'a [u8],
    /// Where the next token may begin.
    at: usize,
    /// How backslashes in literals read.
    mode: Backslashes,
}

impl Lexer<'_> {
    /// The next token; `None` at the end (or in an unterminated literal, which ends the text).
    fn next_token(&mut self) -> Option<Token> {
        self.skip_blanks();
        let start = self.at;
        let first = *self.text.get(start)?;
        self.at += 1;
        Some(match first {
            b';' => Token::Semicolon,
            b'\'' | b'"' => {
                let end = self.skip_quoted(first, self.mode)?;
                Token::Literal { body: start + 1..end, quote: first }
            }
            b'`' => {
                self.skip_quoted(b'`', Backslashes::Plain)?;
                Token::Other
            }
            _ if is_word_byte(first) => {
                while self.text.get(self.at).is_some_and(|&b| is_word_byte(b)) {
                    self.at += 1;
                }
                Token::Word(start..self.at)
            }
            _ => Token::Other,
        })
    }

    /// Moves past whitespace, comments, and the markers of executable comments.
    fn skip_blanks(&mut self) {
        loop {
            let rest = &self.text[self.at..];
            match rest {
                [b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c, ..] => self.at += 1,
                [b'#', ..] => self.skip_line(),
                [b'-', b'-'] => self.at = self.text.len(),
                [b'-', b'-', next, ..] if *next <= b' ' || *next == 0x7f => self.skip_line(),
                [b'/', b'*', b'!', ..] => self.skip_version(3),
                [b'/', b'*', b'M', b'!', ..] => self.skip_version(4),
                [b'/', b'*', ..] => {
                    self.at = match rest[2..].windows(2).position(|w| w == b"*/") {
                        Some(end) => self.at + 2 + end + 2,
                        None => self.text.len(),
                    }
                }
                // The end of an executable comment (elsewhere it would be a syntax error).
                [b'*', b'/', ..] => self.at += 2,
                _ => return,
            }
        }
    }

    /// Moves past an executable comment's opening (`marker` bytes) and its version digits.
    fn skip_version(&mut self, marker: usize) {
        self.at += marker;
        while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
    }

    /// Moves past the end of the line.
    fn skip_line(&mut self) {
        self.at = match self.text[self.at..].iter().position(|&b| b == b'\n') {
            Some(newline) => self.at + newline + 1,
            None => self.text.len(),
        }
    }

    /// Moves past a quoted body whose opening `quote` was just read; the offset of its
    /// closing quote, or `None` (and the text's end) when it has none.
    fn skip_quoted(&mut self, quote: u8, mode: Backslashes) -> Option<usize> {
        loop {
            let b = *self.text.get(self.at).or_else(|| {
                self.at = self.text.len();
                None
            })?;
            self.at += 1;
            if b == b'\\' && mode == Backslashes::Escape {
                self.at += 1;
            } else if b == quote {
                if self.text.get(self.at) == Some(&quote) {
                    self.at += 1;
                } else {
                    return Some(self.at - 1);
                }
            }
        }
    }
}

/// The value of a literal's body, read in `mode`.
fn literal_value(body: &[u8], quote: u8, mode: Backslashes) -> Vec<u8> {
    let mut value = Vec::with_capacity(body.len());
    let mut bytes = body.iter().copied();
    while let Some(b) = bytes.next() {
        if b == quote {
            // The first of a doubled quote (the lexer let no lone one through).
            bytes.next();
            value.push(quote);
        } else if b == b'\\' && mode == Backslashes::Escape {
            match bytes.next() {
                Some(b'0') => value.push(0),
                Some(b'b') => value.push(0x08),
                Some(b'n') => value.push(b'\n'),
                Some(b'r') => value.push(b'\r'),
                Some(b't') => value.push(b'\t'),
                Some(b'Z') => value.push(0x1a),
                Some(wildcard @ (b'%' | b'_')) => value.extend_from_slice(&[b'\\', wildcard]),
                Some(other) => value.push(other),
                None => value.push(b'\\'),
            }
        } else {
            value.push(b);
        }
    }
    value
}

/// Whether `b` may be part of an unquoted identifier or keyword.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

#[cfg(test)]
#[path = "local_infile_tests.rs"]
mod tests;
