//! A statement over the upstream's own `max_allowed_packet` ends exactly as on a direct
//! connection (MariaDB 10.11 refuses it and hangs up: the client sees its connection lost),
//! and the tunnel's other sessions carry on. The test lowers the global limit for its duration (test
//! binaries run one after another, and sessions keep the value they logged in with).

use e2e::{DATABASE, Tunnel, direct, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// The upstream's limit during the test.
const LIMIT: usize = 4 << 20;

/// What a client saw when it sent a statement over the limit, then `SELECT 1`.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// The server error code of the big statement, if a server error came back.
    code: Option<u16>,
    /// The connection still answered afterwards.
    lives_on: bool,
}

async fn over_the_limit(port: u16) -> Outcome {
    let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("connect");
    let max: u64 =
        conn.query_first("SELECT @@max_allowed_packet").await.ok().flatten().unwrap_or(0);
    assert_eq!(max, LIMIT as u64, "the session sees the lowered limit");
    let big = format!("SELECT LENGTH('{}')", "x".repeat(LIMIT + 1024));
    let code = match conn.query_drop(big).await {
        Err(mysql_async::Error::Server(e)) => Some(e.code),
        Err(_) => None,
        Ok(()) => panic!("a statement over max_allowed_packet was accepted"),
    };
    let lives_on = conn.query_drop("SELECT 1").await.is_ok();
    Outcome { code, lives_on }
}

#[tokio::test]
async fn statement_over_max_allowed_packet_ends_as_directly() {
    let mut admin = direct().await;
    let before: u64 =
        admin.query_first("SELECT @@GLOBAL.max_allowed_packet").await.ok().flatten().unwrap_or(0);
    admin.query_drop(format!("SET GLOBAL max_allowed_packet = {LIMIT}")).await.expect("lower");
    let checks = tokio::spawn(within(120, async {
        let tunnel = Tunnel::start().await;
        let mut bystander = tunnel.connect().await;
        bystander.query_drop("SET @mine = 42").await.expect("bystander");

        let direct = over_the_limit(e2e::mysql_port()).await;
        let tunneled = over_the_limit(tunnel.sidecar.port()).await;
        assert_eq!(tunneled, direct, "the same ending as directly");

        let mine: Option<u32> = bystander.query_first("SELECT @mine").await.expect("bystander");
        assert_eq!(mine, Some(42), "another session carries on");
        let mut fresh = tunnel.connect().await;
        let one: Option<u8> = fresh.query_first("SELECT 1").await.expect("new session");
        assert_eq!(one, Some(1));
    }));
    let result = checks.await;
    admin
        .query_drop(format!("SET GLOBAL max_allowed_packet = {before}"))
        .await
        .expect("restore max_allowed_packet");
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}
