//! Each logged event on one line of plain text: control characters that a logged value brought
//! (a client's user name, an upstream name it asked for) are written escaped, so that whoever
//! gets text into the log can neither forge a line of it nor send a terminal its control
//! sequences.

use std::io::{self, Write};

use tracing::Metadata;
use tracing_subscriber::fmt::MakeWriter;

/// Makes writers that escape control characters (see [`escape_controls`]).
#[derive(Debug)]
pub struct OneLine<M> {
    inner: M,
    colours: bool,
}

impl<M> OneLine<M> {
    /// Around `inner`; with `colours`, the formatter's own colour codes (`ESC [ … m`) pass.
    pub fn new(inner: M, colours: bool) -> Self {
        Self { inner, colours }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for OneLine<M> {
    type Writer = Escaping<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Escaping { inner: self.inner.make_writer(), colours: self.colours }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        Escaping { inner: self.inner.make_writer_for(meta), colours: self.colours }
    }
}

/// A writer of formatted events, each written whole at once (as the formatter does).
#[derive(Debug)]
pub struct Escaping<W> {
    inner: W,
    colours: bool,
}

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match escape_controls(buf, self.colours) {
            Some(escaped) => self.inner.write_all(&escaped)?,
            None => self.inner.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `event` (a formatted event, ending with its newline) with every control character but that
/// newline and tabs escaped: `\n`, `\r`, else `\u00XX` (C0, DEL, and C1 written in UTF-8),
/// which is also how JSON writes them; with `colours`, `ESC [ digits ; … m` passes. `None`
/// when there is nothing to escape.
pub fn escape_controls(event: &[u8], colours: bool) -> Option<Vec<u8>> {
    let body = event.strip_suffix(b"\n").unwrap_or(event);
    let is_control = |i: usize| match body[i] {
        b'\t' => false,
        0x1b if colours => colour_code(&body[i..]).is_none(),
        b if b < 0x20 || b == 0x7f => true,
        0xc2 => body.get(i + 1).is_some_and(|b| (0x80..=0x9f).contains(b)),
        _ => false,
    };
    let first = (0..body.len()).find(|&i| is_control(i))?;
    let mut out = Vec::with_capacity(event.len() + 16);
    out.extend_from_slice(&body[..first]);
    let mut i = first;
    while i < body.len() {
        if colours && body[i] == 0x1b {
            if let Some(len) = colour_code(&body[i..]) {
                out.extend_from_slice(&body[i..i + len]);
                i += len;
                continue;
            }
        }
        if !is_control(i) {
            out.push(body[i]);
            i += 1;
            continue;
        }
        let code = match body[i] {
            0xc2 => {
                i += 1;
                body[i]
            }
            b => b,
        };
        match code {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.extend_from_slice(format!("\\u{code:04x}").as_bytes()),
        }
        i += 1;
    }
    out.extend_from_slice(&event[body.len()..]);
    Some(out)
}

/// The length of the colour code `bytes` begin with, if they do: `ESC [ … m` with only what
/// the formatter writes (reset, bold, dim, italic, the five level colours), so that a value
/// cannot hide text or paint it black on black.
fn colour_code(bytes: &[u8]) -> Option<usize> {
    let rest = bytes.strip_prefix(b"\x1b[")?;
    let params = rest.iter().take_while(|b| b.is_ascii_digit() || **b == b';').count();
    let known = |p: &[u8]| {
        matches!(p, b"" | b"0" | b"1" | b"2" | b"3" | b"31" | b"32" | b"33" | b"34" | b"35")
    };
    let ours = rest[..params].split(|b| *b == b';').all(known);
    (ours && rest.get(params) == Some(&b'm')).then_some(2 + params + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(event: &str, colours: bool) -> String {
        let out = escape_controls(event.as_bytes(), colours);
        String::from_utf8(out.unwrap_or_else(|| event.as_bytes().to_vec())).expect("utf-8")
    }

    #[test]
    fn a_value_cannot_forge_a_line_or_reach_the_terminal() {
        let forged = "INFO refused upstream=x\n2026-12-07T00:00:00Z  INFO opened identity=alice\n";
        assert_eq!(
            escaped(forged, false),
            "INFO refused upstream=x\\n2026-12-07T00:00:00Z  INFO opened identity=alice\n"
        );
        assert_eq!(escaped("a\rb\x1b[2Jc\x07\x7f\n", false), "a\\rb\\u001b[2Jc\\u0007\\u007f\n");
        // C1 controls (here CSI, U+009B) are terminal escapes too; other UTF-8 passes.
        assert_eq!(escaped("user=\u{9b}2J é ✓\n", false), "user=\\u009b2J é ✓\n");
        assert_eq!(escaped("tab\tkept\n", false), "tab\tkept\n");
        assert!(escape_controls(b"plain line\n", false).is_none(), "nothing to escape: no copy");
    }

    #[test]
    fn the_formatters_colours_pass_only_when_asked_for() {
        let line = "\x1b[32m INFO\x1b[0m user=\x1b]0;title\x07\x1b[2J\n";
        assert_eq!(
            escaped(line, true),
            "\x1b[32m INFO\x1b[0m user=\\u001b]0;title\\u0007\\u001b[2J\n"
        );
        assert_eq!(escaped("\x1b[1;31mred\x1b[0m\n", true), "\x1b[1;31mred\x1b[0m\n");
        // Hidden text, and black on black, are not the formatter's.
        assert_eq!(escaped("a\x1b[8mb\x1b[30;40mc\n", true), "a\\u001b[8mb\\u001b[30;40mc\n");
        assert_eq!(escaped("\x1b[31mred\n", false), "\\u001b[31mred\n");
    }

    #[test]
    fn json_lines_stay_json() {
        let line = "{\"user\":\"a\u{85}b\"}\n";
        let out = escaped(line, false);
        let value: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(value["user"], "a\u{85}b");
    }
}
