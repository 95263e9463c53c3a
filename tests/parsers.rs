//! Every parser of bytes from the network, fed arbitrary bytes and mangled real input: it
//! answers (a value or an error), never panics, never loops, never reads past its input. A
//! property-based stand-in for fuzzing that runs in every test run; the cases per property are
//! set by `PROPTEST_CASES` (default here: 4,000).

use bytes::BytesMut;
use common::wire::{FrameDecoder, Route, TurnEnd, encode_heartbeat, encode_packets, encode_turn};
use proptest::prelude::*;
use sidecar::http::{BodyDecoder, Decoded};
use sidecar::protocol::{
    greeting_capabilities, greeting_scramble, parse_change_user, parse_client_hello, split_payloads,
};
use transport::relay::framing::{Expect, Framing, Shape};
use transport::relay::handshake::{
    ClientLeg, Greeting, greeting_for_client, response_for_upstream,
};
use transport::relay::request::{check_file_piece, commands_asked};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4000);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Bytes: arbitrary, or a real sample with a few bytes overwritten and maybe cut short.
fn bytes_like(sample: &'static [u8]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600),
        (prop::collection::vec((any::<usize>(), any::<u8>()), 0..8), any::<usize>()).prop_map(
            move |(edits, cut)| {
                let mut v = sample.to_vec();
                for (at, b) in edits {
                    let n = v.len();
                    v[at % n] = b;
                }
                v.truncate(cut % (sample.len() + 1));
                v
            }
        ),
    ]
}

/// A handshake response of `mysql_native_password` with a database.
const HELLO: &[u8] = b"\x8d\xa2\x0a\x00\x00\x00\x00\x01\x21\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00app\x00\x14aaaaaaaaaaaaaaaaaaaa tunnel_test\x00mysql_native_password\x00";
/// A MariaDB greeting.
const GREETING: &[u8] = b"\x0a5.5.5-10.11.19-MariaDB\x00\x05\x00\x00\x00abcdefgh\x00\xfe\xf7\x2d\x02\x00\xff\x81\x15\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00ijklmnopqrst\x00mysql_native_password\x00";
/// A text result: one column, one row, EOF-terminated.
const RESULT: &[u8] = b"\x01\x00\x00\x01\x01\x17\x00\x00\x02\x03def\x00\x00\x00\x011\x00\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00\x05\x00\x00\x03\xfe\x00\x00\x02\x00\x02\x00\x00\x04\x011\x05\x00\x00\x05\xfe\x00\x00\x02\x00";
/// A chunked HTTP body.
const CHUNKED: &[u8] = b"5\r\nhello\r\n0\r\n\r\n";

proptest! {
    #![proptest_config(config())]

    #[test]
    fn compressed_packets(p in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let (mut input, mut out) = (BytesMut::from(&p[..]), BytesMut::new());
        while let Ok(Some(_)) = common::mysql::compressed::decode(&mut input, &mut out, 1 << 20) {}
    }

    #[test]
    fn sidecar_login_packets(p in bytes_like(HELLO), caps in any::<u32>()) {
        drop(parse_client_hello(&p));
        drop(parse_change_user(&p, caps));
        std::hint::black_box(greeting_scramble(&p));
        std::hint::black_box(greeting_capabilities(&p));
        drop(split_payloads(&p));
    }

    #[test]
    fn transport_handshake_packets(
        mut p in bytes_like(GREETING),
        tls in any::<bool>(),
        compression in any::<bool>(),
    ) {
        if let Some(g) = Greeting::parse(&p) {
            std::hint::black_box(g.capabilities(&p));
            greeting_for_client(&g, &mut p, ClientLeg { tls, compression });
        }
        std::hint::black_box(response_for_upstream(&mut p, tls));
    }

    #[test]
    fn transport_command_bodies(p in bytes_like(b"\x03\x00\x00\x00\x03DO 1\x01\x00\x00\x00\x0e")) {
        let answer = commands_asked(&p);
        std::hint::black_box(&answer);
        // A file piece: accepted only when nothing follows its end.
        for last in [false, true] {
            if let Ok(seq) = check_file_piece(&p, p.get(3).copied().unwrap_or(0).wrapping_sub(1), last) {
                prop_assert!(!last || p.ends_with(&[0, 0, 0, seq]));
            }
        }
    }

    #[test]
    fn upstream_answers(p in bytes_like(RESULT), split in any::<usize>(), eof in any::<bool>(), progress in any::<bool>()) {
        for expect in [Expect::Result, Expect::Prepare, Expect::Rows, Expect::FieldList, Expect::Login, Expect::Auth, Expect::OnePacket] {
            let mut framing = Framing::new(expect, Shape { deprecate_eof: eof, progress });
            // Fed in two pieces, as reads deliver it; what is used is never more than given.
            let cut = split % (p.len() + 1);
            let mut buf = p[..cut].to_vec();
            for more in [&p[cut..], &[][..]] {
                match framing.scan(&buf) {
                    Ok(scan) => {
                        prop_assert!(scan.used <= buf.len());
                        if scan.end.is_some() { break; }
                        buf.drain(..scan.used);
                        buf.extend_from_slice(more);
                    }
                    Err(_) => break,
                }
            }
        }
    }

    #[test]
    fn tunnel_frames(p in prop_oneof![prop::collection::vec(any::<u8>(), 0..600), Just(frames())], cut in any::<usize>()) {
        let mut decoder = FrameDecoder::new(1 << 16);
        let cut = cut % (p.len() + 1);
        decoder.extend(&p[..cut]);
        let mut n = 0;
        while let Ok(Some(_)) = decoder.next_frame() { n += 1; prop_assert!(n <= p.len()); }
        decoder.extend(&p[cut..]);
        while let Ok(Some(_)) = decoder.next_frame() { n += 1; prop_assert!(n <= p.len()); }
    }

    #[test]
    fn http_bodies_and_routes(p in bytes_like(CHUNKED), path in "[ -~]{0,80}", method in "[A-Z]{0,8}") {
        let mut decoder = BodyDecoder::chunked();
        let mut buf = BytesMut::from(&p[..]);
        for _ in 0..=p.len() {
            match decoder.decode(&mut buf) {
                Ok(Decoded::Data(_)) => {}
                Ok(Decoded::NeedMore) => { drop(decoder.at_eof()); break; }
                Ok(Decoded::Done) | Err(_) => break,
            }
        }
        drop(Route::parse(&method, &path));
    }
}

/// A valid frame stream: packets, a heartbeat, a turn's end.
fn frames() -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_packets(&mut out, RESULT);
    encode_heartbeat(&mut out);
    encode_turn(&mut out, TurnEnd::Done);
    out.to_vec()
}
