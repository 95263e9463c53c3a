//! Encoders for the generic response packets: OK, ERR, EOF, and a result set's terminator
//! (EOF, or OK with a 0xFE header for clients with CLIENT_DEPRECATE_EOF).

use bytes::{BufMut, BytesMut};
pub use common::mysql::put_lenenc_int;
use common::wire::OkInfo;

/// OK packet (header 0x00). Like real servers (`net_send_ok`), a non-empty info is written as a
/// length-encoded string, which is what every client parses.
pub fn encode_ok(buf: &mut BytesMut, ok: &OkInfo) {
    encode_ok_with_header(buf, 0x00, ok);
}

fn encode_ok_with_header(buf: &mut BytesMut, header: u8, ok: &OkInfo) {
    buf.put_u8(header);
    put_lenenc_int(buf, ok.affected_rows);
    put_lenenc_int(buf, ok.last_insert_id);
    buf.put_u16_le(ok.status);
    buf.put_u16_le(ok.warnings);
    if !ok.info.is_empty() {
        put_lenenc_int(buf, ok.info.len() as u64);
        buf.put_slice(&ok.info);
    }
}

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

/// Classic EOF packet.
pub fn encode_eof(buf: &mut BytesMut, status: u16, warnings: u16) {
    buf.put_u8(0xfe);
    buf.put_u16_le(warnings);
    buf.put_u16_le(status);
}

/// The packet that ends a result set's rows: EOF, or an OK with 0xFE header.
pub fn encode_result_end(buf: &mut BytesMut, status: u16, warnings: u16, deprecate_eof: bool) {
    if deprecate_eof {
        encode_ok_with_header(buf, 0xfe, &OkInfo { status, warnings, ..OkInfo::default() });
    } else {
        encode_eof(buf, status, warnings);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn ok_packet_bytes() {
        let mut b = BytesMut::new();
        let ok = OkInfo {
            affected_rows: 300,
            last_insert_id: 1,
            status: 2,
            warnings: 1,
            info: Bytes::from_static(b"hi"),
        };
        encode_ok(&mut b, &ok);
        assert_eq!(&b[..], &[0x00, 0xfc, 0x2c, 0x01, 0x01, 0x02, 0x00, 0x01, 0x00, 2, b'h', b'i']);
    }

    #[test]
    fn err_and_terminators() {
        let mut b = BytesMut::new();
        encode_err(&mut b, 1146, b"42S02", b"no");
        assert_eq!(&b[..], &[0xff, 0x7a, 0x04, b'#', b'4', b'2', b'S', b'0', b'2', b'n', b'o']);
        let mut b = BytesMut::new();
        encode_result_end(&mut b, 0x22, 3, false);
        assert_eq!(&b[..], &[0xfe, 3, 0, 0x22, 0]);
        let mut b = BytesMut::new();
        encode_result_end(&mut b, 0x22, 3, true);
        assert_eq!(&b[..], &[0xfe, 0, 0, 0x22, 0, 3, 0]);
    }
}
