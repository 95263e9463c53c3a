//! Compressed packets a server refuses: one whose zlib stream lacks its checksum, as
//! mysql_common 0.37 (mysql_async's protocol crate) sends now and then, and one that does not
//! inflate at all. MariaDB hangs up on both without a word.

use bytes::BytesMut;
use common::mysql::compressed;
use e2e::raw::{CompressedClient, Framed, com_query};
use e2e::{DATABASE, PASSWORD, Tunnel, USER, mysql_port, within};

/// A command compressed as a client does, then its zlib stream's last four bytes (the
/// Adler-32) left off, its length fixed to match.
fn without_checksum(sql: &str) -> BytesMut {
    let mut wire = BytesMut::new();
    compressed::encode(&com_query(sql), 0, &mut wire);
    assert_ne!(wire[4..7], [0, 0, 0], "long enough to be compressed");
    let stored = usize::from(wire[0]) | usize::from(wire[1]) << 8 | usize::from(wire[2]) << 16;
    wire.truncate(wire.len() - 4);
    wire[..3].copy_from_slice(&(stored as u32 - 4).to_le_bytes()[..3]);
    wire
}

/// The ERR packet an answer is: its code, its sequence id, its compressed packet's and its
/// message; panics on anything else.
fn error_of(answer: &Framed) -> (u16, u8, u8, String) {
    let b = &answer.bytes;
    assert_eq!(b.get(4), Some(&0xff), "an error: {b:?}");
    let code = u16::from_le_bytes([b[5], b[6]]);
    (code, b[3], answer.seqs[0], String::from_utf8_lossy(&b[13..]).into_owned())
}

/// A command compressed as a client does, its zlib stream then made garbage.
fn garbled(sql: &str) -> BytesMut {
    let mut wire = BytesMut::new();
    compressed::encode(&com_query(sql), 0, &mut wire);
    wire[compressed::HEADER_LEN + 2..].iter_mut().for_each(|b| *b = 0x55);
    wire
}

#[tokio::test]
async fn a_command_without_its_checksum_runs_and_a_broken_one_gets_the_servers_error() {
    within(60, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let sql = format!("SELECT '{}' AS padded, 7", "x".repeat(60));
        let login = |port| CompressedClient::login(port, USER, PASSWORD, DATABASE);
        let (direct_port, port) = (mysql_port(), tunnel.sidecar.port());

        // Directly, the server hangs up on the command without its checksum; through the
        // tunnel it runs, its data being whole, and the connection goes on.
        let mut direct = login(direct_port).await;
        let want = direct.query(&sql).await;
        direct.send(&without_checksum(&sql)).await;
        assert!(direct.answer_or_end().await.is_none(), "the server hangs up");
        let mut through = login(port).await;
        through.send(&without_checksum(&sql)).await;
        let got = through.answer().await;
        assert!(got.bytes == want.bytes, "the answer of the command sent whole");
        assert_eq!(got.seqs, want.seqs, "numbered as the server numbers it");
        assert!(through.query(&sql).await.bytes == want.bytes, "the connection goes on");

        // A compressed packet that does not inflate: the server hangs up; the sidecar says
        // why first, with the server's error for it, numbered so that the client reads it
        // (after the command's compressed packet, as a server numbers what it sends), and
        // then hangs up too.
        let mut direct = login(direct_port).await;
        direct.send(&garbled(&sql)).await;
        assert!(direct.answer_or_end().await.is_none(), "the server hangs up");
        let mut through = login(port).await;
        through.send(&garbled(&sql)).await;
        let (code, seq, zseq, message) = error_of(&through.answer().await);
        assert_eq!((code, seq, zseq), (1157, 1, 1), "{message}");
        assert!(message.contains("uncompress"), "{message}");
        assert!(through.answer_or_end().await.is_none(), "the sidecar hangs up");
    })
    .await;
}
