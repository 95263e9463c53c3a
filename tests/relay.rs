//! The relayed conversation compared with a direct one, byte for byte: the greeting, answers
//! with and without CLIENT_DEPRECATE_EOF, MariaDB's extended metadata, session tracking,
//! server-side cursors, COM_SET_OPTION, KILL of a processlist id, commands a client pipelines.
//! (A server-side close of an idle connection: `tests/server_closes.rs`.)

use e2e::http::metric;
use e2e::raw::{CAPS, RawClient};
use e2e::{DATABASE, PASSWORD, TOKEN, Tunnel, USER, mysql_port, opts, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

/// CLIENT_DEPRECATE_EOF.
const DEPRECATE_EOF: u32 = 0x0100_0000;
/// CLIENT_SESSION_TRACK.
const SESSION_TRACK: u32 = 0x0080_0000;
/// CLIENT_PS_MULTI_RESULTS.
const PS_MULTI_RESULTS: u32 = 0x0004_0000;
/// MARIADB_CLIENT_PROGRESS | MARIADB_CLIENT_STMT_BULK_OPERATIONS | EXTENDED_METADATA.
const MARIADB_CAPS: u32 = 1 | 4 | 8;

/// Capability fields of a greeting payload: (flags, MariaDB's extended flags, plugin name).
fn greeting_fields(g: &[u8]) -> (String, u32, u32, String) {
    let nul = g[1..].iter().position(|&b| b == 0).expect("version") + 1;
    let version = String::from_utf8_lossy(&g[1..nul]).into_owned();
    let p = &g[nul + 1..];
    let low = u16::from_le_bytes([p[13], p[14]]);
    let high = u16::from_le_bytes([p[18], p[19]]);
    let mariadb = u32::from_le_bytes([p[27], p[28], p[29], p[30]]);
    let plugin = String::from_utf8_lossy(&p[44..]).trim_end_matches('\0').to_owned();
    (version, u32::from(high) << 16 | u32::from(low), mariadb, plugin)
}

/// A COM_QUERY packet payload.
fn query(sql: &str) -> Vec<u8> {
    [&[3u8][..], sql.as_bytes()].concat()
}

#[tokio::test]
async fn the_greeting_is_the_upstreams() {
    within(30, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let (mut direct, dg) =
            RawClient::login_mariadb(mysql_port(), USER, PASSWORD, DATABASE, CAPS, MARIADB_CAPS)
                .await;
        let (mut through, tg) = RawClient::login_mariadb(
            tunnel.sidecar.port(),
            USER,
            PASSWORD,
            DATABASE,
            CAPS,
            MARIADB_CAPS,
        )
        .await;
        let (d_version, d_caps, d_mariadb, d_plugin) = greeting_fields(&dg);
        let (t_version, t_caps, t_mariadb, t_plugin) = greeting_fields(&tg);
        assert_eq!(t_version, d_version);
        assert_eq!(t_plugin, d_plugin);
        // TLS belongs to one leg: the sidecar offers it itself (client_tls on); compression it
        // offers as the server does, and speaks it itself.
        assert_eq!(t_caps, d_caps, "{t_caps:#x} vs {d_caps:#x}");
        assert_ne!(t_caps & 0x20, 0, "compression is offered, as the server offers it");
        // Metadata caching and COM_MULTI are not relayed; everything else is the server's.
        assert_eq!(t_mariadb, d_mariadb & !(16 | 2), "{t_mariadb:#x} vs {d_mariadb:#x}");
        for (client, greeting) in [(&mut direct, &dg), (&mut through, &tg)] {
            let id = client.greeting_connection_id();
            let answer = client.command_all(&query("SELECT CONNECTION_ID()")).await;
            let row = &answer[answer.len() - 2];
            assert_eq!(String::from_utf8_lossy(&row[1..]), id.to_string(), "{greeting:?}");
        }
    })
    .await;
}

/// Commands whose answers do not depend on the connection (ids, timing), run on a fresh
/// session of each side and compared byte for byte.
fn script() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = [
        "CREATE TEMPORARY TABLE r (id INT AUTO_INCREMENT PRIMARY KEY, j JSON, a INET6, u UUID, \
         t TEXT, d DECIMAL(10,3), b BLOB, dt DATETIME(6))",
        "INSERT INTO r (j, a, u, t, d, b, dt) VALUES ('{\"k\": [1, 2]}', '::1', \
         '123e4567-e89b-12d3-a456-426655440000', '', 1.5, x'00ff', '2024-01-02 03:04:05.5'), \
         (NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        "SELECT * FROM r",
        "SELECT * FROM r WHERE id > 100",
        "SELECT 1; SELECT 'two', NULL; DO 3",
        "SELECT * FROM no_such_table_relay",
        "UPDATE r SET t = 'x' WHERE id = 1",
        "SET autocommit = 0",
        "SET @@session.time_zone = '+02:00'",
        "BEGIN",
        "COMMIT",
        "SET autocommit = 1",
        "USE mysql",
        "SHOW WARNINGS",
        "SELECT 1 + 'a'",
        "SHOW WARNINGS",
    ]
    .iter()
    .map(|sql| query(sql))
    .collect();
    s.push(b"\x0e".to_vec()); // COM_PING
    s.push([&b"\x02"[..], DATABASE.as_bytes()].concat()); // COM_INIT_DB
    s.push(b"\x1b\x01\x00".to_vec()); // COM_SET_OPTION: multi-statements off
    s.push(query("SELECT 1; SELECT 2")); // now refused by the server
    s.push(b"\x1b\x00\x00".to_vec()); // and on again
    s.push(b"\x1b\x07\x00".to_vec()); // an unknown option
    s.push(query("CREATE OR REPLACE TABLE relay_fields (a INT, b VARCHAR(3))"));
    s.push(b"\x04relay_fields\x00".to_vec()); // COM_FIELD_LIST
    s.push(b"\x16SELECT ? AS p, 2 AS q".to_vec()); // COM_STMT_PREPARE
    s.push(b"\x16DO 1".to_vec());
    s.push(b"\x16SELEC".to_vec());
    s
}

async fn run_script(port: u16, caps: u32, mariadb: u32) -> Vec<Vec<u8>> {
    let (mut c, _) = RawClient::login_mariadb(port, USER, PASSWORD, DATABASE, caps, mariadb).await;
    let mut answers = Vec::new();
    for command in script() {
        let mut answer = c.command_bytes(&command).await;
        if command[0] == 0x16 && answer.get(4) == Some(&0) {
            // Statement ids are numbered by the server's thread (it may be a reused one).
            answer[5..9].fill(0);
        }
        answers.push(answer);
    }
    answers
}

#[tokio::test]
async fn answers_are_byte_for_byte_the_servers_whatever_the_client_asks_for() {
    within(240, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let variants = [
            (CAPS, 0),
            (CAPS | DEPRECATE_EOF, 0),
            (CAPS | DEPRECATE_EOF | SESSION_TRACK | PS_MULTI_RESULTS, MARIADB_CAPS),
            (CAPS | SESSION_TRACK, MARIADB_CAPS),
        ];
        let names: Vec<String> =
            script().iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        let port = tunnel.sidecar.port();
        // Each run is its own task, so its (large, in debug builds) future lives on the heap.
        let runs = variants.map(|(caps, mariadb)| {
            tokio::spawn(async move {
                let direct = run_script(mysql_port(), caps, mariadb).await;
                (caps, mariadb, direct, run_script(port, caps, mariadb).await)
            })
        });
        for run in runs {
            let (caps, mariadb, direct, through) = run.await.expect("run");
            for ((d, t), name) in direct.iter().zip(&through).zip(&names) {
                assert!(!d.is_empty(), "{name}: no direct answer");
                assert_eq!(t, d, "caps {caps:#x}/{mariadb:#x}: {name}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn extended_metadata_names_json_inet6_and_uuid_columns() {
    within(30, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let create = query("CREATE TEMPORARY TABLE x (j JSON, a INET6, u UUID)");
        let (mut c, _) = RawClient::login_mariadb(
            tunnel.sidecar.port(),
            USER,
            PASSWORD,
            DATABASE,
            CAPS,
            MARIADB_CAPS,
        )
        .await;
        assert_eq!(c.command_all(&create).await[0][0], 0, "created");
        let answer = c.command_all(&query("SELECT * FROM x")).await;
        let definitions = String::from_utf8_lossy(&answer[1..4].concat()).into_owned();
        for name in ["json", "inet6", "uuid"] {
            assert!(definitions.contains(name), "{name} in {definitions:?}");
        }
    })
    .await;
}

/// A cursor: COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY, then COM_STMT_FETCH twice.
async fn cursor_answers(port: u16, caps: u32) -> Vec<Vec<u8>> {
    let (mut c, _) = RawClient::login_mariadb(port, USER, PASSWORD, DATABASE, caps, 0).await;
    let prepared = c.command_bytes(b"\x16SELECT seq FROM seq_1_to_5").await;
    let id = &prepared[5..9];
    let execute = [&[0x17u8][..], id, &[1, 1, 0, 0, 0]].concat();
    let fetch = [&[0x1cu8][..], id, &[3, 0, 0, 0]].concat();
    // Statement ids are the server's to number: compare the rest of the prepare's answer.
    let mut masked = prepared.clone();
    masked[5..9].fill(0);
    let mut out = vec![masked];
    out.push(c.command_bytes(&execute).await);
    out.push(c.command_bytes(&fetch).await);
    out.push(c.command_bytes(&fetch).await);
    out.push(c.command_bytes(&query("SELECT 'after the cursor'")).await);
    out
}

#[tokio::test]
async fn a_server_side_cursor_is_fetched_as_directly() {
    within(60, async {
        let tunnel = Tunnel::start_passthrough("").await;
        for caps in [CAPS, CAPS | DEPRECATE_EOF] {
            let direct = cursor_answers(mysql_port(), caps).await;
            let through = cursor_answers(tunnel.sidecar.port(), caps).await;
            assert_eq!(through, direct, "caps {caps:#x}");
            assert!(direct[3].len() > 8, "the second fetch returns rows");
        }
    })
    .await;
}

#[tokio::test]
async fn kill_takes_the_servers_processlist_id() {
    within(30, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let mut victim = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await.expect("a");
        let mut killer = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await.expect("b");
        let id: u64 = victim.query_first("SELECT CONNECTION_ID()").await.expect("q").expect("id");
        assert_eq!(u64::from(victim.id()), id, "the driver's thread id is the server's");
        let listed: Option<u64> = killer
            .exec_first("SELECT ID FROM information_schema.PROCESSLIST WHERE ID = ?", (id,))
            .await
            .expect("processlist");
        assert_eq!(listed, Some(id));
        killer.query_drop(format!("KILL {id}")).await.expect("KILL of a processlist id");
        let after = victim.query_drop("SELECT 1").await;
        assert!(
            matches!(after, Err(mysql_async::Error::Io(_) | mysql_async::Error::Driver(_))),
            "{after:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_client_asking_for_compression_gets_it_as_the_server_offers_it() {
    within(30, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let (_, greeting) =
            RawClient::login_mariadb(tunnel.sidecar.port(), USER, PASSWORD, DATABASE, CAPS, 0)
                .await;
        let (_, caps, _, _) = greeting_fields(&greeting);
        assert_ne!(caps & 0x20, 0, "CLIENT_COMPRESS is offered");
        let compressed = opts(tunnel.sidecar.port(), Some(DATABASE))
            .compression(mysql_async::Compression::fast());
        let mut conn = Conn::new(compressed).await.expect("login with compression asked for");
        let big: Option<String> =
            conn.query_first("SELECT REPEAT('abc', 100000)").await.expect("query");
        assert_eq!(big.map(|b| b.len()), Some(300_000));
    })
    .await;
}

/// Commands a client sends in one write without waiting for answers: a prepare and an execute
/// of the statement it makes, a close (no answer), an error, a ping, COM_INIT_DB, a 300 KB
/// result, several result sets, and a variable set by the first.
fn pipeline() -> Vec<Vec<u8>> {
    // Statement id -1: the statement prepared last (what MariaDB's drivers pipeline).
    let mut execute = vec![0x17, 0xff, 0xff, 0xff, 0xff, 0, 1, 0, 0, 0, 0, 1, 0x08, 0];
    execute.extend_from_slice(&41i64.to_le_bytes());
    vec![
        query("SET @x = 5"),
        [&[0x16u8][..], b"SELECT ? + 1"].concat(),
        execute,
        vec![0x19, 0xff, 0xff, 0xff, 0xff],
        query("SELECT * FROM no_such_table"),
        vec![0x0e],
        [&[0x02u8][..], DATABASE.as_bytes()].concat(),
        query("SELECT seq, REPEAT('x', 1000) FROM seq_1_to_300"),
        query("SELECT @x; SELECT 2"),
        query("SELECT @x + 1"),
    ]
}

/// A pipeline written at once on a direct connection and through `tunnel`: the clients (to go
/// on with), every byte each got back, and how many commands rode along another's request.
struct Piped {
    direct: RawClient,
    through: RawClient,
    expected: Vec<u8>,
    got: Vec<u8>,
    pipelined: u64,
}

async fn pipe(tunnel: &Tunnel, commands: &[Vec<u8>]) -> Piped {
    let transport = tunnel.transport.port();
    let mut direct = RawClient::login(mysql_port(), USER, PASSWORD, DATABASE).await;
    let mut through = RawClient::login(tunnel.sidecar.port(), USER, PASSWORD, DATABASE).await;
    let counter = "sqltunnel_pipelined_commands_total";
    let before = metric(transport, Some(TOKEN), counter).await;
    let expected = direct.pipeline_bytes(commands).await;
    let got = through.pipeline_bytes(commands).await;
    let pipelined = metric(transport, Some(TOKEN), counter).await - before;
    Piped { direct, through, expected, got, pipelined }
}

#[tokio::test]
async fn pipelined_commands_are_answered_as_directly_in_one_request() {
    within(60, async {
        let tunnel = Tunnel::start_passthrough("").await;
        let Piped { mut direct, mut through, mut expected, mut got, pipelined } =
            pipe(&tunnel, &pipeline()).await;
        assert!(expected.len() > 300_000, "the big result came: {} bytes", expected.len());
        assert!(expected.windows(6).any(|w| w == b"#42S02"), "the error is in the answers");
        assert!(!expected.windows(7).any(|w| w == b"Unknown"), "the execute found its statement");
        // The prepare's OK (after the SET's 11-byte OK) names the server's statement id, a
        // counter of the whole server: the one thing that differs.
        for answers in [&mut got, &mut expected] {
            assert_eq!(answers[11..16], [12, 0, 0, 1, 0], "the prepare's OK comes second");
            answers[16..20].fill(0);
        }
        assert!(
            got == expected,
            "{} bytes through the tunnel, {} direct",
            got.len(),
            expected.len()
        );
        // Nine commands have an answer: eight rode in the first one's request.
        assert_eq!(pipelined, 8);
        // The connection goes on as usual.
        let (d, t) = (
            direct.command_all(&query("SELECT @x")).await,
            through.command_all(&query("SELECT @x")).await,
        );
        assert_eq!(t, d);
    })
    .await;
}

#[tokio::test]
async fn a_pipeline_never_crosses_in_more_than_max_packet_bytes() {
    within(60, async {
        let tunnel =
            Tunnel::start_passthrough("max_packet: 1024\nmax_inflight_bytes: 1048576\n").await;
        // Six commands of 304 bytes: three fit in 1024 bytes, so two requests of three.
        let commands: Vec<Vec<u8>> =
            (0..6).map(|i| query(&format!("SELECT {i}, '{}'", "x".repeat(287)))).collect();
        assert!(commands.iter().all(|c| c.len() == 300));
        let piped = pipe(&tunnel, &commands).await;
        assert!(
            piped.got == piped.expected,
            "{} bytes, {} direct",
            piped.got.len(),
            piped.expected.len()
        );
        assert_eq!(piped.pipelined, 4);
    })
    .await;
}
