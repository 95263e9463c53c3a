//! Relayed packets followed across any split, so that a packet of the sidecar's own takes the
//! next sequence id and a broken answer's half-written packet is taken back.

use bytes::Bytes;
use common::seeded::Draw;
use tokio::io::AsyncReadExt;

use crate::protocol::PacketIo;

#[tokio::test]
async fn relayed_packets_are_followed_however_they_are_split() {
    let (server, mut client) = tokio::io::duplex(64 * 1024);
    // The client reads whatever is flushed to it, so that writes never wait.
    let reader = tokio::spawn(async move {
        let mut sink = vec![0; 64 * 1024];
        while client.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    });
    let mut io = PacketIo::over(server, None, 64 << 20);
    let mut rng = Draw::seeded("relayed packets split anywhere");
    for _ in 0..300 {
        // Packets of 0..300 bytes with any sequence id, then split at random points.
        let (mut wire, mut ends) = (Vec::new(), Vec::new());
        let mut last_seq = 0u8;
        for _ in 0..1 + rng.below(6) {
            let len = rng.below(300);
            last_seq = rng.bits() as u8;
            wire.extend_from_slice(&[len as u8, (len >> 8) as u8, 0, last_seq]);
            wire.extend((0..len).map(|_| rng.bits() as u8));
            ends.push(wire.len());
        }
        let mut at = 0;
        while at < wire.len() {
            let end = (at + 1 + rng.below(12)).min(wire.len());
            io.write_raw(Bytes::copy_from_slice(&wire[at..end])).await.expect("write");
            // At a boundary exactly where a packet ends.
            assert_eq!(io.at_packet_boundary(), ends.contains(&end), "{wire:?} to {end}");
            at = end;
        }
        assert_eq!(io.next_seq(), last_seq.wrapping_add(1));
        io.flush().await.expect("flush");
        // An answer broken anywhere: what is queued of its last packet is taken back, the
        // queue then ends where its last whole packet ends, and the id after that
        // packet's is next.
        let cut = 1 + rng.below(wire.len());
        let whole = ends.iter().copied().filter(|&e| e <= cut).max().unwrap_or(0);
        let expected_seq = match ends.iter().position(|&e| e == whole) {
            Some(i) => wire[if i == 0 { 0 } else { ends[i - 1] } + 3].wrapping_add(1),
            None => io.next_seq(),
        };
        let mut at = 0;
        while at < cut {
            let end = (at + 1 + rng.below(12)).min(cut);
            io.write_raw(Bytes::copy_from_slice(&wire[at..end])).await.expect("write");
            at = end;
        }
        assert!(io.take_back_partial(), "nothing of it was sent");
        assert!(io.at_packet_boundary());
        assert_eq!(io.queued(), whole, "cut at {cut} of {wire:?}");
        assert_eq!(io.next_seq(), expected_seq, "cut at {cut} of {wire:?}");
        io.flush().await.expect("flush");
    }
    io.flush().await.expect("flush");
    drop(io);
    reader.await.expect("reader");
}
