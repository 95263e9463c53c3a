//! How the sidecar frames a compressed answer, against the server's own framing of the same
//! answer: a raw compressed client records each compressed packet's uncompressed length.

use e2e::raw::{CompressedClient, Framed};
use e2e::{DATABASE, PASSWORD, Tunnel, USER, mysql_port, within};

/// Single rows, small and large: the server's shape is fully determined (its 16 KiB buffer
/// filled with the result set's head and the row's start, the rest of the row alone when it is
/// larger than the buffer, then the EOF), and the sidecar's is the same.
const ROWS: [usize; 5] = [16_380, 200_000, 1_000_000, 5_000_000, 17_000_000];

/// Many small rows: the server fills its buffer to the byte, splitting a header there or
/// ending exactly between two packets; the sidecar ends that compressed packet after the header
/// instead (the next one ends where the server's does).
const SMALL_ROWS: &str = "SELECT seq, REPEAT('x', 100) FROM seq_1_to_20000";

/// Several result sets: the server flushes at each statement's end and numbers what follows
/// after its compressed packets; the sidecar relays the upstream's numbers and so never ends a
/// compressed packet at a result set's end before the answer's end.
const RESULT_SETS: &str = "SELECT 1; SELECT REPEAT('y', 70000); SELECT seq FROM seq_1_to_3000";

/// Each packet's start and end in an answer's bytes.
fn packets_of(bytes: &[u8]) -> Vec<(usize, usize)> {
    let (mut packets, mut at) = (Vec::new(), 0);
    while let Some(head) = bytes.get(at..at + 4) {
        let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
        packets.push((at, at + 4 + len));
        at += 4 + len;
    }
    packets
}

/// Where each compressed packet ends in the answer's bytes.
fn ends_of(framed: &Framed) -> Vec<usize> {
    framed.lengths.iter().scan(0, |at, n| Some(*at + n).inspect(|end| *at = *end)).collect()
}

/// What mysql-connector-python's compressed reader needs: each packet ends in the compressed
/// packet where it starts or the next, and no header is split. The first offence, if any.
fn unreadable_for_connector_python(framed: &Framed) -> Option<String> {
    let ends = ends_of(framed);
    let carrier = |at: usize| ends.partition_point(|&end| end <= at);
    packets_of(&framed.bytes).into_iter().find_map(|(start, end)| {
        let first = carrier(start);
        if carrier(start + 3) != first {
            return Some(format!("the header at {start} is split"));
        }
        (carrier(end - 1) > first + 1).then(|| format!("packet {start}..{end} spans three"))
    })
}

/// The bytes with every packet's sequence id zeroed.
fn without_sequence_ids(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (start, _) in packets_of(bytes) {
        out[start + 3] = 0;
    }
    out
}

#[tokio::test]
async fn the_sidecar_frames_compressed_answers_as_the_server_does() {
    within(120, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let mut direct = CompressedClient::login(mysql_port(), USER, PASSWORD, DATABASE).await;
        let port = tunnel.sidecar.port();
        let mut through = CompressedClient::login(port, USER, PASSWORD, DATABASE).await;
        for n in ROWS {
            let sql = format!("SELECT REPEAT('x', {n}), 7");
            let (d, t) = (direct.query(&sql).await, through.query(&sql).await);
            println!("{sql}: direct {:?}, through {:?}", d.lengths, t.lengths);
            assert!(t.bytes == d.bytes, "{sql}: the same bytes");
            assert_eq!(t.lengths, d.lengths, "{sql}: the server's shape");
        }

        let (d, t) = (direct.query(SMALL_ROWS).await, through.query(SMALL_ROWS).await);
        assert!(t.bytes == d.bytes, "the same bytes");
        let starts: Vec<usize> = packets_of(&d.bytes).iter().map(|p| p.0).collect();
        let want: Vec<usize> = (ends_of(&d).into_iter())
            .map(|end| starts.iter().find(|&&s| s <= end && end < s + 4).map_or(end, |s| s + 4))
            .collect();
        assert_eq!(ends_of(&t), want, "the server's shape, but after its split headers");
        let split = unreadable_for_connector_python(&d);
        assert!(split.is_some_and(|s| s.contains("split")), "the server splits a header");
        assert_eq!(unreadable_for_connector_python(&t), None, "{SMALL_ROWS}");

        let (d, t) = (direct.query(RESULT_SETS).await, through.query(RESULT_SETS).await);
        println!("{RESULT_SETS}: direct {:?}, through {:?}", d.lengths, t.lengths);
        let same = without_sequence_ids(&t.bytes) == without_sequence_ids(&d.bytes);
        assert!(same, "the same packets, but the numbers after a statement's end");
        assert_eq!(unreadable_for_connector_python(&t), None, "{RESULT_SETS}");
        let ends = ends_of(&t);
        let boundaries = packets_of(&t.bytes).iter().filter(|p| ends.contains(&p.0)).count();
        assert_eq!(boundaries, 1, "only the rest of the large row ends on a boundary: {ends:?}");
    })
    .await;
}
