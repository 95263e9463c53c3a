//! Unit tests of an answer head read from its headers.

use common::wire::{
    ANSWER_CRC_HEADER, HEARTBEAT_HEADER, PIPELINE_HEADER, REQUEST_ENCODING_HEADER,
    RESUMED_FROM_HEADER, SESSION_HEADER, SESSION_TIMEOUT_HEADER,
};

use super::*;

#[test]
fn each_header_the_sidecar_reads_lands_in_its_own_field_in_any_case() {
    let headers = [
        ("Content-Type", "application/x-frames"),
        ("CONTENT-ENCODING", "zstd"),
        (SESSION_HEADER, "abc"),
        (SESSION_TIMEOUT_HEADER, "30000"),
        (HEARTBEAT_HEADER, "5000"),
        (REQUEST_ENCODING_HEADER, "gzip, zstd"),
        (PIPELINE_HEADER, "16"),
        (RESUMED_FROM_HEADER, "42"),
        (ANSWER_CRC_HEADER, "deadbeef"),
        ("Sec-WebSocket-Accept", "key"),
        ("sec-websocket-protocol", "proto"),
        ("x-unknown", "ignored"),
        // A header given twice: the first counts.
        ("content-type", "second"),
    ];
    let head = ResponseHead::from_headers(200, "OK", headers.into_iter());
    assert_eq!(head.content_type, "application/x-frames");
    assert_eq!(head.content_encoding, "zstd");
    assert_eq!(head.session, "abc");
    assert_eq!(head.session_timeout_ms, Some(30_000));
    assert_eq!(head.heartbeat_ms, Some(5_000));
    assert!(head.takes_zstd);
    assert_eq!(head.pipeline, Some(16));
    let proof = common::wire::ResumeProof { from: 42, crc: 0xdead_beef };
    assert_eq!(head.resumed, Some(proof));
    assert_eq!(head.upgrade, ("key".into(), "proto".into()));
    let none = ResponseHead::from_headers(204, "No Content", std::iter::empty());
    assert!(none.content_type.is_empty() && none.pipeline.is_none() && !none.takes_zstd);
}
