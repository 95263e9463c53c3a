//! Unit tests of a request read the same way from either carrier.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use super::*;
use common::seeded::Draw;

/// A message made from a text head, as the sidecar makes them.
fn message(head: &[u8], body: &[u8]) -> Bytes {
    Bytes::from(common::wire::request_from_text(head, body).expect("a head"))
}

#[test]
fn a_message_is_read_in_place_as_its_request() {
    let message = message(
        b"DELETE /db/v1/sessions/ab12?end=kill HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-Tunnel-Step: 7\r\nX-Other: o\r\nAccept-Encoding: gzip\r\nAccept-Encoding: zstd\r\n\r\n",
        b"abc",
    );
    let req = Incoming::from_message(message, 16 * 1024).expect("a request");
    assert_eq!(req.method(), "DELETE");
    assert_eq!(req.path(), "/db/v1/sessions/ab12");
    assert_eq!(req.query(), Some("end=kill"));
    assert_eq!(req.header(&STEP), Some(&b"7"[..]));
    assert_eq!(req.header(&CONTENT_LENGTH), Some(&b"3"[..]));
    assert_eq!(req.header(&RESUME_FROM), None);
    let encodings: Vec<&[u8]> = req.headers(&ACCEPT_ENCODING).collect();
    assert_eq!(encodings, [&b"gzip"[..], b"zstd"]);
    assert!(req.http_headers().is_empty());
    assert_eq!(req.http_version(), None);
    assert_eq!(req.body_len(), Some(3));
    match req.into_body() {
        Body::Whole(body) => assert_eq!(body, Bytes::from_static(b"abc")),
        Body::Streamed(_) => panic!("a message's body is here whole"),
    }
}

#[test]
fn an_http_request_is_read_as_a_message_is() {
    let req = Request::post("/db/v1/sessions/ab12/command?x=1")
        .header("X-Tunnel-Step", "7")
        .header("Accept-Encoding", "gzip")
        .header("Accept-Encoding", "zstd")
        .body(Full::new(Bytes::from_static(b"abc")).map_err(|never| match never {}).boxed())
        .expect("a request");
    let req = Incoming::from_http(req);
    assert_eq!(
        (req.method(), req.path(), req.query()),
        ("POST", "/db/v1/sessions/ab12/command", Some("x=1"))
    );
    assert_eq!(req.header(&STEP), Some(&b"7"[..]));
    assert_eq!(req.header(&RESUME_FROM), None);
    assert_eq!(req.headers(&ACCEPT_ENCODING).count(), 2);
    assert_eq!(req.http_headers().len(), 3);
    assert_eq!(req.http_version(), Some(Version::HTTP_11));
    assert_eq!(req.body_len(), Some(3));
    assert_eq!(req.into_http().expect("still HTTP").uri().path(), "/db/v1/sessions/ab12/command");
    let message = message(b"GET /v1/stream HTTP/1.1\r\n\r\n", b"");
    let req = Incoming::from_message(message, 16 * 1024).expect("a request");
    assert!(req.into_http().is_none(), "a message never upgrades");
}

#[test]
fn each_known_header_has_the_code_of_its_name() {
    for known in [
        &AUTHORIZATION,
        &ACCEPT_ENCODING,
        &CONTENT_TYPE,
        &CONTENT_LENGTH,
        &CONTENT_ENCODING,
        &DECODED_LENGTH,
        &STEP,
        &RESUME_FROM,
        &INFILE,
    ] {
        assert_eq!(common::wire::header_code(known.name.as_str()), Some(known.code));
    }
}

#[test]
fn garbage_and_lies_are_refused() {
    let lies = [
        message(b"POST /v1/relay HTTP/1.1\r\nContent-Length: 9\r\n\r\n", b"abc"),
        message(b"POST /v1/relay HTTP/1.1\r\nContent-Length: 1\r\n\r\n", b"abc"),
        message(b"POST /v1/relay HTTP/1.1\r\nContent-Length: +3\r\n\r\n", b"abc"),
        message(b"P\x01ST /v1/relay HTTP/1.1\r\n\r\n", b""),
        message(b"POST /v1/re\x7flay HTTP/1.1\r\n\r\n", b""),
        message(b"POST v1/relay HTTP/1.1\r\n\r\n", b""),
        message(b"POST /v1/relay HTTP/1.1\r\nX-A: \x7f\r\n\r\n", b""),
        message(b"POST /v1/relay HTTP/1.1\r\nX A: b\r\n\r\n", b""),
    ];
    let garbage = [&b"\x00\x01garbage"[..], b"\x00", b""].map(Bytes::from_static);
    for message in lies.into_iter().chain(garbage) {
        let read = Incoming::from_message(message.clone(), 16 * 1024);
        assert!(matches!(read, Err(Error::BadRequest(_))), "{message:?}");
    }
    let huge = format!("POST /v1/relay HTTP/1.1\r\nX-A: {}\r\n\r\n", "a".repeat(16 * 1024));
    let read = Incoming::from_message(message(huge.as_bytes(), b""), 16 * 1024);
    assert!(read.is_err(), "a head over the limit");
    // What HTTP takes in a value, a message takes too: tabs and bytes over 0x7f.
    let fine = message(b"POST /v1/relay HTTP/1.1\r\nX-A: a\tb\xc3\xa9\r\n\r\n", b"");
    assert!(Incoming::from_message(fine, 16 * 1024).is_ok());
}

/// Bytes drawn mostly from what a head holds, with the odd control or high byte.
fn draw(draw: &mut Draw, len: usize) -> Vec<u8> {
    const USUAL: &[u8] = b"abcXYZ019-_/?=.: \t,;\"()";
    (0..len)
        .map(|_| match draw.below(8) {
            0 => draw.bits() as u8,
            _ => USUAL[draw.below(USUAL.len())],
        })
        .collect()
}

#[test]
fn a_message_is_taken_exactly_when_http_would_take_its_parts() {
    let mut rng = Draw::seeded("messages against the http crate");
    let (mut taken, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let method = if rng.below(4) == 0 { draw(&mut rng, 4) } else { b"POST".to_vec() };
        let mut path = b"/v1/".to_vec();
        let len = rng.below(12);
        path.extend(draw(&mut rng, len));
        let headers: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.below(4))
            .map(|_| {
                let name = match rng.below(3) {
                    0 => b"x-tunnel-step".to_vec(),
                    1 => b"x-other".to_vec(),
                    _ => {
                        let len = 1 + rng.below(6);
                        draw(&mut rng, len)
                    }
                };
                let len = rng.below(10);
                (name, draw(&mut rng, len))
            })
            .collect();
        // The message, written field by field (names spelled out unless known).
        let (Ok(method_text), Ok(path_text)) =
            (std::str::from_utf8(&method), std::str::from_utf8(&path))
        else {
            continue;
        };
        let Ok(mut writer) = common::wire::HeadWriter::request(method_text, path_text, 0) else {
            continue;
        };
        let mut names_ok = true;
        for (name, value) in &headers {
            match std::str::from_utf8(name) {
                Ok(name) if writer.header(name, value).is_ok() => {}
                _ => names_ok = false,
            }
        }
        if !names_ok {
            continue;
        }
        let message = Bytes::from(writer.finish().expect("a head"));
        // What the http crate says of each part.
        let http_takes = http::Method::from_bytes(&method).is_ok()
            && path.iter().all(u8::is_ascii_graphic)
            && headers.iter().all(|(name, value)| {
                http::HeaderName::from_bytes(name).is_ok()
                    && http::HeaderValue::from_bytes(value).is_ok()
            });
        let read = Incoming::from_message(message.clone(), 16 * 1024);
        assert_eq!(read.is_ok(), http_takes, "{message:?}");
        if let Ok(req) = read {
            taken += 1;
            assert_eq!(req.method().as_bytes(), &method[..]);
            assert_eq!(req.path_and_query().as_bytes(), &path[..]);
            // The first value of a known header, and all of them in order.
            let steps: Vec<&[u8]> = headers
                .iter()
                .filter(|(n, _)| n == b"x-tunnel-step")
                .map(|(_, v)| &v[..])
                .collect();
            assert_eq!(req.header(&STEP), steps.first().copied(), "{message:?}");
            assert_eq!(req.headers(&STEP).collect::<Vec<_>>(), steps, "{message:?}");
        } else {
            refused += 1;
        }
    }
    assert!(taken > 1_000 && refused > 1_000, "both kinds drawn: {taken} taken, {refused} refused");
}

#[test]
fn bytes_checked_a_word_at_a_time_are_judged_as_one_at_a_time() {
    let mut rng = Draw::seeded("word checks against byte checks");
    for _ in 0..50_000 {
        let len = rng.below(40);
        let mut bytes: Vec<u8> = draw(&mut rng, len);
        // Now and then a byte at an edge: the ends of a range, a tab, DEL, the high bit.
        if !bytes.is_empty() && rng.below(2) == 0 {
            const EDGES: &[u8] = &[0x00, 0x1f, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0xff, b'\t'];
            let at = rng.below(bytes.len());
            bytes[at] = EDGES[rng.below(EDGES.len())];
        }
        assert_eq!(
            scan::all_value_bytes(&bytes),
            bytes.iter().all(|b| is_value_byte(*b)),
            "{bytes:?}"
        );
        assert_eq!(scan::all_graphic(&bytes), bytes.iter().all(u8::is_ascii_graphic), "{bytes:?}");
    }
}

#[test]
fn a_number_is_read_as_str_parse_reads_it() {
    let mut rng = Draw::seeded("numbers against str::parse");
    let fixed: [&[u8]; 9] = [
        b"",
        b"+",
        b"0",
        b"+7",
        b"-1",
        b"18446744073709551615",
        b"18446744073709551616",
        b"1 ",
        b"\xff",
    ];
    let drawn = (0..20_000).map(|_| {
        const DIGITS: &[u8] = b"0123456789+-a ";
        let len = rng.below(22);
        (0..len)
            .map(|_| {
                let among = if rng.below(4) == 0 { DIGITS.len() } else { 10 };
                DIGITS[rng.below(among)]
            })
            .collect::<Vec<u8>>()
    });
    for value in fixed.iter().map(|v| v.to_vec()).chain(drawn) {
        let parsed = std::str::from_utf8(&value).ok().and_then(|v| v.parse::<u64>().ok());
        assert_eq!(number(&value), parsed, "{value:?}");
    }
}
