//! The compressed framing's tests: random packet streams written in random pieces with random
//! mid-answer flushes, checked against what clients need and against the server's shape.

use bytes::BytesMut;
use common::mysql::compressed;
use common::mysql::packets::MAX_PAYLOAD;
use common::seeded::Draw;

use super::{Framing, GROUP};

/// Most bytes one compressed packet carries.
const MAX_COMPRESSED: usize = 0xff_ffff;

static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// A stream of packets as the writer queues them: logical packets split at 16 MiB (with an
/// empty trailer after an exact multiple); the bytes and each packet's start and end.
struct Stream {
    wire: Vec<u8>,
    packets: Vec<(usize, usize)>,
}

impl Stream {
    fn new(payloads: &[usize]) -> Stream {
        let mut s = Stream { wire: Vec::new(), packets: Vec::new() };
        for &len in payloads {
            let mut left = len;
            loop {
                let part = left.min(MAX_PAYLOAD);
                let start = s.wire.len();
                s.wire.extend_from_slice(&[part as u8, (part >> 8) as u8, (part >> 16) as u8, 0]);
                // Zeros by copies: a byte-by-byte fill of 16 MiB is slow in a debug build.
                let mut fill = part;
                while fill > 0 {
                    let n = fill.min(ZEROS.len());
                    s.wire.extend_from_slice(&ZEROS[..n]);
                    fill -= n;
                }
                s.packets.push((start, s.wire.len()));
                left -= part;
                if part < MAX_PAYLOAD {
                    break;
                }
            }
        }
        s
    }

    fn random(rng: &mut Draw) -> Stream {
        let payloads: Vec<usize> = (0..1 + rng.below(60))
            .map(|_| match rng.below(100) {
                // A few near 16 MiB, across the split.
                0 => MAX_PAYLOAD - 2 + rng.below(5),
                1..=49 => rng.below(64),
                _ => rng.below(3 * GROUP),
            })
            .collect();
        Stream::new(&payloads)
    }

    /// The end of the whole packets that a queue ending at `at` holds.
    fn whole_until(&self, at: usize) -> usize {
        self.packets.iter().map(|&(_, end)| end).filter(|&end| end <= at).max().unwrap_or(0)
    }
}

/// A compressed packet: where it starts and ends in the stream, and whether a turn's end sent
/// it (what was left after the decided ones).
#[derive(Debug, Clone, Copy)]
struct Frame {
    start: usize,
    end: usize,
    at_turn_end: bool,
}

/// Writes `stream` in random pieces, asking for the decided compressed packets at random
/// points (sometimes with the last whole packet hidden, as a possible LOCAL INFILE request
/// is), then sends the rest at the turn's end.
fn frame(stream: &Stream, rng: &mut Draw) -> Vec<Frame> {
    let mut framing = Framing::default();
    let (mut frames, mut sent, mut queued) = (Vec::new(), 0, 0);
    let wire = &stream.wire;
    while queued < wire.len() {
        let piece = match rng.below(10) {
            0 => rng.below(4 << 20),
            1..=4 => rng.below(100_000),
            _ => rng.below(300),
        };
        queued = (queued + 1 + piece).min(wire.len());
        if rng.below(3) > 0 {
            continue;
        }
        let mut visible = queued;
        let whole = stream.whole_until(queued);
        if whole == queued && rng.below(4) == 0 {
            // The last packet held back.
            let last = stream.packets.iter().find(|&&(_, end)| end == whole);
            visible = last.map_or(visible, |&(start, _)| start.max(sent));
        }
        while let Some(n) = framing.next(&wire[sent..visible]) {
            assert!(n > 0 && sent + n <= visible, "a decided packet within what it saw");
            frames.push(Frame { start: sent, end: sent + n, at_turn_end: false });
            sent += n;
        }
    }
    while let Some(n) = framing.next(&wire[sent..]) {
        frames.push(Frame { start: sent, end: sent + n, at_turn_end: false });
        sent += n;
    }
    if sent < wire.len() {
        frames.push(Frame { start: sent, end: wire.len(), at_turn_end: true });
    }
    framing.reset();
    frames
}

/// The index of the compressed packet that carries byte `at`.
fn carrier(frames: &[Frame], at: usize) -> usize {
    frames.partition_point(|f| f.end <= at)
}

/// What clients need of the shape, and the bounds the writer keeps.
fn check(stream: &Stream, frames: &[Frame]) {
    let wire = &stream.wire;
    let mut at = 0;
    for f in frames {
        assert_eq!(f.start, at, "compressed packets follow each other: {frames:?}");
        assert!(f.end - f.start <= MAX_COMPRESSED, "{f:?}");
        at = f.end;
    }
    assert_eq!(at, wire.len(), "every byte is sent");
    let starts: Vec<usize> = stream.packets.iter().map(|&(s, _)| s).collect();
    for &(start, end) in &stream.packets {
        let first = carrier(frames, start);
        assert_eq!(first, carrier(frames, start + 3), "header at {start} split: {frames:?}");
        let last = carrier(frames, (end - 1).max(start + 3));
        assert!(last <= first + 1, "packet {start}..{end} over 3 compressed packets");
    }
    for (i, f) in frames.iter().enumerate() {
        let alone_rest = !starts.contains(&f.start) && f.end - f.start > GROUP;
        if !alone_rest && !f.at_turn_end {
            // An empty packet joins a full group, and a packet cut after it is cut after its
            // header: a few bytes over.
            assert!(f.end - f.start <= GROUP + 8, "a group over {GROUP} + 8: {f:?}");
        }
        let on_boundary = starts.contains(&f.end);
        if on_boundary && i + 1 < frames.len() {
            // Only the rest of a large packet, or a group that empty packets one after another
            // would grow past its bound, ends at a packet boundary before the answer's end.
            let next_empty = wire[f.end..f.end + 3] == [0, 0, 0];
            assert!(
                alone_rest || (next_empty && f.end - f.start > GROUP),
                "compressed packet {i} {f:?} ends on a boundary"
            );
        }
    }
}

#[test]
fn random_streams_keep_every_packet_within_two_compressed_packets() {
    let mut rng = Draw::seeded("compressed framing");
    for round in 0..400 {
        let stream = Stream::random(&mut rng);
        let frames = frame(&stream, &mut rng);
        check(&stream, &frames);
        if round % 20 == 0 && stream.wire.len() < 512 << 10 {
            // Through the compressed protocol and back.
            let (mut zout, mut seq) = (BytesMut::new(), 0);
            for f in &frames {
                seq = compressed::encode(&stream.wire[f.start..f.end], seq, &mut zout);
            }
            let mut back = BytesMut::new();
            while compressed::decode(&mut zout, &mut back, MAX_COMPRESSED)
                .expect("decode")
                .is_some()
            {}
            assert!(back[..] == stream.wire[..], "round {round}: the same bytes back");
        }
    }
}

/// Where the server's compressed packets end for the same packets (MariaDB's `my_net_write`
/// and `net_write_buff` with compression: the header and the payload each written into a
/// buffer of [`GROUP`] bytes, a write that does not fit filling it up, the rest going alone
/// when larger than the buffer; the buffer flushed at the end).
fn server_ends(stream: &Stream) -> Vec<usize> {
    let (mut ends, mut at, mut used) = (Vec::new(), 0, 0);
    let mut write = |mut n: usize| {
        if n > GROUP - used {
            if used > 0 {
                at += GROUP - used;
                n -= GROUP - used;
                ends.push(at);
                used = 0;
            }
            while n > MAX_PAYLOAD {
                at += MAX_PAYLOAD;
                n -= MAX_PAYLOAD;
                ends.push(at);
            }
            if n > GROUP {
                at += n;
                ends.push(at);
                return;
            }
        }
        at += n;
        used += n;
    };
    for &(start, end) in &stream.packets {
        write(4);
        write(end - start - 4);
    }
    if used > 0 {
        ends.push(stream.wire.len());
    }
    ends
}

#[test]
fn a_large_row_goes_as_the_server_sends_it() {
    let mut rng = Draw::seeded("compressed framing, one large row");
    // A column count, two definitions and their EOF, one row, the EOF that ends the set.
    for row in [16_380, 200_000, 400_000, 1_000_000, 5_000_000, 17_000_000] {
        let stream = Stream::new(&[1, 30, 31, 5, row, 5]);
        let frames = frame(&stream, &mut rng);
        check(&stream, &frames);
        let ends: Vec<usize> = frames.iter().map(|f| f.end).collect();
        assert_eq!(ends, server_ends(&stream), "a row of {row}");
    }
}

#[test]
fn small_packets_end_where_the_server_ends_them_but_in_a_header() {
    let mut rng = Draw::seeded("compressed framing, small packets");
    for _ in 0..200 {
        let payloads: Vec<usize> =
            (0..1 + rng.below(400)).map(|_| 1 + rng.below(GROUP - 9)).collect();
        let stream = Stream::new(&payloads);
        let frames = frame(&stream, &mut rng);
        check(&stream, &frames);
        let server = server_ends(&stream);
        assert_eq!(frames.len(), server.len(), "as many compressed packets");
        for (f, &end) in frames.iter().zip(&server) {
            // The server splits a header at its buffer's end, or ends its buffer between two
            // packets; the sidecar ends after the header.
            let straddled = stream.packets.iter().find(|&&(s, _)| s <= end && end < s + 4);
            let want = straddled.map_or(end, |&(s, _)| s + 4);
            assert_eq!(f.end, want, "the server ends one at {end}");
        }
    }
}

#[test]
fn a_header_at_the_group_end_is_not_split() {
    // A packet whose header would straddle the group's end: the compressed packet ends after
    // the header; an empty packet there joins the group whole.
    let mut framing = Framing::default();
    let stream = Stream::new(&[GROUP - 6, 100, 1]);
    assert_eq!(framing.next(&stream.wire), Some(GROUP - 2 + 4));
    let rest = &stream.wire[GROUP + 2..];
    assert_eq!(framing.next(rest), None, "the rest of 100 bytes starts a group");
    let mut framing = Framing::default();
    let stream = Stream::new(&[GROUP - 6, 0, 100]);
    assert_eq!(framing.next(&stream.wire), Some(GROUP + 2 + 4), "cut after the next header");
}
