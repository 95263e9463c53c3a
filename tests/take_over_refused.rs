//! A take-over that cannot go on leaves the old transport serving everything: a new process of
//! an older version is refused, one that dies before it accepts, or after the first session
//! was handed to it but before it said it took it, leaves every session working on the old
//! one (the same upstream connection, its variable), which accepts new clients again; another
//! user cannot even reach the socket. Then a real take-over still works, and `sidecar check`
//! passes against the new process. Both carriers; the
//! would-be new processes are played by hand over the socket. And what cannot move is said: a
//! session over TLS to its database stays with the old process, which logs it and ends it as
//! at a shutdown (its client gets an error at its next command), while new clients go on (a
//! greeting prepared ahead, not logged in, has not begun TLS: it moves).

use std::path::Path;
use std::time::Duration;

use e2e::processes::{ProcTunnel, sidecar_check};
use e2e::{Carrier, DATABASE, on_both_carriers, opts};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Sends one take-over message: its 9-byte head (the JSON's length, no bytes, no
/// descriptors), then its JSON.
async fn send(socket: &mut UnixStream, json: &str) {
    let mut head = [0u8; 9];
    head[..4].copy_from_slice(&(json.len() as u32).to_le_bytes());
    socket.write_all(&head).await.expect("head");
    socket.write_all(json.as_bytes()).await.expect("json");
}

/// Reads one take-over message's JSON (its descriptors are dropped by a plain read).
async fn receive(socket: &mut UnixStream) -> serde_json::Value {
    let mut head = [0u8; 9];
    let read = tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut head));
    read.await.expect("an answer in time").expect("head");
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let tail = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    let mut json = vec![0u8; len + tail];
    socket.read_exact(&mut json).await.expect("body");
    serde_json::from_slice(&json[..len]).expect("JSON")
}

/// Knocks at `path` as a new process of message version `version`.
async fn knock(path: &Path, version: u32) -> UnixStream {
    let mut socket = UnixStream::connect(path).await.expect("the socket is there");
    send(&mut socket, &format!(r#"{{"kind":"hello","version":{version}}}"#)).await;
    socket
}

/// Each session still answers on its own upstream connection, with its variable.
async fn all_work(sessions: &mut [(Conn, u64)], port: u16) {
    for (i, (conn, thread)) in sessions.iter_mut().enumerate() {
        let row: Option<(u64, i64)> =
            conn.query_first("SELECT CONNECTION_ID(), @kept").await.expect("the session works");
        assert_eq!(row, Some((*thread, i as i64)), "session {i} is the same");
    }
    let mut new = Conn::new(opts(port, Some(DATABASE))).await.expect("a new client connects");
    new.query_drop("SELECT 1").await.expect("and runs");
    new.disconnect().await.expect("quit");
}

async fn a_failed_take_over_leaves_the_old_transport_serving(carrier: Carrier) {
    let socket_path = std::env::temp_dir().join(format!(
        "take-over-refused-{}-{}.sock",
        std::process::id(),
        carrier.name()
    ));
    let line = format!("take_over_socket: {}\n", socket_path.display());
    let mut tunnel =
        ProcTunnel::start_on(carrier, "refused", |t| format!("{t}{line}"), |s| s).await;
    let port = tunnel.sidecar_port;
    let mut sessions = Vec::new();
    for i in 0..5 {
        let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("connect");
        conn.query_drop(format!("SET @kept = {i}")).await.expect("variable");
        let thread: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.expect("id");
        sessions.push((conn, thread.unwrap_or(0)));
    }

    // An older version is refused, and says why.
    let mut older = knock(&socket_path, 0).await;
    let answer = receive(&mut older).await;
    assert_eq!(answer["kind"], "refused", "{answer}");
    assert!(answer["reason"].as_str().is_some_and(|r| r.contains("version 0")), "{answer}");
    all_work(&mut sessions, port).await;

    // A new process that takes the listeners and dies before it accepts.
    let mut early = knock(&socket_path, 1).await;
    assert_eq!(receive(&mut early).await["kind"], "listeners");
    drop(early);
    all_work(&mut sessions, port).await;

    // One that dies after the first session was handed to it, before it said it took it.
    let mut midway = knock(&socket_path, 1).await;
    assert_eq!(receive(&mut midway).await["kind"], "listeners");
    send(&mut midway, r#"{"kind":"serving"}"#).await;
    let first = receive(&mut midway).await;
    assert_eq!(first["kind"], "session", "a session is handed over");
    drop(midway);
    all_work(&mut sessions, port).await;
    let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
    assert_eq!(log.matches("take-over failed: this process serves on").count(), 3, "{log}");

    // Another user cannot reach the socket (0600).
    if runs_as_root() {
        let probe = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c"])
            .arg(format!(
                "import socket; socket.socket(socket.AF_UNIX).connect({:?})",
                socket_path.display().to_string()
            ))
            .output()
            .expect("setpriv");
        let said = String::from_utf8_lossy(&probe.stderr);
        assert!(!probe.status.success() && said.contains("PermissionError"), "{said}");
    }

    // A real take-over still works, and keeps the sessions.
    let next = tunnel.transport.start_again("transport", &["--take-over"], "next");
    assert!(tunnel.transport.exits_within(Duration::from_secs(30)).await, "the old one exits");
    all_work(&mut sessions, port).await;
    let sidecar_yaml = std::fs::read_to_string(&tunnel.sidecar.config).expect("sidecar config");
    let (ok, said) = sidecar_check(&sidecar_yaml).await;
    assert!(ok, "`sidecar check` after a take-over:\n{said}");
    for (conn, _) in sessions {
        conn.disconnect().await.expect("quit");
    }
    drop(next);
}

/// True when the test runs as root (then `setpriv` can play another user).
fn runs_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

on_both_carriers!(a_failed_take_over_leaves_the_old_transport_serving);

#[tokio::test]
async fn a_session_over_tls_to_its_database_stays_and_ends_as_at_a_shutdown() {
    let socket_path =
        std::env::temp_dir().join(format!("take-over-tls-{}.sock", std::process::id()));
    let edit = |t: String| {
        let tls = format!("    tls:\n      ca_file: {}\n", e2e::mysql_ca());
        let t = t.replacen("session_timeout:", &format!("{tls}session_timeout:"), 1);
        format!("{t}take_over_socket: {}\n", socket_path.display())
    };
    let mut tunnel = ProcTunnel::start("take-over-tls", edit, |s| s).await;
    let port = tunnel.sidecar_port;
    let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("connect");
    let cipher: Option<(String, String)> =
        conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'").await.expect("status");
    assert!(cipher.is_some_and(|(_, c)| !c.is_empty()), "the upstream leg is TLS");
    let next = tunnel.transport.start_again("transport", &["--take-over"], "next");
    assert!(tunnel.transport.exits_within(Duration::from_secs(30)).await, "the old one exits");
    let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
    // (The sidecar's greeting prepared ahead has not begun TLS yet: it moves.)
    let said = log.contains("stayed=1 ") && log.contains("over TLS to their upstream");
    assert!(said, "the old process says what stayed:\n{log}");
    let next_log = std::fs::read_to_string(&next.log).unwrap_or_default();
    assert!(next_log.contains("failed=0 stayed=1"), "and so does the new one:\n{next_log}");
    let gone = tokio::time::timeout(Duration::from_secs(20), conn.query_drop("SELECT 1")).await;
    assert!(matches!(gone, Ok(Err(_))), "the session ended with an error, not a hang");
    let mut new = Conn::new(opts(port, Some(DATABASE))).await.expect("a new client");
    let one: Option<u8> = new.query_first("SELECT 1").await.expect("runs on the new process");
    assert_eq!(one, Some(1));
    drop(next);
}
