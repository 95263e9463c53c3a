//! Shards: threads that each run their own single-threaded runtime, with a process's
//! connections spread over them. A connection, and every task it spawns, stays on its shard:
//! a command costs no work stealing and no wake-up across threads, while the shards together
//! use several cores.
//!
//! Lanes keep the two halves' shards paired. A sidecar sends each stream with its thread's
//! lane key ([`lane_key`]); the transport serves every stream of one key on one shard
//! ([`Shards::join_lane`]). The commands a sidecar thread sends in one burst then wake one
//! transport thread, not all of them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// One thread and its runtime.
#[derive(Debug)]
struct Shard {
    runtime: Handle,
    thread: ThreadId,
    /// Connections served on it now.
    load: Arc<AtomicUsize>,
}

/// A lane's shard, and how many of its streams are open.
#[derive(Debug, Clone, Copy)]
struct Lane {
    shard: usize,
    streams: usize,
}

/// The shards of a process. The first is the runtime that called [`Shards::start`].
#[derive(Debug)]
pub struct Shards {
    shards: Vec<Shard>,
    /// Lanes with a stream open, by key (as many as open streams at most).
    lanes: Mutex<HashMap<u64, Lane>>,
    /// Cancelled by [`Shards::stop`] or on drop: the other threads' runtimes end.
    stop: CancellationToken,
}

impl Shards {
    /// `threads` shards in all, the calling runtime's among them (`0`: one per CPU core).
    /// Must be called on a runtime's thread.
    pub fn start(threads: usize) -> std::io::Result<Arc<Self>> {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        let stop = CancellationToken::new();
        let mut shards = vec![Shard {
            runtime: Handle::current(),
            thread: std::thread::current().id(),
            load: Arc::default(),
        }];
        for i in 1..threads {
            let runtime = crate::runtime::build()?;
            let handle = runtime.handle().clone();
            let stop = stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("shard-{i}"))
                .spawn(move || runtime.block_on(stop.cancelled_owned()))?;
            shards.push(Shard {
                runtime: handle,
                thread: thread.thread().id(),
                load: Arc::default(),
            });
        }
        Ok(Arc::new(Self { shards, lanes: Mutex::default(), stop }))
    }

    /// The number of shards.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// True when there are none (never: the caller's runtime is one).
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The shard the caller runs on, if it runs on one.
    pub fn current(&self) -> Option<usize> {
        let here = std::thread::current().id();
        self.shards.iter().position(|shard| shard.thread == here)
    }

    /// Connections served on each shard now.
    pub fn loads(&self) -> Vec<usize> {
        self.shards.iter().map(|shard| shard.load.load(Ordering::Relaxed)).collect()
    }

    /// The shard serving the fewest connections (the first of those, when several do).
    pub fn least_loaded(&self) -> usize {
        let loads = self.loads();
        (0..loads.len()).min_by_key(|&i| loads[i]).unwrap_or(0)
    }

    /// The shard that runs on `thread`, if one does.
    pub fn index_of(&self, thread: ThreadId) -> Option<usize> {
        self.shards.iter().position(|shard| shard.thread == thread)
    }

    /// Runs `task` (work of no connection: it counts in no load) on shard `index` (the
    /// caller's when out of range).
    pub fn spawn_task<F>(&self, index: usize, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self.shards.get(index) {
            Some(shard) => drop(shard.runtime.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
    }

    /// Serves a new connection on the shard serving the fewest, tracked by `tracker`.
    pub fn place<F, Fut>(&self, tracker: &TaskTracker, stream: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn_on(self.least_loaded(), tracker, stream, serve);
    }

    /// Serves `stream` on shard `index` (the caller's when out of range), tracked by
    /// `tracker`. A socket is moved to another shard's reactor, so that its readiness is seen
    /// on the thread that serves it.
    pub fn spawn_on<F, Fut>(&self, index: usize, tracker: &TaskTracker, stream: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let here = self.current();
        let Some(shard) = self.shards.get(index).filter(|_| here != Some(index)) else {
            let load = LoadGuard::count(here.and_then(|i| self.shards.get(i)));
            tracker.spawn(async move {
                let _load = load;
                serve(stream).await;
            });
            return;
        };
        let moved = match stream.into_std() {
            Ok(moved) => moved,
            Err(e) => return tracing::debug!(error = %e, "a connection could not change threads"),
        };
        let load = LoadGuard::count(Some(shard));
        shard.runtime.spawn(tracker.track_future(async move {
            let _load = load;
            match TcpStream::from_std(moved) {
                Ok(stream) => serve(stream).await,
                Err(e) => tracing::debug!(error = %e, "a connection could not change threads"),
            }
        }));
    }

    /// The shard that serves the streams of lane `key`, kept while the returned seat lives.
    /// A new lane goes to the shard with the fewest lanes (then the fewest connections).
    pub fn join_lane(self: &Arc<Self>, key: u64) -> LaneSeat {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let shard = match lanes.get_mut(&key) {
            Some(lane) => {
                lane.streams += 1;
                lane.shard
            }
            None => {
                let mut per_shard = vec![0usize; self.shards.len()];
                for lane in lanes.values() {
                    per_shard[lane.shard] += 1;
                }
                let loads = self.loads();
                let shard = (0..per_shard.len()).min_by_key(|&i| (per_shard[i], loads[i]));
                let shard = shard.unwrap_or(0);
                lanes.insert(key, Lane { shard, streams: 1 });
                shard
            }
        };
        LaneSeat { shards: self.clone(), key, shard }
    }

    /// Lanes with a stream open now.
    pub fn lanes(&self) -> usize {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Ends the other shards' runtimes, with whatever still runs on them.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A stream's place in its lane.
#[derive(Debug)]
pub struct LaneSeat {
    shards: Arc<Shards>,
    key: u64,
    shard: usize,
}

impl LaneSeat {
    /// The shard that serves the lane.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Lanes with a stream open now, this one among them.
    pub fn lanes_open(&self) -> usize {
        self.shards.lanes()
    }

    /// Leaves the lane; returns how many lanes are left with a stream open.
    pub fn leave(self) -> usize {
        let shards = self.shards.clone();
        drop(self);
        shards.lanes()
    }
}

impl Drop for LaneSeat {
    fn drop(&mut self) {
        let mut lanes = self.shards.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lane) = lanes.get_mut(&self.key) {
            lane.streams -= 1;
            if lane.streams == 0 {
                lanes.remove(&self.key);
            }
        }
    }
}

/// A connection's count in its shard's load.
struct LoadGuard(Option<Arc<AtomicUsize>>);

impl LoadGuard {
    fn count(shard: Option<&Shard>) -> Self {
        let load = shard.map(|shard| shard.load.clone());
        if let Some(load) = &load {
            load.fetch_add(1, Ordering::Relaxed);
        }
        Self(load)
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        if let Some(load) = &self.0 {
            load.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The calling thread's lane key: random, made at its first use. A sidecar sends it with
/// each stream it opens, so that the transport serves the streams of one sidecar thread on
/// one of its own threads. It is no secret: it only pairs threads.
pub fn lane_key() -> u64 {
    thread_local! {
        static LANE: u64 = {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(std::thread::current().id())
        };
    }
    LANE.with(|key| *key)
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;
