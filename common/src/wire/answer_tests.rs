//! Unit tests of the typed answer head: both encodings read back what was written, every
//! prefix of a message head is refused, and garbage never panics.

use proptest::prelude::*;

use super::*;

fn contents() -> impl Strategy<Value = Content> {
    prop_oneof![
        Just(Content::None),
        Just(Content::Frames),
        Just(Content::Json),
        "[a-z]{1,20}/[a-z.]{1,20}".prop_map(Content::Other),
    ]
}

fn heads() -> impl Strategy<Value = AnswerHead> {
    let numbers = proptest::array::uniform5(any::<Option<u64>>());
    let flags = proptest::array::uniform3(any::<bool>());
    let resumed = any::<Option<(u64, u32)>>();
    (100u16..1000, contents(), proptest::option::of("[a-zA-Z0-9]{1,64}"), resumed, numbers, flags)
        .prop_map(|(status, content, session, resumed, n, [more, zstd, takes_zstd])| AnswerHead {
            status,
            more,
            content,
            zstd,
            session,
            resumed: resumed.map(|(from, crc)| ResumeProof { from, crc }),
            upload_have: n[0],
            session_timeout_ms: n[1],
            heartbeat_ms: n[2],
            pipeline: n[3],
            upload_part: n[4],
            takes_zstd,
        })
}

proptest! {
    #[test]
    fn a_message_head_reads_back_as_written(head in heads(), body in any::<Vec<u8>>()) {
        let mut message = Vec::new();
        head.encode(&mut message);
        let head_len = message.len();
        message.extend_from_slice(&body);
        let (read, at) = AnswerHead::decode(&message).expect("an answer");
        prop_assert_eq!(&read, &head);
        prop_assert_eq!(at, head_len);
    }

    #[test]
    fn every_cut_of_a_head_is_refused(head in heads()) {
        let mut message = Vec::new();
        head.encode(&mut message);
        for cut in 0..message.len() {
            prop_assert!(AnswerHead::decode(&message[..cut]).is_err(), "cut at {}", cut);
        }
    }

    #[test]
    fn http_headers_read_back_as_written(head in heads()) {
        let headers = head.to_http();
        let pairs = headers.iter().map(|(name, value)| (*name, value.as_bytes()));
        let read = AnswerHead::from_http(head.status, pairs);
        // `more` is the stream's own.
        prop_assert_eq!(read, AnswerHead { more: false, ..head });
    }

    #[test]
    fn garbage_never_panics(bytes in any::<Vec<u8>>()) {
        if let Ok((_, at)) = AnswerHead::decode(&bytes) {
            prop_assert!(at <= bytes.len());
        }
    }
}

#[test]
fn a_small_answer_head_is_a_few_bytes_and_bad_ones_are_refused() {
    let head = AnswerHead { status: 200, content: Content::Frames, ..AnswerHead::default() };
    let mut message = Vec::new();
    head.encode(&mut message);
    assert_eq!(message, [0, 0, 0, 200, 1]);
    assert!(AnswerHead::decode(&[4, 0, 0, 200, 1]).is_err(), "an unknown flag");
    assert!(AnswerHead::decode(&[0, 0, 0, 99, 1]).is_err(), "a status out of range");
    assert!(AnswerHead::decode(&[0, 0, 0, 200, 9]).is_err(), "an unknown content kind");
    assert!(AnswerHead::decode(&[0, 4, 0, 201, 1, 1, b'-']).is_err(), "a bad session id");
}

#[test]
fn of_a_header_given_twice_the_first_counts_and_bad_values_are_left_out() {
    let headers: [(&str, &[u8]); 5] = [
        ("content-type", b"application/json"),
        ("content-type", b"text/plain"),
        (PIPELINE_HEADER, b"x16"),
        (SESSION_HEADER, b"not-an-id"),
        ("x-other", b"ignored"),
    ];
    let head = AnswerHead::from_http(200, headers);
    let expected = AnswerHead { status: 200, content: Content::Json, ..AnswerHead::default() };
    assert_eq!(head, expected);
}
