//! What crosses HTTP between the binaries: the frame stream the sidecar decodes (in two reads),
//! a chunked body, a zstd answer decoded in bounded pieces, and a request line's method and path
//! as the transport routes them. The first byte says where the input is cut.
#![no_main]

use bytes::BytesMut;
use common::wire::{FrameDecoder, Route, StreamDecompressor};
use libfuzzer_sys::fuzz_target;
use sidecar::http::{BodyDecoder, Decoded};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let cut = usize::from(cut) * rest.len() / 255;
    let mut frames = FrameDecoder::new(1 << 16);
    let mut decoded = 0;
    for piece in [&rest[..cut], &rest[cut..]] {
        frames.extend(piece);
        while let Ok(Some(_)) = frames.next_frame() {
            decoded += 1;
            assert!(decoded <= rest.len(), "more frames than bytes");
        }
    }
    let mut body = BodyDecoder::chunked();
    let mut buf = BytesMut::from(rest);
    for _ in 0..=rest.len() {
        match body.decode(&mut buf) {
            Ok(Decoded::Data(_)) => {}
            Ok(Decoded::NeedMore) => {
                drop(body.at_eof());
                break;
            }
            Ok(Decoded::Done) | Err(_) => break,
        }
    }
    if let Ok(mut inflate) = StreamDecompressor::new() {
        let mut out = BytesMut::new();
        for piece in [&rest[..cut], &rest[cut..]] {
            inflate.push(piece);
            // Each pull is bounded; garbage is an error, never a panic or a flood.
            while let Ok(n) = inflate.pull(&mut out, 4096) {
                assert!(n <= 4096, "a piece over its bound");
                if n == 0 || out.len() > 1 << 20 {
                    break;
                }
            }
        }
    }
    let text = String::from_utf8_lossy(rest);
    let (method, path) = text.split_once(' ').unwrap_or(("GET", &text));
    drop(Route::parse(method, path));
});
