//! ERR packets as a server sends them (sans-IO): the one reader of their code, SQLSTATE and
//! message, with the SQLSTATE marker or without it (before the greeting), and of the MariaDB
//! progress reports that share their first bytes.

use super::packet;

/// The fields of an ERR payload, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrPacket<'a> {
    /// Error code ([`packet::PROGRESS_REPORT_CODE`] for a MariaDB progress report).
    pub code: u16,
    /// SQLSTATE, when the packet carries one (after a `#` marker).
    pub sqlstate: Option<[u8; 5]>,
    /// Message text: the rest of the payload (only its start when the caller holds no more).
    pub message: &'a [u8],
}

impl<'a> ErrPacket<'a> {
    /// Reads an ERR payload whose code may be followed by `#` and a SQLSTATE, as a server
    /// sends it after the greeting (and as clients read it at any time). `None` when the
    /// payload does not start with 0xFF or is too short to hold a code.
    pub fn parse(payload: &'a [u8]) -> Option<Self> {
        let mut err = Self::parse_before_greeting(payload)?;
        if let Some((&[b'#', a, b, c, d, e], message)) = err.message.split_first_chunk::<6>() {
            err.sqlstate = Some([a, b, c, d, e]);
            err.message = message;
        }
        Some(err)
    }

    /// Reads an ERR payload sent in place of a greeting: a server that does not yet know that
    /// the client speaks protocol 4.1 sends no SQLSTATE, so all after the code is the message.
    pub fn parse_before_greeting(payload: &'a [u8]) -> Option<Self> {
        let (&[first, low, high], message) = payload.split_first_chunk::<3>()?;
        (first == packet::ERR).then_some(Self {
            code: u16::from_le_bytes([low, high]),
            sqlstate: None,
            message,
        })
    }

    /// True for a MariaDB progress report: an ERR packet by its first bytes that ends nothing
    /// (sent only to clients that asked for MARIADB_CLIENT_PROGRESS).
    pub fn is_progress_report(&self) -> bool {
        self.code == packet::PROGRESS_REPORT_CODE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_code_sqlstate_and_message() {
        let err = ErrPacket::parse(b"\xff\x7a\x04#42S02Table 't' doesn't exist");
        assert_eq!(
            err,
            Some(ErrPacket {
                code: 1146,
                sqlstate: Some(*b"42S02"),
                message: b"Table 't' doesn't exist"
            })
        );
        let bare = ErrPacket::parse(b"\xff\x7a\x04#42S02").map(|e| (e.sqlstate, e.message));
        assert_eq!(bare, Some((Some(*b"42S02"), &b""[..])));
    }

    #[test]
    fn reads_errors_without_a_sqlstate() {
        let refused = b"\xff\x10\x04Too many connections";
        let err = ErrPacket::parse(refused).map(|e| (e.code, e.sqlstate, e.message));
        assert_eq!(err, Some((1040, None, &b"Too many connections"[..])));
        assert_eq!(ErrPacket::parse_before_greeting(refused), ErrPacket::parse(refused));
        // A marker too short for a SQLSTATE is message text.
        let short = ErrPacket::parse(b"\xff\x10\x04#HY0").map(|e| (e.sqlstate, e.message));
        assert_eq!(short, Some((None, &b"#HY0"[..])));
        // Before the greeting a leading '#' is message text too.
        let hash = ErrPacket::parse_before_greeting(b"\xff\x10\x04#HY000x").map(|e| e.message);
        assert_eq!(hash, Some(&b"#HY000x"[..]));
    }

    #[test]
    fn tells_progress_reports_from_errors() {
        let progress = ErrPacket::parse(b"\xff\xff\xff\x01\x01\x02\x10\x27\x00\x05stage");
        assert!(progress.is_some_and(|p| p.is_progress_report()));
        assert!(ErrPacket::parse(b"\xff\x7a\x04#42S02no").is_some_and(|e| !e.is_progress_report()));
    }

    #[test]
    fn refuses_what_is_not_an_err_packet() {
        for payload in [&b""[..], b"\xff", b"\xff\x7a", b"\x00\x7a\x04#42S02", b"\xfe\0\0\x02\0"] {
            assert_eq!(ErrPacket::parse(payload), None, "{payload:?}");
            assert_eq!(ErrPacket::parse_before_greeting(payload), None, "{payload:?}");
        }
        let code_only = ErrPacket::parse(b"\xff\x15\x04").map(|e| (e.code, e.message));
        assert_eq!(code_only, Some((1045, &b""[..])));
    }
}
