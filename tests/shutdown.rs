//! Graceful shutdown of each binary (SIGTERM): a command that ends within `shutdown_grace`
//! finishes; one still running after it is killed upstream and its client gets a MySQL error;
//! idle clients are closed; a new login gets a clear error, never a hang; the process exits.
//! Each over a stream and over requests.

use std::time::{Duration, Instant};

use e2e::processes::{Proc, ProcTunnel};
use e2e::{Carrier, DATABASE, PASSWORD, USER, direct, on_both_carriers, opts, within};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error as MyError};

/// Runs until killed: MariaDB's sequence engine counts for minutes.
const LONG_QUERY: &str = "SELECT COUNT(*) FROM seq_1_to_100000000000 WHERE seq % 7 = 3";
/// ER_QUERY_INTERRUPTED: the statement was killed.
const QUERY_INTERRUPTED: u16 = 1317;
/// ER_SERVER_SHUTDOWN: the tunnel cut the answer.
const SERVER_SHUTDOWN: u16 = 1053;
/// Each binary's grace in these tests.
const GRACE: Duration = Duration::from_millis(1500);

/// The clients of one shutdown: a short command, a long one, an idle connection.
struct Clients {
    short: tokio::task::JoinHandle<Result<u64, MyError>>,
    long: tokio::task::JoinHandle<Result<u64, MyError>>,
    long_thread: u64,
    idle: Conn,
}

/// Opens the three clients on `port` and starts their commands.
async fn start_clients(port: u16) -> Clients {
    let mut idle = Conn::new(opts(port, Some(DATABASE))).await.expect("idle client");
    idle.query_drop("SELECT 1").await.expect("idle client works");
    let mut short = Conn::new(opts(port, Some(DATABASE))).await.expect("short client");
    let mut long = Conn::new(opts(port, Some(DATABASE))).await.expect("long client");
    let long_thread: u64 =
        long.query_first("SELECT CONNECTION_ID()").await.ok().flatten().unwrap_or(0);
    let short_thread: u64 =
        short.query_first("SELECT CONNECTION_ID()").await.ok().flatten().unwrap_or(0);
    let short = tokio::spawn(async move {
        let r: Option<u64> = short.query_first("SELECT SLEEP(0.8) + 7").await?;
        Ok(r.unwrap_or(0))
    });
    let long = tokio::spawn(async move {
        let r: Option<u64> = long.query_first(LONG_QUERY).await?;
        Ok(r.unwrap_or(0))
    });
    // Both commands are running upstream before the signal: these clients' own (the other
    // tests of this file run the same statements at the same time).
    let mut d = direct().await;
    let mut running: Vec<u64> = Vec::new();
    for _ in 0..100 {
        running = d
            .exec("SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN (?, ?) AND INFO IS NOT NULL AND INFO NOT LIKE '%CONNECTION_ID%'", (short_thread, long_thread))
            .await
            .expect("processlist");
        if running.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(running.len(), 2, "both commands run upstream before the signal");
    Clients { short, long, long_thread, idle }
}

/// The MySQL error code of a failed command.
fn code(e: &MyError) -> Option<u16> {
    match e {
        MyError::Server(s) => Some(s.code),
        _ => None,
    }
}

/// Whether upstream thread `id` still runs a statement.
async fn still_running(id: u64) -> bool {
    let mut d = direct().await;
    let n: Option<u64> = d
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND COMMAND = 'Query'",
            (id,),
        )
        .await
        .expect("processlist");
    n.unwrap_or(0) > 0
}

/// Checks what each client saw after `signalled` and that `proc` exited; returns the long
/// command's error code.
async fn check_shutdown(clients: Clients, signalled: Instant, proc: &mut Proc) -> Option<u16> {
    let Clients { short, long, long_thread, mut idle } = clients;
    let short = short.await.expect("short task");
    assert_eq!(short.ok(), Some(7), "a command that ends within the grace finishes");

    let long = long.await.expect("long task");
    let waited = signalled.elapsed();
    let error = long.expect_err("the long command is ended");
    assert!(waited >= GRACE, "ended after the grace, not before: {waited:?}");
    assert!(waited < GRACE + Duration::from_secs(8), "ended soon after the grace: {waited:?}");

    let mut gone = false;
    for _ in 0..100 {
        if !still_running(long_thread).await {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the long statement no longer runs upstream");

    assert!(idle.query_drop("SELECT 1").await.is_err(), "the idle client is closed");

    for _ in 0..100 {
        if !proc.is_running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!proc.is_running(), "the process exits");
    code(&error)
}

/// The transport config with a grace and, optionally, an admin account for KILL QUERY.
fn transport_edit(admin: bool) -> impl FnOnce(String) -> String {
    move |t| {
        let mut t = format!("{t}shutdown_grace: 1500ms\n");
        if admin {
            t = t.replace(
                "    address:",
                &format!("    admin_user: {USER}\n    admin_password: {PASSWORD}\n    address:"),
            );
        }
        t
    }
}

/// A sidecar that only passes logins through (the transport then knows no credentials).
fn passthrough(s: String) -> String {
    s.split("users:").next().unwrap_or_default().to_owned()
}

on_both_carriers!(transport_sigterm_finishes_short_commands_and_kills_long_ones);
async fn transport_sigterm_finishes_short_commands_and_kills_long_ones(carrier: Carrier) {
    within(120, async {
        let mut tunnel =
            ProcTunnel::start_on(carrier, "term-transport", transport_edit(true), passthrough)
                .await;
        let clients = start_clients(tunnel.sidecar_port).await;
        // Taken before the signal: it may act before kill(1) returns.
        let signalled = Instant::now();
        tunnel.transport.signal("TERM");

        // A new login during the drain gets a clear error at once.
        let login = tokio::time::timeout(
            Duration::from_secs(5),
            Conn::new(opts(tunnel.sidecar_port, Some(DATABASE))),
        )
        .await
        .expect("a login during shutdown is answered, not left hanging");
        assert!(login.is_err(), "no new session during shutdown");

        let code = check_shutdown(clients, signalled, &mut tunnel.transport).await;
        assert_eq!(code, Some(QUERY_INTERRUPTED), "the client gets the server's own error");
        let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
        assert!(log.contains("running statement killed upstream"), "{log}");
        assert!(!log.contains(PASSWORD), "no password in the log");
    })
    .await;
}

on_both_carriers!(transport_sigterm_without_kill_rights_cuts_the_answer_with_1053);
async fn transport_sigterm_without_kill_rights_cuts_the_answer_with_1053(carrier: Carrier) {
    within(120, async {
        let tunnel =
            ProcTunnel::start_on(carrier, "term-cut", transport_edit(false), passthrough).await;
        let clients = start_clients(tunnel.sidecar_port).await;
        let long_thread = clients.long_thread;
        // Taken before the signal: it may act before kill(1) returns.
        let signalled = Instant::now();
        tunnel.transport.signal("TERM");
        let Clients { short, long, .. } = clients;
        assert_eq!(short.await.expect("task").ok(), Some(7));
        let error = long.await.expect("task").expect_err("cut");
        assert_eq!(code(&error), Some(SERVER_SHUTDOWN), "{error}");
        assert!(signalled.elapsed() < GRACE + Duration::from_secs(5));
        // Without credentials the statement runs on until the server notices: end it here.
        let mut d = direct().await;
        drop(d.query_drop(format!("KILL {long_thread}")).await);
    })
    .await;
}

on_both_carriers!(sidecar_sigterm_finishes_short_commands_and_kills_long_ones);
async fn sidecar_sigterm_finishes_short_commands_and_kills_long_ones(carrier: Carrier) {
    within(120, async {
        let grace = |s| format!("{s}shutdown_grace: 1500ms\n");
        let mut tunnel = ProcTunnel::start_on(carrier, "term-sidecar", |t| t, grace).await;
        let clients = start_clients(tunnel.sidecar_port).await;
        let signalled = Instant::now();
        tunnel.sidecar.signal("TERM");

        // The port is closed at once: a new client is refused, not queued.
        let closing = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", tunnel.sidecar_port)).await.is_ok() {
            assert!(closing.elapsed() < Duration::from_secs(1), "the port stays open");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let refused = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(("127.0.0.1", tunnel.sidecar_port)),
        )
        .await
        .expect("answered at once");
        assert!(refused.is_err(), "the sidecar no longer listens");

        let code = check_shutdown(clients, signalled, &mut tunnel.sidecar).await;
        // The users entry's own credentials end the statement upstream.
        assert_eq!(code, Some(QUERY_INTERRUPTED));
        assert!(tunnel.transport.is_running(), "the transport lives on");
    })
    .await;
}
