//! A take-over that cannot go on leaves the old transport serving: a new process of an older
//! version is refused, and one that dies before it accepts leaves every session working on
//! the old one (the same upstream connection, its variable); one that dies after sessions
//! were handed to it, before it said it took them, costs those sessions (it might have used
//! their connections: they end, with an error at their next command, never a hang), and the
//! old one accepts again; another user cannot even reach the socket. Then a real take-over still works, and `sidecar check`
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

/// A new process played by a Python one: it knocks at `path`, takes the listeners, says it
/// serves, reads the first session handed to it and exits without taking it. Answers that
/// message.
async fn die_midway(path: &Path) -> serde_json::Value {
    const SCRIPT: &str = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def send(message):
    body = json.dumps(message).encode()
    s.sendall(struct.pack("<IIB", len(body), 0, 0) + body)
def exact(n):
    data = b""
    while len(data) < n:
        part = s.recv(n - len(data))
        if not part:
            sys.exit("the old process hung up")
        data += part
    return data
def receive():
    length, tail, _ = struct.unpack("<IIB", exact(9))
    message = json.loads(exact(length))
    exact(tail)
    return message
send({"kind": "hello", "version": 1})
assert receive()["kind"] == "listeners"
send({"kind": "serving"})
print(json.dumps(receive()))
"#;
    let out = tokio::process::Command::new("/usr/bin/python3")
        .args(["-c", SCRIPT])
        .arg(path)
        .output()
        .await
        .expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the message it read")
}

/// Five sessions, each with its variable `@kept`, and their upstream connections' ids.
async fn open_sessions(port: u16) -> Vec<(Conn, u64)> {
    let mut sessions = Vec::new();
    for i in 0..5 {
        let mut conn = Conn::new(opts(port, Some(DATABASE))).await.expect("connect");
        conn.query_drop(format!("SET @kept = {i}")).await.expect("variable");
        let thread: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.expect("id");
        sessions.push((conn, thread.unwrap_or(0)));
    }
    sessions
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
    let mut sessions = open_sessions(port).await;

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

    // One (a process of its own) that dies after sessions were handed to it, before it said it
    // took them: the sessions it may hold end (it might have used their connections), said
    // gone, and never come back here; the old process serves on, new clients included.
    let first = die_midway(&socket_path).await;
    assert_eq!(first["kind"], "session", "a session is handed over: {first}");
    let lost = first["link"]["connection_id"].as_u64().unwrap_or(0);
    for (i, (conn, thread)) in sessions.iter_mut().enumerate() {
        let answer = tokio::time::timeout(Duration::from_secs(20), conn.query_drop("SELECT 1"));
        let answer = answer.await.unwrap_or_else(|_| panic!("session {i} hangs"));
        if *thread == lost {
            assert!(answer.is_err(), "the session handed to the dead process ended");
        }
    }
    // The sidecar's greeting prepared ahead went with them: the first client to connect may
    // meet its end, as after a restart; the next one may not.
    if let Ok(conn) = Conn::new(opts(port, Some(DATABASE))).await {
        drop(conn.disconnect().await);
    }
    let mut sessions = open_sessions(port).await;
    all_work(&mut sessions, port).await;
    let log = std::fs::read_to_string(&tunnel.transport.log).unwrap_or_default();
    assert_eq!(log.matches("take-over failed: this process serves on").count(), 3, "{log}");
    assert!(log.contains("the new process is gone: its sessions ended"), "{log}");

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
