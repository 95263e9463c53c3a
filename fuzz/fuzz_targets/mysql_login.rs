//! Login packets from either side: the sidecar's parsers of a client's handshake response and
//! COM_CHANGE_USER, and the transport's of a server greeting and of the response it passes up.
//! The first five bytes choose TLS and the capabilities; the rest is the packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sidecar::protocol::{
    greeting_capabilities, greeting_scramble, parse_change_user, parse_client_hello, split_payloads,
};
use transport::relay::handshake::{ClientLeg, Greeting, greeting_for_client, response_for_upstream};

fuzz_target!(|data: &[u8]| {
    let Some((&[tls, a, b, c, d], packet)) = data.split_first_chunk::<5>() else { return };
    let caps = u32::from_le_bytes([a, b, c, d]);
    drop(parse_client_hello(packet));
    drop(parse_change_user(packet, caps));
    std::hint::black_box(greeting_scramble(packet));
    std::hint::black_box(greeting_capabilities(packet));
    drop(split_payloads(packet));
    let mut p = packet.to_vec();
    if let Some(greeting) = Greeting::parse(&p) {
        std::hint::black_box(greeting.capabilities(&p));
        let leg = ClientLeg { tls: tls & 1 == 1, compression: tls & 4 == 4 };
        greeting_for_client(&greeting, &mut p, leg);
    }
    let mut p = packet.to_vec();
    std::hint::black_box(response_for_upstream(&mut p, tls & 2 == 2));
});
