//! Unit tests of the WebSocket messages: round trips in both roles, fragments, pings, closes,
//! broken frames refused, the watch for a connection's end, and a seeded exchange with
//! tungstenite as the independent peer.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role as PeerRole;

use super::*;
use crate::seeded::Draw;

const LIMIT: usize = 256 * 1024;

/// A frame as a client writes it: `first` holds the FIN bit and the opcode; the payload is
/// masked with `mask`.
fn raw(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = vec![first];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// A server socket, and the raw client end of its connection.
fn a_server() -> (MessageSocket<DuplexStream>, DuplexStream) {
    let (near, far) = duplex(LIMIT * 2);
    (MessageSocket::new(near, Role::Server, LIMIT, 8 * 1024), far)
}

#[test]
fn the_accept_key_is_the_rfc_example() {
    assert_eq!(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

#[tokio::test]
async fn messages_of_every_length_class_cross_both_ways() {
    let (a, b) = duplex(4096);
    let mut client = MessageSocket::new(a, Role::Client, LIMIT, 8 * 1024);
    let mut server = MessageSocket::new(b, Role::Server, LIMIT, 8 * 1024);
    let sizes = [0, 1, 125, 126, 4096, 65_535, 65_536, LIMIT];
    let messages: Vec<Vec<u8>> =
        sizes.iter().map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect()).collect();
    let sent = messages.clone();
    let writer = tokio::spawn(async move {
        for message in sent {
            client.feed(Payload::Owned(message)).await.expect("feed");
        }
        client.flush().await.expect("flush");
        // Then what the server sends back.
        let mut back = Vec::new();
        while let Some(message) = client.next().await.expect("next") {
            back.push(message);
        }
        back
    });
    // All are read before any is sent back: neither end reads while it writes.
    for message in &messages {
        assert_eq!(server.next().await.expect("next").as_deref(), Some(&message[..]));
    }
    for message in &messages {
        server.feed(Payload::Borrowed(message)).await.expect("feed back");
    }
    server.close().await.expect("close");
    let back = writer.await.expect("client");
    assert_eq!(back.len(), messages.len());
    assert!(back.iter().zip(&messages).all(|(b, m)| b[..] == m[..]));
}

#[tokio::test]
async fn fragments_are_gathered_and_a_ping_between_them_is_answered() {
    let (mut server, mut far) = a_server();
    let mask = [1, 2, 3, 4];
    let mut wire = raw(0x02, b"ab", mask);
    wire.extend(raw(0x89, b"p", mask));
    wire.extend(raw(0x00, b"cd", mask));
    wire.extend(raw(0x80, b"e", mask));
    far.write_all(&wire).await.expect("write");
    assert_eq!(server.next().await.expect("next").as_deref(), Some(&b"abcde"[..]));
    let mut pong = [0u8; 3];
    far.read_exact(&mut pong).await.expect("pong");
    assert_eq!(pong, [0x8a, 0x01, b'p'], "an unmasked pong with the ping's payload");
    assert!(server.is_intact());
}

#[tokio::test]
async fn broken_frames_and_foreign_messages_are_invalid_data() {
    let mask = [9, 8, 7, 6];
    let cases: [(&str, Vec<u8>); 5] = [
        ("a text message", raw(0x81, b"hi", mask)),
        ("a continuation outside a message", raw(0x80, b"x", mask)),
        ("a message inside another", [raw(0x02, b"a", mask), raw(0x82, b"b", mask)].concat()),
        ("reserved bits", raw(0xc2, b"a", mask)),
        ("an unknown opcode", raw(0x83, b"a", mask)),
    ];
    for (what, wire) in cases {
        let (mut server, mut far) = a_server();
        far.write_all(&wire).await.expect("write");
        let e = server.next().await.expect_err(what);
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{what}: {e}");
    }
}

#[tokio::test]
async fn a_message_over_the_limit_is_refused_whole_or_in_fragments() {
    let big = vec![5u8; LIMIT + 1];
    let (mut server, mut far) = a_server();
    far.write_all(&raw(0x82, &big, [1, 1, 1, 1])).await.expect("write");
    assert_eq!(server.next().await.expect_err("too big").kind(), io::ErrorKind::InvalidData);

    let (mut server, mut far) = a_server();
    let half = LIMIT / 2 + 1;
    let wire = [raw(0x02, &big[..half], [2; 4]), raw(0x80, &big[..half], [3; 4])].concat();
    far.write_all(&wire).await.expect("write");
    assert_eq!(server.next().await.expect_err("too big").kind(), io::ErrorKind::InvalidData);

    let (mut server, mut far) = a_server();
    far.write_all(&raw(0x82, &big[..LIMIT], [4; 4])).await.expect("write");
    assert_eq!(server.next().await.expect("at the limit").map(|m| m.len()), Some(LIMIT));
}

#[tokio::test]
async fn a_close_is_answered_and_an_end_without_one_is_a_break() {
    let (mut server, mut far) = a_server();
    far.write_all(&raw(0x88, &1000u16.to_be_bytes(), [7; 4])).await.expect("write");
    assert!(server.next().await.expect("next").is_none(), "the peer closed");
    let mut echo = [0u8; 4];
    far.read_exact(&mut echo).await.expect("close echo");
    assert_eq!(echo, [0x88, 0x02, 0x03, 0xe8]);
    assert_eq!(
        server.feed(Payload::Borrowed(b"late")).await.expect_err("closed").kind(),
        io::ErrorKind::ConnectionAborted
    );

    let (mut server, far) = a_server();
    drop(far);
    assert_eq!(server.next().await.expect_err("eof").kind(), io::ErrorKind::UnexpectedEof);
}

#[tokio::test]
async fn a_read_given_up_half_way_marks_the_socket_spent() {
    let (mut server, mut far) = a_server();
    let wire = raw(0x82, b"0123456789", [5; 4]);
    far.write_all(&wire[..4]).await.expect("write");
    let gave_up = tokio::time::timeout(Duration::from_millis(20), server.next()).await;
    assert!(gave_up.is_err(), "nothing whole arrived");
    assert!(!server.is_intact());
}

#[tokio::test]
async fn a_watch_ends_when_the_peer_hangs_up_and_keeps_what_it_sent_before() {
    let (mut server, far) = a_server();
    let waited = tokio::time::timeout(Duration::from_millis(20), server.watch_end()).await;
    assert!(waited.is_err(), "a quiet peer is watched on");
    drop(far);
    assert_eq!(server.watch_end().await.expect_err("gone").kind(), io::ErrorKind::UnexpectedEof);

    // A message that arrives mid-watch is kept, not lost: read after it, and the end met
    // during the watch after it.
    let (mut server, mut far) = a_server();
    far.write_all(&raw(0x82, b"next", [2; 4])).await.expect("write");
    let waited = tokio::time::timeout(Duration::from_millis(20), server.watch_end()).await;
    assert!(waited.is_err(), "bytes are no end");
    drop(far);
    assert_eq!(server.watch_end().await.expect_err("gone").kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(server.next().await.expect("kept").as_deref(), Some(&b"next"[..]));
    assert_eq!(server.next().await.expect_err("eof").kind(), io::ErrorKind::UnexpectedEof);

    // A ping that arrives mid-watch is answered once messages are read again.
    let (mut server, mut far) = a_server();
    let wire = [raw(0x89, b"p", [1; 4]), raw(0x82, b"x", [2; 4])].concat();
    far.write_all(&wire).await.expect("write");
    let waited = tokio::time::timeout(Duration::from_millis(20), server.watch_end()).await;
    assert!(waited.is_err(), "a ping is no end");
    assert_eq!(server.next().await.expect("kept").as_deref(), Some(&b"x"[..]));
    let mut pong = [0u8; 3];
    far.read_exact(&mut pong).await.expect("pong");
    assert_eq!(pong, [0x8a, 0x01, b'p']);
}

#[tokio::test]
async fn a_watch_stops_at_what_it_may_hold_and_a_flush_after_it_does_not_wait() {
    let (mut server, mut far) = a_server();
    let big = vec![7u8; MAX_HELD + 100];
    far.write_all(&raw(0x82, &big, [3; 4])).await.expect("write");
    server.watch_end().await.expect("more than a watch holds: it stops");
    server.feed(Payload::Borrowed(b"answer")).await.expect("feed");
    tokio::time::timeout(Duration::from_secs(5), server.flush())
        .await
        .expect("a flush is a flush again")
        .expect("flush");
    assert_eq!(server.next().await.expect("kept").map(|m| m.len()), Some(big.len()));
}

#[tokio::test]
async fn seeded_messages_cross_with_tungstenite_as_the_peer() {
    let mut draw = Draw::seeded("websocket messages with tungstenite");
    for round in 0..40 {
        // A small pipe splits frames at arbitrary points, both ways.
        let (ours, theirs) = duplex(1 + draw.below(3000));
        let (our_role, their_role) = match round % 2 {
            0 => (Role::Server, PeerRole::Client),
            _ => (Role::Client, PeerRole::Server),
        };
        let mut ours = MessageSocket::new(ours, our_role, LIMIT, 1 + draw.below(16 * 1024));
        let mut peer = WebSocketStream::from_raw_socket(theirs, their_role, None).await;
        let messages: Vec<Vec<u8>> = (0..1 + draw.below(12))
            .map(|_| {
                let len = match draw.below(4) {
                    0 => draw.below(126),
                    1 => draw.below(70_000),
                    _ => draw.below(600),
                };
                (0..len).map(|_| draw.bits() as u8).collect()
            })
            .collect();
        let sent = messages.clone();
        let echo = tokio::spawn(async move {
            for message in sent {
                peer.send(Message::Binary(message.into())).await.expect("peer send");
            }
            let mut back = Vec::new();
            while let Some(Ok(Message::Binary(data))) = peer.next().await {
                back.push(data.to_vec());
            }
            back
        });
        let mut got = Vec::new();
        for message in &messages {
            got.push(ours.next().await.expect("next").expect("a message"));
            assert_eq!(got[got.len() - 1][..], message[..], "round {round}");
        }
        for message in &got {
            ours.feed(Payload::Borrowed(message)).await.expect("feed");
        }
        ours.close().await.expect("close");
        let back = tokio::time::timeout(Duration::from_secs(10), echo)
            .await
            .expect("the peer saw the close")
            .expect("peer");
        assert_eq!(back, messages, "round {round}");
    }
}
