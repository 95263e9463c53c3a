//! The rogue-server file read (security review F5): an upstream that answers `SELECT 1` with a
//! LOCAL INFILE request for a secret file gets nothing of it, through the real transport and
//! sidecar, from the `mariadb` CLI (`--local-infile=1`) or PyMySQL (`local_infile=True`): each
//! client gets an error instead. So does a rogue transport (compromised, or a man in the
//! middle of plain `http://`), which only the sidecar's own check stops. A LOAD DATA LOCAL INFILE the client asked for still works,
//! against the real MariaDB, alone and among other results (rows whose first column is NULL
//! start with 0xFB too).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::cli::mariadb_async;
use e2e::door::{greeting, packet};
use e2e::{DATABASE, PASSWORD, Tunnel, USER, clients, direct, within};
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Everything the fake server received, on every connection.
type Received = Arc<Mutex<Vec<u8>>>;

/// The statement the fake server answers with a request for the secret file.
const BAIT: &[u8] = b"SELECT 1";

/// A file with a secret in it, in the temp dir; returns its path and the secret.
fn secret_file(tag: &str) -> (String, String) {
    let secret = format!("ssh-private-key-{}-{tag}-do-not-leak", std::process::id());
    let path = std::env::temp_dir().join(format!("sqltunnel-rogue-{}-{tag}", std::process::id()));
    std::fs::write(&path, &secret).expect("write secret");
    (path.to_str().expect("utf-8 path").to_owned(), secret)
}

/// Reads one packet; `None` at the end of the connection.
async fn read_packet(socket: &mut TcpStream, received: &Received) -> Option<Vec<u8>> {
    let mut head = [0u8; 4];
    socket.read_exact(&mut head).await.ok()?;
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    let mut payload = vec![0; len];
    socket.read_exact(&mut payload).await.ok()?;
    let mut all = received.lock().expect("lock");
    all.extend_from_slice(&head);
    all.extend_from_slice(&payload);
    Some(payload)
}

/// One connection of the fake server: any login is accepted, `BAIT` is answered with a
/// LOCAL INFILE request for `wanted`, anything else with OK.
async fn serve_rogue(mut socket: TcpStream, wanted: String, received: Received) {
    const OK: &[u8] = b"\x00\x00\x00\x02\x00\x00\x00";
    if socket.write_all(&packet(0, &greeting("mysql_native_password"))).await.is_err()
        || read_packet(&mut socket, &received).await.is_none()
        || socket.write_all(&packet(2, OK)).await.is_err()
    {
        return;
    }
    while let Some(command) = read_packet(&mut socket, &received).await {
        let answer = match command.split_first() {
            Some((0x01, _)) | None => return,
            Some((0x03, text)) if text == BAIT => [b"\xfb", wanted.as_bytes()].concat(),
            _ => OK.to_vec(),
        };
        if socket.write_all(&packet(1, &answer)).await.is_err() {
            return;
        }
    }
}

/// Starts the fake server; returns its port and what it receives.
async fn rogue_server(wanted: &str) -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received = Received::default();
    let (wanted, all) = (wanted.to_owned(), received.clone());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve_rogue(socket, wanted.clone(), all.clone()));
        }
    });
    (port, received)
}

fn leaked(received: &Received, secret: &str) -> bool {
    let all = received.lock().expect("lock");
    all.windows(secret.len()).any(|w| w == secret.as_bytes())
}

/// Runs the `mariadb` CLI and PyMySQL, each with local files enabled, through the sidecar at
/// `sidecar` on the bait; asserts neither sends the secret to where `received` records and
/// each gets an error; returns their errors.
async fn assert_refused(sidecar: u16, received: &Received, secret: &str) -> (String, String) {
    let run = mariadb_async(sidecar, USER, PASSWORD, &["--local-infile=1", "-e", "SELECT 1"]).await;
    // The connection is closed: whatever the client sent is in.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!leaked(received, secret), "the mariadb CLI's file got through: {run:?}");
    assert!(!run.success && run.stderr.contains("ERROR"), "{run:?}");
    let port = sidecar.to_string();
    let args = [port.as_str(), USER, PASSWORD, DATABASE, "infile", "SELECT 1"];
    let out = clients::python("pymysql_queries.py", &args).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!leaked(received, secret), "PyMySQL's file got through: {out}");
    assert!(out.contains("\"error\""), "{out}");
    (run.stderr, out)
}

#[tokio::test]
async fn a_rogue_upstream_reads_no_file_through_the_tunnel() {
    within(90, async {
        let (path, secret) = secret_file("rogue");
        let (port, received) = rogue_server(&path).await;
        let tunnel = Tunnel::start_custom(&e2e::transport_yaml(port), |url| {
            e2e::sidecar_yaml(url, e2e::TOKEN)
        })
        .await;
        // The same clients straight at the fake server do send the file: the bait works.
        mariadb_async(port, USER, PASSWORD, &["--local-infile=1", "-e", "SELECT 1"]).await;
        assert!(leaked(&received, &secret), "the fake server does not bait the client");
        received.lock().expect("lock").clear();
        // The transport refuses the request, or the sidecar does.
        let (cli, py) = assert_refused(tunnel.sidecar.port(), &received, &secret).await;
        println!("mariadb: {}\npymysql: {py}", cli.trim());
        std::fs::remove_file(&path).expect("remove");
    })
    .await;
}

#[tokio::test]
async fn a_rogue_transport_reads_no_file_through_the_sidecar() {
    within(90, async {
        let (path, secret) = secret_file("transport");
        let (url, received) = rogue_transport(&path).await;
        let shutdown = tokio_util::sync::CancellationToken::new();
        // Requests, not a WebSocket stream: the fake speaks only those.
        let yaml = e2e::sidecar_yaml(&url, e2e::TOKEN)
            .replace("  connect_timeout: 2s\n", "  connect_timeout: 2s\n  stream: off\n");
        let sidecar = Tunnel::start_sidecar(&yaml, shutdown.clone()).await;
        let (cli, py) = assert_refused(sidecar.port(), &received, &secret).await;
        // The sidecar's own refusal, naming the file; the session dropped, not quit.
        let refusal = format!("ERROR 1148 (42000) at line 1: LOAD DATA LOCAL INFILE request refused by the sqltunnel sidecar: the server asked for the local file '{path}'");
        assert!(cli.contains(&refusal), "{cli}");
        assert!(py.contains("[1148, \"LOAD DATA LOCAL INFILE request refused"), "{py}");
        let requests = String::from_utf8_lossy(&received.lock().expect("lock")).into_owned();
        assert!(!requests.contains("/infile"), "{requests}");
        assert_eq!(requests.matches("?end=hangup").count(), 2, "{requests}");
        shutdown.cancel();
        std::fs::remove_file(&path).expect("remove");
    })
    .await;
}

/// A fake transport, as a compromised one or a man in the middle of plain `http://` would be:
/// it greets with [`greeting`], accepts any login, and answers [`BAIT`] with a LOCAL INFILE
/// request for `wanted`. Returns its URL and every request it received, bodies included.
async fn rogue_transport(wanted: &str) -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let received = Received::default();
    let (wanted, all) = (wanted.to_owned(), received.clone());
    tokio::spawn(async move {
        let sessions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        while let Ok((socket, _)) = listener.accept().await {
            let (wanted, all, sessions) = (wanted.clone(), all.clone(), sessions.clone());
            tokio::spawn(async move {
                let mut socket = tokio::io::BufReader::new(socket);
                while let Some((head, body)) = read_request(&mut socket).await {
                    all.lock()
                        .expect("lock")
                        .extend_from_slice(&[head.as_bytes(), &body[..]].concat());
                    let answer = fake_answer(&head, &body, &wanted, &sessions).await;
                    if socket.get_mut().write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, received)
}

/// One HTTP/1.1 request: its head and its body (Content-Length or chunked).
async fn read_request(socket: &mut tokio::io::BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncBufReadExt;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if socket.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    if let Some(len) = lower.split("content-length:").nth(1) {
        let len: usize = len.lines().next()?.trim().parse().ok()?;
        body.resize(len, 0);
        socket.read_exact(&mut body).await.ok()?;
    } else if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut size = String::new();
            socket.read_line(&mut size).await.ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            socket.read_exact(&mut chunk).await.ok()?;
            body.extend_from_slice(&chunk[..size]);
            if size == 0 {
                break;
            }
        }
    }
    Some((head, body))
}

/// The fake transport's answer to a request.
async fn fake_answer(
    head: &str,
    body: &[u8],
    wanted: &str,
    sessions: &std::sync::atomic::AtomicUsize,
) -> Vec<u8> {
    use common::wire::{TurnEnd, encode_packets, encode_turn};
    let frames = |packets: Vec<u8>, end: TurnEnd| {
        let mut out = bytes::BytesMut::new();
        encode_packets(&mut out, &packets);
        encode_turn(&mut out, end);
        out.to_vec()
    };
    let ok = packet(2, b"\x00\x00\x00\x02\x00\x00\x00");
    let request = head.lines().next().unwrap_or_default();
    let (session, frames) = if request.starts_with("POST /v1/relay ") {
        let n = sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (
            format!("fake{n}"),
            frames(packet(0, &greeting("mysql_native_password")), TurnEnd::AwaitAuth),
        )
    } else if request.contains("/login ") {
        (String::new(), frames(ok, TurnEnd::Done))
    } else if request.contains("/command ") && body.ends_with(BAIT) {
        let asking = packet(1, &[b"\xfb", wanted.as_bytes()].concat());
        (String::new(), frames(asking, TurnEnd::AwaitFile))
    } else if request.contains("/command ") || request.contains("/infile ") {
        (String::new(), frames(packet(1, &ok[4..]), TurnEnd::Done))
    } else if request.starts_with("POST /v1/keepalive ") {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let json = b"{\"gone\":[]}";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            json.len()
        );
        return [head.as_bytes(), json].concat();
    } else {
        return b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n".to_vec();
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {}\r\nx-tunnel-session: {session}\r\ncontent-length: {}\r\n\r\n",
        common::wire::FRAMES_CONTENT_TYPE,
        frames.len()
    );
    [head.as_bytes(), &frames].concat()
}

async fn row_count(table: &str) -> u64 {
    let mut c = direct().await;
    c.query_first(format!("SELECT COUNT(*) FROM {table}")).await.expect("count").expect("row")
}

#[tokio::test]
async fn a_load_data_local_the_client_asked_for_still_works() {
    within(90, async {
        let tunnel = Tunnel::start().await;
        let path = std::env::temp_dir().join(format!("sqltunnel-rogue-{}.csv", std::process::id()));
        let rows: String = (0..300).map(|i| format!("{i},row {i}\n")).collect();
        std::fs::write(&path, rows).expect("write csv");
        let path = path.to_str().expect("utf-8 path").to_owned();
        let mut c = direct().await;
        for table in ["rogue_cli", "rogue_py"] {
            c.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.expect("drop");
            let create = format!("CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(40))");
            c.query_drop(create).await.expect("create");
        }
        let load = |table: &str| {
            format!("LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table} FIELDS TERMINATED BY ','")
        };
        // Among other results: rows whose first column is NULL before and after the load.
        let sql = format!(
            "SELECT NULL, 'a' UNION ALL SELECT NULL, 'b'; {}; SELECT NULL, ROW_COUNT()",
            load("rogue_cli")
        );
        let port = tunnel.sidecar.port();
        let run =
            mariadb_async(port, USER, PASSWORD, &["--local-infile=1", "-N", "-e", &sql, DATABASE])
                .await;
        assert!(run.success, "{run:?}");
        assert_eq!(run.stdout, "NULL\ta\nNULL\tb\nNULL\t300\n");
        assert_eq!(row_count("rogue_cli").await, 300);
        let port = port.to_string();
        let load = load("rogue_py");
        // PyMySQL does not commit: the rows are counted in its session.
        let count = "SELECT NULL, COUNT(*) FROM rogue_py";
        let args = [port.as_str(), USER, PASSWORD, DATABASE, "infile", &load, count];
        let out = clients::python("pymysql_queries.py", &args).await;
        assert!(!out.contains("\"error\""), "{out}");
        assert!(out.contains("[[[\"None\", \"300\"]]]"), "{out}");
        std::fs::remove_file(&path).expect("remove");
    })
    .await;
}
