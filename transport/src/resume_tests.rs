//! Unit tests of the resume slot: steps in order, what is kept within the window and the
//! budget, resumes from any kept byte.

use super::*;
use std::sync::Arc;

use crate::resume_kept::KEPT_CHUNK_COST;
use crate::resume_room::{ResumeBudget, ResumeRoom};
use crate::shares::IdentityCounts;

/// The kept chunks `owner`'s resumed response sends from `from` on.
fn kept_chunks(r: &Resumable, owner: u64, mut from: u64) -> Result<Vec<Bytes>, String> {
    let mut chunks = Vec::new();
    loop {
        match r.kept_chunk(owner, from) {
            KeptChunk::Bytes(chunk) => {
                from += chunk.len() as u64;
                chunks.push(chunk);
            }
            KeptChunk::CaughtUp => return Ok(chunks),
            KeptChunk::Gone => return Err(format!("gone at {from}")),
        }
    }
}

fn resumed_bytes(r: &Resumable, step: u64, from: u64) -> Result<Bytes, String> {
    match r.resume(step, from) {
        Ok(Resumed::Whole(_, owner, from, before)) => {
            assert_eq!(before.len(), from, "the digest covers the bytes before the resume");
            Ok(kept_chunks(r, owner, from)?.concat().into())
        }
        Ok(Resumed::Streamed { .. }) => Err("streamed".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn steps_run_in_order_and_once() {
    let r = Resumable::default();
    assert!(r.begin(2).is_ok(), "step 1 was refused before it began");
    assert!(r.begin(2).is_err(), "a step never runs twice");
    assert!(r.begin(1).is_err(), "nor an older one");
    assert!(r.begin(3).is_ok());
}

#[test]
fn a_step_begun_and_not_yet_answered_is_busy_not_lost() {
    let r = Resumable::default();
    assert!(r.begin(1).is_ok());
    // Its turn is being set up: a resume arriving now is told to come again.
    assert!(matches!(r.resume(1, 0), Err(Error::SessionBusy)));
    r.record_whole(StatusCode::OK, &Bytes::from_static(b"answer"));
    assert_eq!(resumed_bytes(&r, 1, 0), Ok(Bytes::from_static(b"answer")));
}

#[test]
fn a_whole_answer_resumes_from_any_byte() {
    let r = Resumable::default();
    assert!(r.begin(1).is_ok());
    r.record_whole(StatusCode::OK, &Bytes::from_static(b"hello world"));
    assert_eq!(resumed_bytes(&r, 1, 0), Ok(Bytes::from_static(b"hello world")));
    assert_eq!(resumed_bytes(&r, 1, 6), Ok(Bytes::from_static(b"world")));
    assert_eq!(resumed_bytes(&r, 1, 11), Ok(Bytes::new()));
    assert!(resumed_bytes(&r, 1, 12).is_err());
    assert!(resumed_bytes(&r, 2, 0).is_err(), "not the last step");
}

#[test]
fn only_the_window_is_kept() {
    let r = Resumable::default();
    assert!(r.begin(1).is_ok());
    let chunk = Bytes::from(vec![7u8; 1 << 20]);
    {
        let mut state = lock(&r.state);
        for _ in 0..12 {
            state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
        }
        state.complete = true;
    }
    let kept = lock(&r.state).kept.base();
    // (the default window: 8 MiB)
    assert_eq!(kept, 4 << 20, "the oldest 4 of 12 MiB are dropped");
    assert!(resumed_bytes(&r, 1, 0).is_err(), "too far behind");
    assert_eq!(resumed_bytes(&r, 1, 11 << 20).map(|b| b.len()), Ok(1 << 20));
}

#[test]
fn the_budget_bounds_what_all_sessions_keep() {
    let room = (3 << 20) + 3 * KEPT_CHUNK_COST;
    let budget = Arc::new(ResumeBudget::new(room, room));
    let (a, b) = (Arc::new(Resumable::default()), Arc::new(Resumable::default()));
    a.set_budget(ResumeRoom::new(budget.clone(), None));
    b.set_budget(ResumeRoom::new(budget.clone(), None));
    let chunk = Bytes::from(vec![1u8; 1 << 20]);
    for r in [&a, &b] {
        assert!(r.begin(1).is_ok());
        let mut state = lock(&r.state);
        for _ in 0..2 {
            state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
        }
        state.complete = true;
    }
    assert_eq!(budget.used(), room, "the budget is full, not exceeded");
    assert_eq!(resumed_bytes(&a, 1, 0).map(|m| m.len()), Ok(2 << 20), "a kept its answer");
    assert!(resumed_bytes(&b, 1, 0).is_err(), "b kept only its last MiB");
    assert_eq!(resumed_bytes(&b, 1, 1 << 20).map(|m| m.len()), Ok(1 << 20));
    drop(a);
    let one = (1 << 20) + KEPT_CHUNK_COST;
    assert_eq!(budget.used(), one, "a session's room is given back when it goes");
    b.release();
    assert_eq!(budget.used(), 0);
}

#[test]
fn the_digest_before_a_resume_is_that_of_the_bytes_before_it() {
    // Chunks of varied sizes, some dropped by a small window: whatever was kept or dropped,
    // the digest sent with a resume is that of exactly the answer's bytes before it.
    let answer: Vec<u8> = (0..40_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let r = Resumable::default();
    assert!(r.begin(1).is_ok());
    {
        let mut state = lock(&r.state);
        let mut at = 0;
        for size in [1, 999, 5_000, 14_000, 1, 19_999] {
            state.kept.record(&Bytes::copy_from_slice(&answer[at..at + size]), 16_384);
            at += size;
        }
        assert_eq!(at, answer.len());
        state.complete = true;
    }
    let base = lock(&r.state).kept.base() as usize;
    assert!(base > 0, "the window dropped the oldest chunks");
    assert!(r.resume(1, base as u64 - 1).is_err(), "not kept");
    for from in [base, base + 1, base + 7_000, 39_999, 40_000] {
        let Ok(Resumed::Whole(_, owner, _, before)) = r.resume(1, from as u64) else {
            panic!("no resume from {from}");
        };
        let missed = kept_chunks(&r, owner, from as u64).expect("kept");
        assert_eq!(before, AnswerDigest::default().then(&answer[..from]), "from {from}");
        assert_eq!(
            missed.iter().flat_map(|m| m.iter().copied()).collect::<Vec<u8>>(),
            answer[from..]
        );
        // The kept chunks themselves go out, not a copy.
        let kept = &lock(&r.state).kept;
        assert!(missed.iter().all(|m| kept.holds(m)), "from {from}");
    }
}

#[test]
fn a_later_resume_ends_the_one_before_it() {
    let r = Arc::new(Resumable::default());
    assert!(r.begin(1).is_ok());
    r.record_whole(StatusCode::OK, &Bytes::from(vec![7u8; 1000]));
    let first = match r.resume(1, 10) {
        Ok(Resumed::Whole(_, owner, missed, _)) => (owner, missed),
        other => panic!("{other:?}"),
    };
    assert!(r.is_reader(first.0));
    let Ok(Resumed::Whole(_, second, _, _)) = r.resume(1, 20) else { panic!("no resume") };
    assert!(!r.is_reader(first.0) && r.is_reader(second));
    let mut earlier = crate::reply::StreamedTurn::resumed(r.clone(), first.0, first.1);
    let now = futures_util::FutureExt::now_or_never(earlier.next_chunk());
    assert_eq!(now, Some(None), "the earlier resume sends nothing more");
}

#[test]
fn a_new_step_ends_a_resumed_answer_which_held_one_chunk_at_most() {
    let budget = Arc::new(ResumeBudget::new(1 << 20, 1 << 20));
    let r = Arc::new(Resumable::default());
    r.set_budget(ResumeRoom::new(budget.clone(), None));
    assert!(r.begin(1).is_ok());
    r.record_whole(StatusCode::OK, &Bytes::from(vec![7u8; 1000]));
    let Ok(Resumed::Whole(_, owner, from, _)) = r.resume(1, 10) else { panic!("no resume") };
    let mut resumed = crate::reply::StreamedTurn::resumed(r.clone(), owner, from);
    let chunk = futures_util::FutureExt::now_or_never(resumed.next_chunk());
    assert_eq!(chunk.flatten().map(|c| c.len()), Some(990));
    assert!(r.begin(2).is_ok());
    assert_eq!(budget.used(), 0, "the last step's kept bytes are given back");
    // The new step's answer is longer: its bytes are kept where the old response stood.
    r.record_whole(StatusCode::OK, &Bytes::from(vec![8u8; 2000]));
    let now = futures_util::FutureExt::now_or_never(resumed.next_chunk());
    assert_eq!(now, Some(None), "the resumed answer of the last step sends nothing more");
}

#[test]
fn tiny_chunks_are_counted_with_their_bookkeeping() {
    let budget = Arc::new(ResumeBudget::new(65_000, 65_000));
    let r = Arc::new(Resumable::default());
    r.set_budget(ResumeRoom::new(budget.clone(), None));
    assert!(r.begin(1).is_ok());
    let mut state = lock(&r.state);
    for _ in 0..10_000 {
        state.kept.record(&Bytes::from_static(b"x"), DEFAULT_RESUME_WINDOW);
    }
    assert_eq!(budget.used(), 65_000);
    assert_eq!(state.kept.base(), 9_000, "1,000 chunks of a byte and their bookkeeping fill it");
}

/// A session whose kept answers take their room from `budget`, within `owner`'s share.
fn session_in(budget: &Arc<ResumeBudget>, owner: Option<&Arc<IdentityCounts>>) -> Arc<Resumable> {
    let r = Arc::new(Resumable::default());
    r.set_budget(ResumeRoom::new(budget.clone(), owner.cloned()));
    r
}

/// Step `step` of `r` begins and is answered with `answer` at once.
fn answered(r: &Resumable, step: u64, answer: &Bytes) {
    assert!(r.begin(step).is_ok());
    r.record_whole(StatusCode::OK, answer);
}

#[test]
fn a_step_without_room_takes_it_from_idle_sessions_finished_answers_its_identitys_first() {
    let mib = 1u64 << 20;
    let room = 3 * (mib + KEPT_CHUNK_COST);
    let budget = Arc::new(ResumeBudget::new(room, 2 * (mib + KEPT_CHUNK_COST)));
    let (alice, bob) = (Arc::new(IdentityCounts::default()), Arc::new(IdentityCounts::default()));
    let session = |owner: &Arc<IdentityCounts>| session_in(&budget, Some(owner));
    let (idle_alice, idle_bob, running) = (session(&alice), session(&bob), session(&alice));
    let chunk = Bytes::from(vec![1u8; 1 << 20]);
    for r in [&idle_bob, &idle_alice] {
        answered(r, 1, &chunk);
    }
    assert!(running.begin(1).is_ok());
    let mut state = lock(&running.state);
    state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
    assert_eq!(budget.used(), room, "the budget is full");
    state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
    drop(state);
    assert!(resumed_bytes(&running, 1, 0).is_err(), "still running");
    assert_eq!(lock(&running.state).kept.base(), 0, "the running step kept both chunks");
    assert!(resumed_bytes(&idle_alice, 1, 0).is_err(), "alice's idle answer was let go");
    assert_eq!(resumed_bytes(&idle_alice, 1, mib).map(|b| b.len()), Ok(0), "but from its end");
    assert_eq!(resumed_bytes(&idle_bob, 1, 0).map(|b| b.len()), Ok(1 << 20), "bob's is his");
    // Alice is at her share: a third chunk takes the running step's own oldest.
    let mut state = lock(&running.state);
    state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
    assert_eq!(state.kept.base(), mib);
    drop(state);
    // The budget, not a share, is what is short for carol: anyone's finished answer goes.
    let carol = Arc::new(IdentityCounts::default());
    let hers = session(&carol);
    assert!(hers.begin(1).is_ok());
    lock(&hers.state).kept.record(&chunk, DEFAULT_RESUME_WINDOW);
    assert!(!lock(&hers.state).kept.is_empty(), "carol kept hers");
    assert!(resumed_bytes(&idle_bob, 1, 0).is_err(), "bob's idle answer made the room");
}

#[test]
fn a_session_that_finished_another_answer_goes_after_older_ones() {
    let room = 3 * ((1 << 20) + KEPT_CHUNK_COST);
    let budget = Arc::new(ResumeBudget::new(room, room));
    let (a, b, running) =
        (session_in(&budget, None), session_in(&budget, None), session_in(&budget, None));
    let chunk = Bytes::from(vec![1u8; 1 << 20]);
    for r in [&a, &b] {
        answered(r, 1, &chunk);
    }
    // a was listed first, but its last answer is younger than b's.
    answered(&a, 2, &chunk);
    assert!(running.begin(1).is_ok());
    let mut state = lock(&running.state);
    state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
    assert_eq!(budget.used(), room, "the budget is full");
    state.kept.record(&chunk, DEFAULT_RESUME_WINDOW);
    drop(state);
    assert!(resumed_bytes(&b, 1, 0).is_err(), "b's older answer went first");
    assert_eq!(resumed_bytes(&a, 2, 0).map(|x| x.len()), Ok(1 << 20), "a's younger one stays");
}
