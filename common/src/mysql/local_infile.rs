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
    for mode in [Backslashes::Escape, Backslashes::Plain] {
        for name in files_named_in(statement, mode) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(text: &str) -> Vec<Vec<u8>> {
        named_files(text.as_bytes())
    }

    #[test]
    fn load_data_and_xml_statements_name_their_file() {
        for text in [
            "LOAD DATA LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
            "load data local infile \"/tmp/a.csv\" into table t",
            "  \n\tLoAd DaTa LOW_PRIORITY LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
            "LOAD DATA CONCURRENT LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
            "LOAD XML LOCAL INFILE '/tmp/a.csv' INTO TABLE t ROWS IDENTIFIED BY '<r>'",
            "/* c */ -- line\n# hash\nLOAD/**/DATA\n-- \nLOCAL #x\n INFILE'/tmp/a.csv'",
            "/*!50100 LOAD DATA LOCAL INFILE '/tmp/a.csv' INTO TABLE t */",
            "/*M!100100 LOAD DATA */ LOCAL INFILE '/tmp/a.csv'",
        ] {
            assert_eq!(names(text), [b"/tmp/a.csv".to_vec()], "{text}");
            assert!(is_local_infile(text.as_bytes()), "{text}");
            assert!(requested_file_allowed(text.as_bytes(), b"/tmp/a.csv"), "{text}");
            assert!(!requested_file_allowed(text.as_bytes(), b"/etc/passwd"), "{text}");
        }
    }

    #[test]
    fn other_statements_name_no_file() {
        for text in [
            "SELECT 1",
            "",
            "LOAD DATA INFILE '/tmp/a.csv' INTO TABLE t",
            "LOAD DATA LOW_PRIORITY CONCURRENT LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
            "SELECT 'LOAD DATA LOCAL INFILE ''/tmp/a.csv'''",
            "SELECT 1 /* ; LOAD DATA LOCAL INFILE '/tmp/a.csv' */",
            "SELECT 1 -- ; LOAD DATA LOCAL INFILE '/tmp/a.csv'",
            "SELECT 1 # ; LOAD DATA LOCAL INFILE '/tmp/a.csv'",
            "SELECT `;LOAD DATA LOCAL INFILE '/tmp/a.csv'`",
            "EXPLAIN LOAD DATA LOCAL INFILE '/tmp/a.csv' INTO TABLE t",
            "LOAD DATA LOCAL INFILE `/tmp/a.csv` INTO TABLE t",
            "LOAD DATA LOCAL INFILE '/tmp/a.csv",
            "LOADDATA LOCAL INFILE '/tmp/a.csv'",
        ] {
            assert!(names(text).is_empty(), "{text}");
            assert!(!is_local_infile(text.as_bytes()), "{text}");
            assert!(!requested_file_allowed(text.as_bytes(), b"/tmp/a.csv"), "{text}");
        }
    }

    #[test]
    fn a_later_statement_of_a_multi_statement_query_counts() {
        let text =
            "SELECT 1; LOAD DATA LOCAL INFILE 'a' INTO TABLE t;\n/**/load xml local infile 'b'";
        assert_eq!(names(text), [b"a".to_vec(), b"b".to_vec()]);
        assert!(requested_file_allowed(text.as_bytes(), b"b"));
        assert_eq!(names("SELECT ';'; LOAD DATA LOCAL INFILE 'c'"), [b"c".to_vec()]);
        // `--` not followed by a blank is two minus signs, not a comment.
        assert_eq!(names("SELECT 1--1;LOAD DATA LOCAL INFILE 'd'"), [b"d".to_vec()]);
    }

    #[test]
    fn escapes_give_both_readings() {
        let text = r"LOAD DATA LOCAL INFILE 'C:\temp\new\x.csv' INTO TABLE t";
        assert_eq!(names(text), [b"C:\temp\newx.csv".to_vec(), br"C:\temp\new\x.csv".to_vec()]);
        let text = r#"LOAD DATA LOCAL INFILE '\0\'\"\b\n\r\t\Z\\\%\_\q''x' INTO TABLE t"#;
        let escaped = b"\0'\"\x08\n\r\t\x1a\\\\%\\_q'x".to_vec();
        assert_eq!(names(text)[0], escaped);
        // Without backslash escapes the literal ends at the quote after `\0\`.
        assert_eq!(names(text).get(1), Some(&br"\0\".to_vec()));
        assert_eq!(names(r#"LOAD DATA LOCAL INFILE "a""b'c" INTO TABLE t"#), [b"a\"b'c".to_vec()]);
    }

    #[test]
    fn where_statements_split_depends_on_the_reading() {
        // Escaped: one literal. Plain: the literal ends at `\'`, then a LOAD statement.
        let text = r"SELECT 'x\'; LOAD DATA LOCAL INFILE 'f' INTO TABLE t; -- '";
        assert_eq!(names(text), [b"f".to_vec()]);
        assert!(files_named_in(text.as_bytes(), Backslashes::Escape).next().is_none());
    }

    proptest! {
        #[test]
        fn never_panics_on_any_bytes(
            text in proptest::collection::vec(any::<u8>(), 0..200),
            requested in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let _ = requested_file_allowed(&text, &requested);
            let _ = is_local_infile(&text);
        }

        #[test]
        fn never_panics_on_near_statements(parts in proptest::collection::vec(
            prop::sample::select(vec!["LOAD", " ", "DATA", "LOCAL", "INFILE", "'", "\"", "\\",
                "/*", "*/", "/*!", "--", "#", "\n", ";", "`", "a", "LOW_PRIORITY", "XML"]), 0..40)) {
            let _ = named_files(parts.concat().as_bytes());
        }
    }
}
