//! A request body as the transport reads it (which answers its commands expect, whether a
//! file piece ends the file), a client's packets as the sidecar splits them and finds its
//! logical packets, and a client's bytes in the compressed protocol as the sidecar inflates
//! them (bounded).
#![no_main]

use libfuzzer_sys::fuzz_target;
use transport::relay::request::{check_file_piece, commands_asked};

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(commands_asked(data).ok());
    std::hint::black_box(check_file_piece(data, 0, true).ok());
    drop(sidecar::protocol::split_payloads(data));
    std::hint::black_box(common::mysql::packets::logical_packet(data, 1 << 20));
    let (mut input, mut out) = (bytes::BytesMut::from(data), bytes::BytesMut::new());
    while let Ok(Some(_)) = common::mysql::compressed::decode(&mut input, &mut out, 1 << 20) {}
});
