//! A server's answer as the transport's framing reads it, for every kind of command and client
//! shape, fed in two reads: it finds an end or an error, never claims more bytes than it got.
//! The first two bytes choose the shape and where the input is cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transport::relay::framing::{Expect, Framing, Shape};

const EXPECTS: [Expect; 7] = [
    Expect::Result,
    Expect::Prepare,
    Expect::Rows,
    Expect::FieldList,
    Expect::Login,
    Expect::Auth,
    Expect::OnePacket,
];

fuzz_target!(|data: &[u8]| {
    let Some((&[shape, cut], answer)) = data.split_first_chunk::<2>() else { return };
    let shape = Shape { deprecate_eof: shape & 1 == 1, progress: shape & 2 == 2 };
    let cut = usize::from(cut) * answer.len() / 255;
    for expect in EXPECTS {
        let mut framing = Framing::new(expect, shape);
        let mut buf = answer[..cut].to_vec();
        for more in [&answer[cut..], &[][..]] {
            let Ok(scan) = framing.scan(&buf) else { break };
            assert!(scan.used <= buf.len(), "used {} of {}", scan.used, buf.len());
            if scan.end.is_some() {
                break;
            }
            buf.drain(..scan.used);
            buf.extend_from_slice(more);
        }
    }
});
