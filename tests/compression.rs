//! zstd between the sidecar and the transport (`transport.compression: on`): answers match a
//! direct connection, fewer bytes cross the link (counted by the shaping proxy between them),
//! a cut mid-answer still resumes (over a stream and over requests), `auto` leaves a loopback transport uncompressed, and a large
//! statement crosses compressed too (`Content-Encoding: zstd` with its decoded length).

use e2e::scripts::{DML_SCRIPT, ERROR_SCRIPT, TYPES_SCRIPT};
use e2e::shaper::{Shape, Shaper, tunnel_through};
use e2e::{
    Carrier, Tunnel, assert_same_answers, compare_script, direct, mysql_port, on_both_carriers,
    transport_yaml, within,
};
use mysql_async::prelude::Queryable;

/// A tunnel with `transport.compression: compression` through a shaping proxy of `shape`, on
/// the default carrier.
async fn tunnel(compression: &str, shape: Shape) -> (Tunnel, Shaper) {
    tunnel_on(None, compression, shape).await
}

/// [`tunnel`] on `carrier` (`None`: the default, `auto`).
async fn tunnel_on(carrier: Option<Carrier>, compression: &str, shape: Shape) -> (Tunnel, Shaper) {
    let carrier = carrier.map_or("", Carrier::setting);
    let extra = format!("  compression: {compression}\n{carrier}");
    tunnel_through(shape, &transport_yaml(mysql_port()), &extra).await
}

/// Reads `SELECT seq FROM seq_1_to_200000` through `tunnel`; the bytes the link carried back.
async fn big_select(tunnel: &Tunnel, shaper: &Shaper) -> u64 {
    let mut conn = tunnel.connect().await;
    let before = shaper.bytes_down();
    let rows: Vec<u64> = conn.query("SELECT seq FROM seq_1_to_200000").await.expect("select");
    assert_eq!(rows.len(), 200_000);
    assert!(rows.iter().enumerate().all(|(i, v)| *v == i as u64 + 1), "every row, in order");
    shaper.bytes_down() - before
}

#[tokio::test]
async fn compressed_answers_match_direct_and_cross_in_fewer_bytes() {
    within(120, async {
        let (zstd, zstd_link) = tunnel("on", Shape::default()).await;
        for script in [TYPES_SCRIPT, DML_SCRIPT, ERROR_SCRIPT] {
            let (mut d, mut t) = (direct().await, zstd.connect().await);
            let (a, b) = compare_script(&mut d, &mut t, script).await;
            assert_same_answers(script, &a, &b);
        }
        let compressed = big_select(&zstd, &zstd_link).await;
        let (auto, auto_link) = tunnel("auto", Shape::default()).await;
        let plain = big_select(&auto, &auto_link).await;
        assert!(
            compressed * 2 < plain,
            "zstd carried {compressed} bytes where the plain answer took {plain}"
        );
    })
    .await;
}

on_both_carriers!(a_cut_mid_compressed_answer_resumes);
async fn a_cut_mid_compressed_answer_resumes(carrier: Carrier) {
    within(90, async {
        let shape = Shape { bits_per_second: Some(4_000_000), ..Shape::default() };
        let (tunnel, shaper) = tunnel_on(Some(carrier), "on", shape).await;
        let mut conn = tunnel.connect().await;
        let id: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.expect("id");
        let big = conn.query::<u64, _>("SELECT seq FROM seq_1_to_250000");
        let cutter = shaper.cut_after(150_000);
        let (rows, at_cut) = tokio::join!(big, cutter);
        let rows = rows.expect("the whole answer arrived");
        assert_eq!(rows.len(), 250_000);
        assert!(rows.iter().enumerate().all(|(i, v)| *v == i as u64 + 1), "every row, in order");
        assert!(shaper.bytes_down() > at_cut + 20_000, "the cut came mid-answer: {at_cut} bytes");
        let again: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.expect("id");
        assert_eq!(again, id, "the same session");
    })
    .await;
}

#[tokio::test]
async fn a_large_statement_crosses_compressed_and_arrives_whole() {
    within(60, async {
        let (tunnel, shaper) = tunnel("on", Shape::default()).await;
        let text: String =
            (0..200_000u32).map(|i| format!("row {} of the tunnel;", i % 977)).collect();
        let mut d = direct().await;
        d.query_drop("DROP TABLE IF EXISTS compressed_insert").await.expect("drop");
        d.query_drop("CREATE TABLE compressed_insert (body LONGTEXT)").await.expect("create");
        let mut conn = tunnel.connect().await;
        let before = shaper.bytes_up();
        conn.exec_drop("INSERT INTO compressed_insert VALUES (?)", (text.clone(),))
            .await
            .expect("insert");
        let sent = shaper.bytes_up() - before;
        assert!((sent as usize) * 4 < text.len(), "{sent} bytes sent for {} of text", text.len());
        let stored: Option<(u64, String)> = d
            .query_first("SELECT LENGTH(body), MD5(body) FROM compressed_insert")
            .await
            .expect("read back");
        let md5: Option<String> =
            d.exec_first("SELECT MD5(?)", (text.clone(),)).await.expect("md5");
        assert_eq!(stored, Some((text.len() as u64, md5.unwrap_or_default())));
        d.query_drop("DROP TABLE compressed_insert").await.expect("drop");
    })
    .await;
}
