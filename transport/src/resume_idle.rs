//! The finished answers still kept for a resume, oldest first: where a step that finds no
//! room for its own answer takes it back. A finished answer is kept in case its last bytes
//! were lost on the way (the sidecar then sends its step again); the next step of its session
//! lets it go. Sessions that stay idle keep theirs until then, so without this list a
//! running step could keep nothing while its identity's idle sessions held the whole share.
//! Taking a finished answer's room back only narrows what its session can resume: a resume
//! from its end (the usual one: nothing was lost) still works, one from before it is refused.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Weak};

/// What asking a session to let its finished answer go came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimed {
    /// Its kept bytes were let go (their room given back).
    Freed,
    /// Not now: a step of its runs or waits for a resume, or another thread holds it. It stays
    /// listed.
    Busy,
    /// It keeps nothing of a finished answer: it leaves the list.
    Empty,
    /// Its session finished another answer since it was listed: it goes to the back of the
    /// list (the oldest answers go first, and a busy session's fresh one last).
    Fresh,
}

/// A session whose finished answer may be let go.
pub trait Reclaim: Send + Sync {
    /// Lets the finished answer go, unless a step of the session runs (never waits for a
    /// lock: the caller holds its own session's).
    fn reclaim(&self) -> Reclaimed;
}

/// One listed session: its answer's holder and its identity (the address of its counts; 0
/// for none).
struct Listed {
    holder: Weak<dyn Reclaim>,
    owner: usize,
}

/// The list, and what the last fruitless search saw.
#[derive(Default)]
struct List {
    listed: VecDeque<Listed>,
    /// Length after the last sweep of dropped sessions: the next comes at twice it.
    swept_at: usize,
    /// The count of finished answers, and the owner filter, of the last search that freed
    /// nothing: the same search finds nothing again until another answer finishes.
    fruitless: Option<(u64, Option<usize>)>,
}

/// The sessions with a finished answer kept, oldest listed first.
#[derive(Default)]
pub struct IdleAnswers {
    list: Mutex<List>,
    /// Finished answers with kept bytes, ever.
    finished: AtomicU64,
}

impl std::fmt::Debug for IdleAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleAnswers").field("listed", &lock(&self.list).listed.len()).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl IdleAnswers {
    /// A session's answer finished with bytes kept; `holder`: the session, to list (`None`: it
    /// is on the list already: each session is listed once, until it is found with nothing to
    /// let go).
    pub fn finished(&self, holder: Option<Weak<dyn Reclaim>>, owner: usize) {
        let Some(holder) = holder else {
            self.finished.fetch_add(1, Ordering::AcqRel);
            return;
        };
        let mut list = lock(&self.list);
        list.listed.push_back(Listed { holder, owner });
        if list.listed.len() > (2 * list.swept_at).max(64) {
            list.listed.retain(|l| l.holder.strong_count() > 0);
            list.swept_at = list.listed.len();
        }
        // Counted once listed, under the lock: a search that reads the count sees the entry.
        self.finished.fetch_add(1, Ordering::AcqRel);
    }

    /// Lets listed answers go, oldest first, until `has_room` (checked after each), among
    /// `owner`'s sessions only when it is `Some`; true when any was let go. A session busy now
    /// is passed over; one that keeps nothing, or is gone, leaves the list.
    pub fn reclaim(&self, owner: Option<usize>, has_room: impl Fn() -> bool) -> bool {
        let mut list = lock(&self.list);
        let finished = self.finished.load(Ordering::Acquire);
        if list.fruitless == Some((finished, owner)) {
            return false;
        }
        let (mut freed, mut at) = (false, 0);
        while at < list.listed.len() {
            let entry = &list.listed[at];
            if owner.is_some_and(|o| o != entry.owner) {
                at += 1;
                continue;
            }
            let outcome = entry.holder.upgrade().map_or(Reclaimed::Empty, |h| h.reclaim());
            match outcome {
                Reclaimed::Busy => at += 1,
                Reclaimed::Fresh => {
                    // Seen again at the back, with its new answer's age (once per search).
                    let moved = list.listed.remove(at);
                    list.listed.extend(moved);
                }
                Reclaimed::Empty => drop(list.listed.remove(at)),
                Reclaimed::Freed => {
                    drop(list.listed.remove(at));
                    freed = true;
                    if has_room() {
                        break;
                    }
                }
            }
        }
        list.fruitless = (!freed).then_some((finished, owner));
        freed
    }

    /// Sessions listed (some may have gone since).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.list).listed.len()
    }

    /// True when none is listed.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A session that keeps `kept` bytes, busy while `busy`.
    #[derive(Default)]
    struct Fake {
        kept: AtomicUsize,
        busy: std::sync::atomic::AtomicBool,
    }

    impl Reclaim for Fake {
        fn reclaim(&self) -> Reclaimed {
            if self.busy.load(Ordering::Relaxed) {
                return Reclaimed::Busy;
            }
            match self.kept.swap(0, Ordering::Relaxed) {
                0 => Reclaimed::Empty,
                _ => Reclaimed::Freed,
            }
        }
    }

    fn fake(kept: usize) -> Arc<Fake> {
        Arc::new(Fake { kept: AtomicUsize::new(kept), ..Fake::default() })
    }

    fn weak(f: &Arc<Fake>) -> Weak<dyn Reclaim> {
        let holder: Arc<dyn Reclaim> = f.clone();
        Arc::downgrade(&holder)
    }

    #[test]
    fn the_oldest_go_first_until_there_is_room_and_busy_ones_are_passed_over() {
        let idle = IdleAnswers::default();
        let (a, b, c) = (fake(10), fake(20), fake(30));
        for f in [&a, &b, &c] {
            idle.finished(Some(weak(f)), 1);
        }
        a.busy.store(true, Ordering::Relaxed);
        assert!(idle.reclaim(Some(1), || true));
        assert_eq!(
            [
                a.kept.load(Ordering::Relaxed),
                b.kept.load(Ordering::Relaxed),
                c.kept.load(Ordering::Relaxed)
            ],
            [10, 0, 30],
            "the busy one is passed over, the next oldest goes, and the search stops at room"
        );
        assert_eq!(idle.len(), 2);
    }

    #[test]
    fn only_the_owners_sessions_go_when_an_owner_is_named() {
        let idle = IdleAnswers::default();
        let (alice, bob) = (fake(10), fake(10));
        idle.finished(Some(weak(&bob)), 2);
        idle.finished(Some(weak(&alice)), 1);
        assert!(idle.reclaim(Some(1), || false));
        assert_eq!(bob.kept.load(Ordering::Relaxed), 10, "bob's answer is not alice's to take");
        assert!(!idle.reclaim(Some(1), || false), "nothing of alice's is left");
        assert!(idle.reclaim(None, || false), "any owner's when none is named");
        assert_eq!(bob.kept.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_fruitless_search_is_not_repeated_until_another_answer_finishes() {
        let idle = IdleAnswers::default();
        let busy = fake(10);
        busy.busy.store(true, Ordering::Relaxed);
        idle.finished(Some(weak(&busy)), 1);
        assert!(!idle.reclaim(None, || false));
        busy.busy.store(false, Ordering::Relaxed);
        assert!(!idle.reclaim(None, || false), "the same search is skipped");
        idle.finished(None, 1);
        assert_eq!(idle.len(), 1, "a listed session is listed once");
        assert!(idle.reclaim(None, || false), "a finished answer makes it worth looking again");
    }

    #[test]
    fn gone_sessions_leave_the_list() {
        let idle = IdleAnswers::default();
        for _ in 0..1_000 {
            let f = fake(1);
            idle.finished(Some(weak(&f)), 1);
        }
        assert!(idle.len() <= 128, "swept as it grows: {}", idle.len());
        let kept = fake(1);
        idle.finished(Some(weak(&kept)), 1);
        assert!(idle.reclaim(None, || false));
        assert!(idle.is_empty(), "the gone ones left as the search passed them");
    }
}
