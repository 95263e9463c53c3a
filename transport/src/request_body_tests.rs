//! Which bodies take room in the byte budget: all but a small plain one a stream message
//! brought whole.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::wire::{BodyEncoding, StepHead, StepKind, compress_whole};
use http_body_util::{BodyExt, Full};

use super::*;
use crate::identity::Caller;

const TOKEN: &str = "budget-token-aaaaaaaaaaaa";

/// A transport's state with one token, and its caller.
async fn state_and_caller() -> (Arc<AppState>, Arc<Caller>) {
    let (reaper, _) = tokio::sync::mpsc::unbounded_channel();
    let mut config = crate::config::TransportConfig::default();
    config.tokens = vec![common::config::Secret::new(TOKEN)];
    let state = Arc::new(AppState::new(config, reaper).expect("state"));
    let bearer = format!("Bearer {TOKEN}");
    let caller = state.identities().authorize(Some(bearer.as_bytes())).await.expect("caller");
    (state, caller)
}

fn command(body: steps::Body, encoding: BodyEncoding) -> Step {
    let mut head = StepHead::new(StepKind::Command);
    head.encoding = encoding;
    Step { head, body }
}

fn whole(bytes: &[u8]) -> Step {
    command(steps::Body::Whole(Bytes::copy_from_slice(bytes)), BodyEncoding::Plain)
}

/// How much of the budget the body of `step` holds once read.
async fn held_by(step: Step) -> usize {
    let (state, caller) = state_and_caller().await;
    let counts = state.shares.counts(&caller.id);
    let budget = Budget { state: &state, caller: &caller, counts: &counts };
    let all = state.inflight.available_permits();
    let (_body, room) =
        read_body_within(step, 1 << 20, Duration::from_secs(1), Some(budget)).await.expect("read");
    let held = all - state.inflight.available_permits();
    assert_eq!(held, room.as_ref().map_or(0, |r| r.permit.num_permits()));
    held
}

#[tokio::test]
async fn only_a_small_plain_body_a_stream_message_brought_takes_no_room() {
    assert_eq!(held_by(whole(b"\x03SELECT 1")).await, 0);
    assert_eq!(held_by(whole(&[b'x'; SMALL_WHOLE_BODY])).await, 0);
    assert_eq!(held_by(whole(&[b'x'; SMALL_WHOLE_BODY + 1])).await, SMALL_WHOLE_BODY + 1);
    // A zstd body is decoded into a copy: it holds room for what it decodes to, however small.
    for decoded in [16_000, 20_000] {
        let plain = vec![b'y'; decoded];
        let packed = compress_whole(&plain).expect("zstd");
        assert!(packed.len() < SMALL_WHOLE_BODY);
        let zstd = BodyEncoding::Zstd { decoded: decoded as u64 };
        assert_eq!(held_by(command(steps::Body::Whole(packed), zstd)).await, decoded);
    }
    // A request's body, as it arrives, takes room however small.
    let streamed = Full::new(Bytes::from_static(b"\x03SELECT 1"))
        .map_err(|never: Infallible| match never {})
        .boxed();
    assert_eq!(held_by(command(steps::Body::Streamed(streamed), BodyEncoding::Plain)).await, 9);
}
