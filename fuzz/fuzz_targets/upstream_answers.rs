//! A server's answer as the transport's framing reads it, for every kind of command and client
//! shape, alone and pipelined, fed in two reads: it finds an end or an error, never claims
//! more bytes than it got.
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
    // Each kind alone, then the answers to all of them pipelined (the last waits for nothing).
    let pipelined = [EXPECTS[6], EXPECTS[0], EXPECTS[1], EXPECTS[2], EXPECTS[3], EXPECTS[0]];
    let framings = EXPECTS.iter().map(|&e| Framing::new(e, shape));
    for mut framing in framings.chain(Framing::pipelined(pipelined, shape)) {
        let mut scanned = 0;
        let mut buf = answer[..cut].to_vec();
        for more in [&answer[cut..], &[][..]] {
            let Ok(scan) = framing.scan(&buf) else { break };
            assert!(scan.used <= buf.len(), "used {} of {}", scan.used, buf.len());
            scanned += scan.used as u64;
            let answered = framing.take_answered();
            assert!(answered.iter().all(|a| a.end <= scanned), "an answer ends past the scan");
            if scan.end.is_some() {
                break;
            }
            buf.drain(..scan.used);
            buf.extend_from_slice(more);
        }
    }
});
