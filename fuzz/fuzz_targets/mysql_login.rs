//! Login packets from either side: the sidecar's parsers of a client's handshake response and
//! COM_CHANGE_USER, and the transport's of a server greeting and of the response it passes up.
//! The first five bytes choose TLS and the capabilities; the rest is the packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sidecar::protocol::{greeting_scramble, parse_change_user, parse_client_hello, split_payloads};
use transport::relay::handshake::{Greeting, response_for_upstream};

fuzz_target!(|data: &[u8]| {
    let Some((&[tls, a, b, c, d], packet)) = data.split_first_chunk::<5>() else { return };
    let caps = u32::from_le_bytes([a, b, c, d]);
    drop(parse_client_hello(packet));
    drop(parse_change_user(packet, caps));
    std::hint::black_box(greeting_scramble(packet));
    drop(split_payloads(packet));
    let mut p = packet.to_vec();
    if let Some(greeting) = Greeting::parse(&p) {
        std::hint::black_box(greeting.capabilities(&p));
        greeting.for_client(&mut p, tls & 1 == 1);
    }
    let mut p = packet.to_vec();
    std::hint::black_box(response_for_upstream(&mut p, tls & 2 == 2));
});
