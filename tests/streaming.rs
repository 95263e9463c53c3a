//! A 1,000,000-row result streams through the real binaries, and neither the sidecar's nor the
//! transport's peak memory grows with the result size, over a stream and over requests.

use e2e::processes::ProcTunnel;
use e2e::{Carrier, DATABASE, on_both_carriers, opts, within};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

/// Streams `rows` rows of ~120 bytes and returns how many arrived and their total size.
async fn stream_rows(conn: &mut Conn, rows: u64) -> (u64, u64) {
    let sql = format!("SELECT seq, REPEAT('x', 100), seq * 2 FROM seq_1_to_{rows}");
    let mut result = conn.query_iter(sql).await.expect("query");
    let mut count = 0u64;
    let mut bytes = 0u64;
    result
        .for_each(|row: Row| {
            count += 1;
            bytes += row.get::<Vec<u8>, _>(1).map_or(0, |v| v.len() as u64);
        })
        .await
        .expect("stream");
    (count, bytes)
}

on_both_carriers!(million_rows_stream_in_bounded_memory);
async fn million_rows_stream_in_bounded_memory(carrier: Carrier) {
    within(600, async {
        let ProcTunnel { transport, sidecar, sidecar_port, .. } =
            ProcTunnel::start_on(carrier, "stream", |t| t, |s| s).await;
        let mut conn =
            Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("connect through tunnel");

        let small = stream_rows(&mut conn, 100_000).await;
        assert_eq!(small, (100_000, 10_000_000));
        let (t_small, s_small) = (transport.peak_rss_kib(), sidecar.peak_rss_kib());

        let big = stream_rows(&mut conn, 1_000_000).await;
        assert_eq!(big, (1_000_000, 100_000_000), "every row arrives");
        let (t_big, s_big) = (transport.peak_rss_kib(), sidecar.peak_rss_kib());
        eprintln!(
            "{}: peak RSS KiB: transport {t_small} -> {t_big}, sidecar {s_small} -> {s_big}",
            carrier.name()
        );

        // 900,000 more rows (~110 MB more data) may not cost more than a few MiB of peak memory.
        let allowance = 8 * 1024;
        assert!(
            t_big <= t_small + allowance,
            "transport memory grew with the result: {t_small} -> {t_big} KiB"
        );
        assert!(
            s_big <= s_small + allowance,
            "sidecar memory grew with the result: {s_small} -> {s_big} KiB"
        );
        let after: u8 =
            conn.query_first("SELECT 7").await.expect("session still works").unwrap_or(0);
        assert_eq!(after, 7);
    })
    .await;
}
