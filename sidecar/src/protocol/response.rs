//! The only packets the sidecar writes itself: errors (of the tunnel, or of a `users` login),
//! with a SQLSTATE after the greeting and without one in its place.

use bytes::{BufMut, BytesMut};

/// ERR packet with SQLSTATE marker.
pub fn encode_err(buf: &mut BytesMut, code: u16, sqlstate: &[u8; 5], message: &[u8]) {
    buf.put_u8(0xff);
    buf.put_u16_le(code);
    buf.put_u8(b'#');
    buf.put_slice(sqlstate);
    buf.put_slice(message);
}

/// ERR packet sent in place of a greeting: before the client has said it speaks protocol 4.1,
/// a server sends no SQLSTATE (as for "Too many connections").
pub fn encode_err_before_greeting(buf: &mut BytesMut, code: u16, message: &[u8]) {
    buf.put_u8(0xff);
    buf.put_u16_le(code);
    buf.put_slice(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn err_packets_with_and_without_sqlstate() {
        let mut b = BytesMut::new();
        encode_err(&mut b, 1146, b"42S02", b"no");
        assert_eq!(&b[..], &[0xff, 0x7a, 0x04, b'#', b'4', b'2', b'S', b'0', b'2', b'n', b'o']);
        let mut b = BytesMut::new();
        encode_err_before_greeting(&mut b, 1040, b"Too many connections");
        assert_eq!(&b[..3], &[0xff, 0x10, 0x04]);
        assert_eq!(&b[3..], b"Too many connections");
    }
}
