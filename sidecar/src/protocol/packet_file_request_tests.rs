//! A relayed packet that may be a LOCAL INFILE request (short, its payload starting with 0xFB)
//! stays queued until the turn's end, however the answer is split and whatever was flushed
//! before it (in compressed packets too), so that a refused one never reaches the client; a NULL-first row followed by
//! more of the answer, or a long 0xFB packet, is written as it comes. Any relayed packet not
//! whole yet (up to 1 MiB) is held back from a flush too, so that an answer broken anywhere can
//! end with the sidecar's error at a packet boundary.

use bytes::{Bytes, BytesMut};
use common::mysql::compressed;
use tokio::io::{AsyncReadExt, DuplexStream};
use tokio::sync::mpsc;

use super::PacketIo;

/// A writer whose client collects every byte it is sent (over an in-memory pipe).
async fn writer() -> (PacketIo<DuplexStream>, mpsc::UnboundedReceiver<Vec<u8>>) {
    let (server, mut client) = tokio::io::duplex(64 * 1024);
    let (sent, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = client.read(&mut buf).await {
            drop(sent.send(buf[..n].to_vec()));
        }
    });
    (PacketIo::over(server, None, 64 << 20), received)
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut p = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, seq];
    p.extend_from_slice(payload);
    p
}

/// Rows enough to make the writer flush part of the answer (more than 64 KiB).
fn rows(first_seq: u8, count: usize) -> Vec<u8> {
    (0..count).flat_map(|i| packet(first_seq.wrapping_add(i as u8), &[b'x'; 1000])).collect()
}

/// What a compressing client reads of `wire`: the packets inside the compressed packets.
fn inflated(wire: &[u8]) -> Vec<u8> {
    let (mut input, mut out) = (BytesMut::from(wire), BytesMut::new());
    while compressed::decode(&mut input, &mut out, 1 << 24).expect("inflate").is_some() {}
    assert!(input.is_empty(), "whole compressed packets");
    out.to_vec()
}

#[tokio::test]
async fn a_file_request_is_held_until_the_turn_ends_however_it_is_split() {
    let request = packet(71, b"\xfb/home/me/.ssh/id_ed25519");
    // Earlier results of a multi-statement query: 70 rows, or rows that end 10 bytes before
    // the fourth 16 KiB compressed packet would end, so that the request would straddle it.
    let straddling = [rows(1, 65), packet(66, &[b'y'; 262])].concat();
    assert_eq!(straddling.len(), 4 * 16 * 1024 - 10);
    for before in [rows(1, 70), straddling] {
        for cut in 0..request.len() {
            for compressing in [false, true] {
                let sent = written_taking_back(&before, &request, cut, compressing).await;
                assert!(sent == before, "everything but the request, cut at {cut} {compressing}");
            }
        }
    }
}

/// What the client reads of `before` and `request` (written in two pieces, cut at `cut`) when
/// the request is taken back at the turn's end.
async fn written_taking_back(before: &[u8], request: &[u8], cut: usize, z: bool) -> Vec<u8> {
    let (mut io, mut received) = writer().await;
    if z {
        io.start_compression();
    }
    let answer = [before, &request[..cut]].concat();
    io.write_raw(Bytes::from(answer)).await.expect("write");
    io.write_raw(Bytes::copy_from_slice(&request[cut..])).await.expect("write");
    assert_eq!(io.queued_file_request(), Some(&request[4..]), "cut at {cut}");
    io.take_back_file_request();
    assert_eq!(io.next_seq(), request[3], "the sidecar's error takes the request's id");
    assert_eq!(io.queued_file_request(), None);
    io.flush().await.expect("flush");
    drop(io);
    let mut sent = Vec::new();
    while let Some(piece) = received.recv().await {
        sent.extend(piece);
    }
    if z { inflated(&sent) } else { sent }
}

#[tokio::test]
async fn an_allowed_request_goes_out_at_the_turns_end() {
    let (mut io, mut received) = writer().await;
    let request = packet(1, b"\xfb/tmp/data.csv");
    io.write_raw(Bytes::from(request.clone())).await.expect("write");
    assert_eq!(io.queued_file_request(), Some(&request[4..]));
    io.flush().await.expect("flush");
    assert_eq!(received.recv().await, Some(request));
}

#[tokio::test]
async fn rows_starting_with_0xfb_are_no_requests_once_more_follows() {
    let (mut io, _received) = writer().await;
    // A NULL-first row ending a piece, then more of the answer: a row after all.
    let mut answer = rows(1, 70);
    answer.extend(packet(71, b"\xfb\x01a"));
    io.write_raw(Bytes::from(answer)).await.expect("write");
    io.write_raw(Bytes::from(packet(72, b"\xfe\0\0\x02\0"))).await.expect("write");
    assert_eq!(io.queued_file_request(), None);
    // An empty packet, an ERR, a packet too long to be a request: none is one.
    for payload in [&b""[..], b"\xff\x10\x04", &[0xfb; 70 * 1024]] {
        io.write_raw(Bytes::from(packet(9, payload))).await.expect("write");
        assert_eq!(io.queued_file_request(), None);
    }
    io.flush().await.expect("flush");
    // Nothing relayed since: the last request flushed is not taken back.
    io.write_raw(Bytes::from(packet(1, b"\xfbf"))).await.expect("write");
    io.flush().await.expect("flush");
    assert_eq!(io.queued_file_request(), None);
}

#[tokio::test]
async fn an_answer_broken_anywhere_past_a_flush_ends_at_a_packet_boundary() {
    // 70 rows of 1,004 bytes (the writer flushes after 64 KiB), then one of 300 KB.
    let answer = [rows(1, 70), packet(71, &[b'z'; 300_000])].concat();
    for cut in [70_000, 70_281, 70_282, 70_283, 70_284, 71_000, 200_000, answer.len() - 1] {
        let (mut io, mut received) = writer().await;
        for piece in answer[..cut].chunks(16 * 1024) {
            io.write_raw(Bytes::copy_from_slice(piece)).await.expect("write");
        }
        assert!(io.take_back_partial(), "cut at {cut}: nothing of its last packet went out");
        io.flush().await.expect("flush");
        drop(io);
        let mut sent = Vec::new();
        while let Some(piece) = received.recv().await {
            sent.extend(piece);
        }
        let whole = if cut < 70_280 { cut / 1004 * 1004 } else { 70_280 };
        assert_eq!(sent.len(), whole, "cut at {cut}: the whole packets before it");
    }
}
