//! Passwords out of the audit log: in a statement's text, a string literal that gives a
//! password is written as `'***'`. That is a literal after `IDENTIFIED … BY | AS | USING`
//! (`CREATE USER`, `ALTER USER`, `GRANT`), or after a word that ends in `PASSWORD`, past an
//! `=`, a `(` or a `BY`/`AS`/`USING` (`SET PASSWORD = PASSWORD('…')`, `CHANGE MASTER TO
//! MASTER_PASSWORD = '…'`, `CREATE SERVER … OPTIONS (PASSWORD '…')`,
//! `IDENTIFIED WITH caching_sha2_password BY '…'`). The server's own logs rewrite these
//! statements the same way.

/// `sql` with every password literal replaced by `'***'`; borrowed when there is none.
pub fn redact_passwords(sql: &str) -> std::borrow::Cow<'_, str> {
    let bytes = sql.as_bytes();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    // What the words so far say about the next literal.
    let (mut identified, mut after_password, mut by) = (false, false, false);
    // `SET PASSWORD FOR user = '…'`: the literal after the `=` past the user.
    let mut password_for = false;
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        match b {
            b'\'' | b'"' => {
                let end = literal_end(bytes, at);
                if (identified && by) || after_password {
                    cuts.push((at, end));
                }
                (after_password, by) = (false, false);
                if password_for {
                    at = end;
                    continue;
                }
                if identified {
                    identified = false;
                }
                at = end;
            }
            b'-' if bytes.get(at + 1) == Some(&b'-') => at = line_end(bytes, at),
            b'#' => at = line_end(bytes, at),
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = sql[at + 2..].find("*/").map_or(bytes.len(), |i| at + 2 + i + 2);
            }
            b'=' if password_for => {
                (password_for, after_password) = (false, true);
                at += 1;
            }
            b'=' | b'(' | b' ' | b'\t' | b'\r' | b'\n' => at += 1,
            b';' | b',' | b')' => {
                (identified, after_password, by, password_for) = (false, false, false, false);
                at += 1;
            }
            _ if b.is_ascii_alphanumeric() || b == b'_' || b == b'`' || b == b'@' => {
                let start = at;
                while at < bytes.len()
                    && (bytes[at].is_ascii_alphanumeric()
                        || matches!(bytes[at], b'_' | b'`' | b'@' | b'$'))
                {
                    at += 1;
                }
                let word = &sql[start..at];
                if word.eq_ignore_ascii_case("identified") {
                    identified = true;
                } else if after_password && word.eq_ignore_ascii_case("for") {
                    (password_for, after_password) = (true, false);
                } else if password_for {
                    // The user it names, up to the `=`.
                } else if ["by", "as", "using"].iter().any(|k| word.eq_ignore_ascii_case(k)) {
                    by = identified || after_password;
                } else if word.len() >= 8 && word[word.len() - 8..].eq_ignore_ascii_case("password")
                {
                    after_password = true;
                } else if !identified {
                    (after_password, by) = (false, false);
                }
            }
            _ => {
                (after_password, by) = (false, false);
                at += 1;
            }
        }
    }
    if cuts.is_empty() {
        return std::borrow::Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut from = 0;
    for (start, end) in cuts {
        out.push_str(&sql[from..start]);
        out.push_str("'***'");
        from = end;
    }
    out.push_str(&sql[from..]);
    std::borrow::Cow::Owned(out)
}

/// Where the string literal that opens at `start` ends (past its closing quote; a doubled or
/// backslash-escaped quote does not close it).
fn literal_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            q if q == quote && bytes.get(at + 1) == Some(&quote) => at += 2,
            q if q == quote => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| from + i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_in_every_form() {
        let cases = [
            (
                "CREATE USER 'bob'@'%' IDENTIFIED BY 's3cret'",
                "CREATE USER 'bob'@'%' IDENTIFIED BY '***'",
            ),
            (
                "alter user bob@localhost identified by \"p'w\", 'eve' IDENTIFIED BY 'x''y'",
                "alter user bob@localhost identified by '***', 'eve' IDENTIFIED BY '***'",
            ),
            ("SET PASSWORD = PASSWORD('pw')", "SET PASSWORD = PASSWORD('***')"),
            ("SET PASSWORD FOR 'bob'@'%' = 'pw'", "SET PASSWORD FOR 'bob'@'%' = '***'"),
            (
                "GRANT ALL ON *.* TO 'bob'@'%' IDENTIFIED BY 'pw' WITH GRANT OPTION",
                "GRANT ALL ON *.* TO 'bob'@'%' IDENTIFIED BY '***' WITH GRANT OPTION",
            ),
            (
                "CHANGE MASTER TO MASTER_HOST='db', MASTER_PASSWORD = 'pw', MASTER_PORT=3306",
                "CHANGE MASTER TO MASTER_HOST='db', MASTER_PASSWORD = '***', MASTER_PORT=3306",
            ),
            (
                "CREATE USER a IDENTIFIED WITH caching_sha2_password BY 'pw'",
                "CREATE USER a IDENTIFIED WITH caching_sha2_password BY '***'",
            ),
            (
                "CREATE USER a IDENTIFIED VIA ed25519 USING PASSWORD('pw')",
                "CREATE USER a IDENTIFIED VIA ed25519 USING PASSWORD('***')",
            ),
            (
                "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'u', PASSWORD 'pw')",
                "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'u', PASSWORD '***')",
            ),
            (
                "ALTER USER bob IDENTIFIED BY 'a\\'b' PASSWORD EXPIRE",
                "ALTER USER bob IDENTIFIED BY '***' PASSWORD EXPIRE",
            ),
        ];
        for (sql, redacted) in cases {
            assert_eq!(redact_passwords(sql), redacted, "{sql}");
        }
    }

    #[test]
    fn other_statements_are_kept_as_they_are() {
        for sql in [
            "SELECT 'identified by', name FROM t WHERE a = 'x'",
            "INSERT INTO t (password, b) VALUES (1, 'kept')",
            "SELECT 1 -- identified by 'x'\n, 'kept'",
            "/* password 'c' */ SELECT 'kept'",
        ] {
            assert!(matches!(redact_passwords(sql), std::borrow::Cow::Borrowed(_)), "{sql}");
        }
    }

    #[test]
    fn never_panics_on_odd_text() {
        for sql in [
            "'",
            "\"",
            "IDENTIFIED BY '",
            "PASSWORD(",
            "/*",
            "--",
            "password = 'x\\",
            "é PASSWORD 'ü'",
        ] {
            drop(redact_passwords(sql));
        }
    }
}
