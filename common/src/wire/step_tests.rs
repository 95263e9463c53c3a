//! Unit tests of the typed step: both encodings read back what was written, every prefix of a
//! message head is refused (never misread), and garbage never panics.

use proptest::prelude::*;

use super::*;

fn kinds() -> impl Strategy<Value = StepKind> {
    (1u8..=10).prop_map(|code| StepKind::from_code(code).expect("a kind"))
}

fn heads() -> impl Strategy<Value = StepHead> {
    let numbers = (any::<Option<u64>>(), any::<Option<u64>>(), any::<Option<u64>>());
    let upload = any::<Option<(u64, u64, Option<u32>)>>();
    (kinds(), "[a-zA-Z0-9]{1,64}", numbers, upload, any::<bool>()).prop_map(
        |(kind, id, (step, resume_from, decoded), upload, accept_zstd)| {
            let mut head = StepHead::new(kind);
            head.session = kind.in_session().then_some(id);
            head.step = step.or((resume_from.is_some() || upload.is_some()).then_some(7));
            head.resume_from = resume_from;
            head.encoding =
                decoded.map_or(BodyEncoding::Plain, |decoded| BodyEncoding::Zstd { decoded });
            head.upload = upload.map(|(a, b, crc)| UploadAt {
                range: UploadRange { from: a.min(b), total: a.max(b) },
                crc,
            });
            head.accept_zstd = accept_zstd;
            head
        },
    )
}

proptest! {
    #[test]
    fn a_message_head_reads_back_as_written(head in heads(), body in any::<Vec<u8>>()) {
        let mut message = Vec::new();
        head.encode(&mut message);
        let head_len = message.len();
        message.extend_from_slice(&body);
        let (read, at) = StepHead::decode(&message).expect("a step");
        prop_assert_eq!(&read, &head);
        prop_assert_eq!(at, head_len);
        prop_assert_eq!(&message[at..], &body[..]);
    }

    #[test]
    fn every_cut_of_a_head_is_refused(head in heads()) {
        let mut message = Vec::new();
        head.encode(&mut message);
        for cut in 0..message.len() {
            prop_assert!(StepHead::decode(&message[..cut]).is_err(), "cut at {}", cut);
        }
    }

    #[test]
    fn an_http_request_reads_back_as_written(head in heads()) {
        let http = head.to_http();
        let (path, query) = http.path.split_once('?').map_or((&*http.path, None), |(p, q)| (p, Some(q)));
        let route = Route::parse(http.method, &format!("/prefix/{path}"));
        let values = |name: &'static str| {
            http.headers.iter().filter(move |(n, _)| *n == name).map(|(_, v)| v.as_bytes())
        };
        let read = StepHead::from_http(&route, query, values).expect("valid").expect("a step");
        prop_assert_eq!(read, head);
    }

    #[test]
    fn garbage_never_panics(bytes in any::<Vec<u8>>()) {
        if let Ok((head, at)) = StepHead::decode(&bytes) {
            prop_assert!(at <= bytes.len());
            prop_assert_eq!(head.kind.in_session(), head.session.is_some());
        }
    }
}

#[test]
fn a_command_head_is_a_few_bytes() {
    let mut head = StepHead::new(StepKind::Command);
    head.session = Some("0123456789abcdef0123456789abcdef".into());
    head.step = Some(300);
    let mut message = Vec::new();
    head.encode(&mut message);
    // Kind, flags, id length, 32 digits, a two-byte step number.
    assert_eq!(message.len(), 2 + 1 + 32 + 2);
}

#[test]
fn contradictions_and_unknowns_are_refused() {
    let cases: [(&[u8], &str); 7] = [
        (&[0, 0], "an unknown step kind"),
        (&[11, 0], "an unknown step kind"),
        (&[5, 128], "an unknown step flag"),
        // An upload's CRC without an upload.
        (&[5, 1 | 64, 1, b'a'], "a step message contradicts itself"),
        // A command without its session.
        (&[5, 0], "a step message contradicts itself"),
        // An open with a session.
        (&[1, 1, 1, b'a'], "a step message contradicts itself"),
        // A session id with a dash.
        (&[5, 1, 2, b'a', b'-'], "a step's session id is not one"),
    ];
    for (message, said) in cases {
        match StepHead::decode(message) {
            Err(Error::Wire(what)) => assert_eq!(what, said, "{message:?}"),
            other => panic!("{message:?}: {other:?}"),
        }
    }
    // A resume without a step number.
    assert!(StepHead::decode(&[5, 1 | 4, 1, b'a', 3]).is_err());
    // Eleven bytes of varint, and a tenth byte over 64 bits.
    let mut long = vec![5, 1 | 2, 1, b'a'];
    long.extend([0x80; 10]);
    long.push(0);
    assert!(StepHead::decode(&long).is_err());
    let mut over = vec![5, 1 | 2, 1, b'a'];
    over.extend([0xff; 9]);
    over.push(0x02);
    assert!(StepHead::decode(&over).is_err());
    let mut max = vec![5, 1 | 2, 1, b'a'];
    put_varint(&mut max, u64::MAX);
    assert_eq!(StepHead::decode(&max).expect("u64::MAX").0.step, Some(u64::MAX));
}

#[test]
fn bad_http_headers_say_which() {
    let route = Route::Command("abc".into());
    let said = |headers: &[(&'static str, &'static [u8])]| {
        let values =
            |name: &'static str| headers.iter().filter(move |(n, _)| *n == name).map(|(_, v)| *v);
        match StepHead::from_http(&route, None, values) {
            Err(e) => e.to_string(),
            Ok(head) => format!("accepted: {head:?}"),
        }
    };
    assert_eq!(said(&[(STEP_HEADER, b"x1")]), "x-tunnel-step must be a number");
    assert_eq!(said(&[("content-encoding", b"gzip")]), "Content-Encoding \"gzip\" is not taken");
    assert_eq!(
        said(&[("content-encoding", b"zstd")]),
        "x-tunnel-decoded-length is needed for a zstd body"
    );
    assert_eq!(
        said(&[(UPLOAD_HEADER, b"5/1"), (STEP_HEADER, b"1")]),
        "x-tunnel-upload must be FROM/TOTAL"
    );
    assert_eq!(
        said(&[(UPLOAD_HEADER, b"0/10")]),
        "a resumed step or an upload needs a step number"
    );
    let infile = Route::Infile("abc".into());
    let none = |_: &'static str| std::iter::empty();
    let e = StepHead::from_http(&infile, None, none).expect_err("no infile header");
    assert_eq!(e.to_string(), "x-tunnel-infile must be `more` or `end`");
    assert_eq!(StepHead::from_http(&Route::Health, None, none).expect("no step"), None);
}

#[test]
fn zstd_answers_are_taken_from_any_accept_encoding_value_and_an_upload_without_a_crc_continues_nothing()
 {
    let route = Route::Command("abc".into());
    let headers: [(&str, &[u8]); 4] = [
        ("accept-encoding", b"gzip"),
        ("accept-encoding", b"br, zstd;q=0.5"),
        (STEP_HEADER, b"3"),
        (UPLOAD_HEADER, b"10/20"),
    ];
    let values =
        |name: &'static str| headers.iter().filter(move |(n, _)| *n == name).map(|(_, v)| *v);
    let head = StepHead::from_http(&route, None, values).expect("valid").expect("a step");
    assert!(head.accept_zstd, "the second value names zstd");
    let upload = head.upload.expect("an upload");
    assert_eq!((upload.range.from, upload.range.total, upload.crc), (10, 20, None));
}
