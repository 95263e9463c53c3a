//! What the transport needs to know of SQL text for clients with multi-statements off: whether
//! it may hold several statements, and where a one-statement text ends when only comments and
//! `;` follow (the upstream, which always allows multi-statements, would answer those with an
//! extra empty result).

/// True when a `;` is followed by more than whitespace and `;`s: only then can the text be
/// several statements (a string or comment holding `;` costs one extra parse upstream).
pub fn may_hold_several_statements(sql: &[u8]) -> bool {
    let end = sql.iter().rposition(|b| !b.is_ascii_whitespace() && *b != b';').map_or(0, |i| i + 1);
    sql[..end].contains(&b';')
}

/// Length of the statement when the text is a statement, a `;`, then nothing but whitespace,
/// `;` and comments (`-- `, `#`, `/* */`, not executable `/*! */`). Quotes (`'`, `"`, `` ` ``)
/// with backslash escapes and doubled quotes are skipped. `None` when there is no such cut.
pub fn statement_end(sql: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < sql.len() {
        match sql[i] {
            quote @ (b'\'' | b'"' | b'`') => i = skip_quoted(sql, i, quote),
            b';' if only_trivia(&sql[i..]) => return Some(i),
            _ => match comment_end(sql, i) {
                Some(end) => i = end,
                None => i += 1,
            },
        }
    }
    None
}

/// Index after the quoted token starting at `start`.
fn skip_quoted(sql: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < sql.len() {
        match sql[i] {
            b'\\' if quote != b'`' => i += 2,
            c if c == quote && sql.get(i + 1) == Some(&quote) => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    sql.len()
}

/// When a plain (not executable) comment starts at `i`, the index after it.
fn comment_end(sql: &[u8], i: usize) -> Option<usize> {
    let rest = &sql[i..];
    let line = rest.starts_with(b"#")
        || (rest.starts_with(b"--") && rest.get(2).is_none_or(|c| c.is_ascii_whitespace()));
    if line {
        return Some(rest.iter().position(|&c| c == b'\n').map_or(sql.len(), |n| i + n + 1));
    }
    if rest.starts_with(b"/*") && !rest.starts_with(b"/*!") && !rest.starts_with(b"/*M!") {
        let close = rest[2..].windows(2).position(|w| w == b"*/")?;
        return Some(i + 2 + close + 2);
    }
    None
}

/// True when `rest` holds only whitespace, `;` and plain comments.
fn only_trivia(rest: &[u8]) -> bool {
    let mut i = 0;
    while i < rest.len() {
        if rest[i].is_ascii_whitespace() || rest[i] == b';' {
            i += 1;
        } else if let Some(end) = comment_end(rest, i) {
            i = end;
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_with_a_separator_inside_is_checked() {
        assert!(!may_hold_several_statements(b"SELECT 1"));
        assert!(!may_hold_several_statements(b"SELECT 1;"));
        assert!(!may_hold_several_statements(b"SELECT 1 ; ;\n "));
        assert!(!may_hold_several_statements(b""));
        assert!(may_hold_several_statements(b"SELECT 1; SELECT 2"));
        assert!(may_hold_several_statements(b"SELECT ';'"));
        assert!(may_hold_several_statements(b"SELECT 1; -- trailing comment"));
    }

    #[test]
    fn cuts_only_before_trailing_comments() {
        assert_eq!(statement_end(b"SELECT 1; -- c"), Some(8));
        assert_eq!(statement_end(b"SELECT 1; # c\n /* d */ ;"), Some(8));
        assert_eq!(statement_end(b"SELECT ';' ; -- c"), Some(11));
        assert_eq!(statement_end(b"SELECT 'a\\';' ; -- c"), Some(14));
        assert_eq!(statement_end(b"SELECT 'it''s;' ; -- c"), Some(16));
        assert_eq!(statement_end(b"SELECT `a;b` ; -- c"), Some(13));
        assert_eq!(statement_end(b"SELECT 1; /*! SELECT 2 */"), None);
        assert_eq!(statement_end(b"SELECT 1; SELECT 2"), None);
        assert_eq!(statement_end(b"SELECT 1; --x"), None);
        assert_eq!(statement_end(b"SELECT '; -- '"), None);
        assert_eq!(statement_end(b"SELECT 1 /* ; */"), None);
    }
}
