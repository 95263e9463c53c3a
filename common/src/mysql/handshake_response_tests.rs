//! Unit tests of the HandshakeResponse41 reader, on byte literals.

use super::*;

fn response(caps: u32, filler_tail: u32, tail: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&caps.to_le_bytes());
    v.extend_from_slice(&(16u32 << 20).to_le_bytes());
    v.push(45);
    v.extend_from_slice(&[0; 19]);
    v.extend_from_slice(&filler_tail.to_le_bytes());
    v.extend_from_slice(tail);
    v
}

const FULL: u32 = cap::PROTOCOL_41
    | cap::SECURE_CONNECTION
    | cap::PLUGIN_AUTH
    | cap::CONNECT_WITH_DB
    | cap::PLUGIN_AUTH_LENENC_DATA;

#[test]
fn reads_every_field() {
    let mut tail = b"app\0\x14".to_vec();
    tail.extend_from_slice(&[1; 20]);
    tail.extend_from_slice(b"shop\0caching_sha2_password\0");
    let payload = response(FULL, 0x1d, &tail);
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert_eq!((r.capabilities, r.max_packet, r.collation), (FULL, 16 << 20, 45));
    assert_eq!(r.user, Some(&b"app"[..]));
    assert_eq!(r.auth_response, Some(&[1; 20][..]));
    assert_eq!(r.database, Some(&b"shop"[..]));
    assert_eq!(r.plugin, Some(&b"caching_sha2_password"[..]));
    assert_eq!((r.malformed, r.ssl_request), (None, false));
    assert_eq!(r.mariadb_capabilities(), 0x1d, "a MariaDB client clears LONG_PASSWORD");
    let mysql = response(FULL | cap::LONG_PASSWORD, 0x1d, &tail);
    assert_eq!(HandshakeResponse::parse(&mysql).map(|r| r.mariadb_capabilities()), Some(0));
}

#[test]
fn reads_each_form_of_the_auth_response() {
    let secure = cap::PROTOCOL_41 | cap::SECURE_CONNECTION;
    let payload = response(secure, 0, b"bob\0\x02ab");
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert_eq!((r.auth_response, r.database, r.plugin), (Some(&b"ab"[..]), None, None));
    let payload = response(secure, 0, b"bob\0");
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert_eq!((r.auth_response, r.malformed), (Some(&b""[..]), None), "no length: empty");
    let payload = response(cap::PROTOCOL_41 | cap::CONNECT_WITH_DB, 0, b"bob\0pw\0\0");
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert_eq!((r.auth_response, r.database), (Some(&b"pw"[..]), Some(&b""[..])));
    let long = cap::PROTOCOL_41 | cap::PLUGIN_AUTH_LENENC_DATA;
    let mut tail = b"bob\0\xfc\x2c\x01".to_vec();
    tail.extend_from_slice(&[7; 300]);
    let payload = response(long, 0, &tail);
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert_eq!(r.auth_response, Some(&[7; 300][..]));
}

#[test]
fn recognises_an_ssl_request() {
    let payload = response(cap::PROTOCOL_41 | cap::SSL, 0, b"");
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert!(r.ssl_request);
    assert_eq!((r.user, r.malformed), (None, None));
    let payload = response(cap::PROTOCOL_41 | cap::SSL, 0, b"app\0\0");
    assert!(!HandshakeResponse::parse(&payload).expect("parses").ssl_request);
}

#[test]
fn stops_at_the_first_malformed_field() {
    let cases: [(u32, &[u8], BadField); 7] = [
        (FULL, b"", BadField::UserNotTerminated),
        (FULL, b"no-terminator", BadField::UserNotTerminated),
        (FULL, b"app\0\xfc\xff", BadField::AuthLength),
        (FULL, b"app\0\xfb", BadField::AuthLength),
        (FULL, b"app\0\xfc\xff\xff", BadField::AuthTruncated),
        (cap::PROTOCOL_41, b"app\0password", BadField::AuthNotTerminated),
        (FULL, b"app\0\x01xshop", BadField::DatabaseNotTerminated),
    ];
    for (caps, tail, bad) in cases {
        let payload = response(caps, 0, tail);
        let r = HandshakeResponse::parse(&payload).expect("parses");
        assert_eq!(r.malformed, Some(bad), "{tail:?}");
        assert_eq!((r.database, r.plugin), (None, None), "{tail:?}");
    }
    let payload = response(FULL, 0, b"app\0\x01xshop\0plugin");
    let r = HandshakeResponse::parse(&payload).expect("parses");
    assert_eq!(r.malformed, Some(BadField::PluginNotTerminated));
    assert_eq!((r.user, r.database, r.plugin), (Some(&b"app"[..]), Some(&b"shop"[..]), None));
}

#[test]
fn never_panics_on_short_or_hostile_input() {
    assert_eq!(HandshakeResponse::parse(b"\x16\x03\x01 random junk"), None);
    assert_eq!(HandshakeResponse::parse(&[0xff; 31]), None);
    // A length-encoded length near u64::MAX is a truncated field, not an overflow.
    let huge = response(FULL, 0, b"app\0\xfe\xff\xff\xff\xff\xff\xff\xff\xff");
    let r = HandshakeResponse::parse(&huge).expect("parses");
    assert_eq!(r.malformed, Some(BadField::AuthTruncated));
    let full = response(FULL, 0, b"app\0\x03abcshop\0plugin\0");
    for cut in 0..full.len() {
        let r = HandshakeResponse::parse(&full[..cut]);
        assert_eq!(r.is_some(), cut >= FIXED_LEN, "cut at {cut}");
    }
}
