//! Tests of the shards: connections spread evenly and served on the shard's own thread over
//! a socket moved there, lanes paired and forgotten, lane keys per thread.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;

/// Waits (a bounded time) until `done` holds.
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the condition never held");
}

#[tokio::test]
async fn connections_spread_evenly_and_are_served_on_their_shards() {
    let shards = Shards::start(2).expect("shards");
    assert_eq!(shards.len(), 2);
    assert_eq!(shards.current(), Some(0));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tracker, release) = (TaskTracker::new(), CancellationToken::new());
    let served_on = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for n in 0..4u8 {
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let (stream, _) = listener.accept().await.expect("accept");
        let (served_on, release) = (served_on.clone(), release.clone());
        shards.place(&tracker, stream, move |mut stream| async move {
            served_on.lock().expect("lock").push(std::thread::current().id());
            let mut byte = [0u8; 1];
            if stream.read_exact(&mut byte).await.is_ok() {
                drop(stream.write_all(&[byte[0] + 1]).await);
            }
            release.cancelled().await;
        });
        // The socket works where it was moved: its readiness is seen by that shard's reactor.
        client.write_all(&[n]).await.expect("write");
        let mut answer = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut answer))
            .await
            .expect("an answer in time")
            .expect("read");
        assert_eq!(answer[0], n + 1);
        clients.push(client);
    }
    assert_eq!(shards.loads(), vec![2, 2]);
    let threads = served_on.lock().expect("lock").clone();
    let here = std::thread::current().id();
    assert_eq!(threads.iter().filter(|t| **t == here).count(), 2, "{threads:?}");
    assert_eq!(threads.iter().filter(|t| **t != here).count(), 2, "{threads:?}");
    // A connection that ends frees its place: the next one goes where it was.
    release.cancel();
    tracker.close();
    tracker.wait().await;
    until(|| shards.loads() == vec![0, 0]).await;
    shards.stop();
}

#[tokio::test]
async fn the_least_loaded_shard_takes_the_next_connection() {
    let shards = Shards::start(3).expect("shards");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let tracker = TaskTracker::new();
    let holds: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
    let mut clients = Vec::new();
    for hold in &holds {
        clients.push(TcpStream::connect(addr).await.expect("connect"));
        let (stream, _) = listener.accept().await.expect("accept");
        let hold = hold.clone();
        shards.place(&tracker, stream, move |_stream| async move { hold.cancelled().await });
    }
    until(|| shards.loads() == vec![1, 1, 1]).await;
    holds[1].cancel();
    until(|| shards.loads() == vec![1, 0, 1]).await;
    clients.push(TcpStream::connect(addr).await.expect("connect"));
    let (stream, _) = listener.accept().await.expect("accept");
    let last = CancellationToken::new();
    let held = last.clone();
    shards.place(&tracker, stream, move |_stream| async move { held.cancelled().await });
    until(|| shards.loads() == vec![1, 1, 1]).await;
    for hold in holds.iter().chain([&last]) {
        hold.cancel();
    }
    tracker.close();
    tracker.wait().await;
    shards.stop();
}

#[tokio::test]
async fn lanes_pair_up_and_are_forgotten_with_their_last_stream() {
    let shards = Shards::start(2).expect("shards");
    let a = shards.join_lane(7);
    let b = shards.join_lane(9);
    assert_ne!(a.shard(), b.shard(), "two lanes share a shard while another has none");
    let a_again = shards.join_lane(7);
    assert_eq!(a_again.shard(), a.shard());
    assert_eq!(shards.lanes(), 2);
    drop(a);
    assert_eq!(shards.lanes(), 2, "a lane with a stream open is kept");
    let freed = a_again.shard();
    drop(a_again);
    assert_eq!(shards.lanes(), 1);
    // A new lane goes to the shard that has none now.
    let c = shards.join_lane(11);
    assert_eq!(c.shard(), freed);
    drop((b, c));
    assert_eq!(shards.lanes(), 0);
    shards.stop();
}

#[test]
fn each_thread_has_its_own_lane_key() {
    let here = lane_key();
    assert_eq!(lane_key(), here);
    let there = std::thread::spawn(lane_key).join().expect("thread");
    assert_ne!(there, here);
}
