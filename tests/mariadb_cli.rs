//! The real `mariadb` command-line client gets the same output through the tunnel as directly,
//! column type information included; `USE` (COM_INIT_DB) and `-D` work.

use e2e::cli::mariadb_async;
use e2e::{DATABASE, PASSWORD, Tunnel, USER, mysql_port, within};

const QUERIES: &str = "
CREATE TABLE cli_t (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(20) CHARACTER SET utf8mb4, price DECIMAL(8,2), b BLOB, d DATETIME(3));
INSERT INTO cli_t (name, price, b, d) VALUES ('', 1.50, x'00ff', '2024-01-02 03:04:05.678'), ('Zoë 😀', NULL, NULL, NULL);
SELECT * FROM cli_t ORDER BY id;
SELECT '' AS first_empty, 1;
UPDATE cli_t SET price = price + 1;
SELECT ROW_COUNT(), LAST_INSERT_ID();
SHOW WARNINGS;
DROP TABLE cli_t;
";

async fn run(port: u16, args: &[&str]) -> e2e::cli::CliRun {
    mariadb_async(port, USER, PASSWORD, args).await
}

#[tokio::test]
async fn cli_output_with_column_info_matches_direct() {
    within(120, async {
        let tunnel = Tunnel::start().await;
        let args = [
            "-D",
            DATABASE,
            "--default-character-set=utf8mb4",
            "--column-type-info",
            "-vvv",
            "--batch",
            "-e",
            QUERIES,
        ];
        let clean = ["-D", DATABASE, "-e", "DROP TABLE IF EXISTS cli_t"];
        run(mysql_port(), &clean).await;
        let direct = run(mysql_port(), &args).await;
        run(mysql_port(), &clean).await;
        let through = run(tunnel.sidecar.port(), &args).await;
        assert!(direct.success, "direct run failed: {}", direct.stderr);
        assert!(through.success, "tunnel run failed: {}", through.stderr);
        // Timings ("(0.001 sec)") differ; everything else must not.
        let strip = |s: &str| {
            s.lines().map(|l| l.split(" (0.").next().unwrap_or("").to_owned()).collect::<Vec<_>>()
        };
        assert_eq!(strip(&direct.stdout), strip(&through.stdout));
        assert!(through.stdout.contains("Zoë 😀"));
        assert!(through.stdout.contains("Org_table:  `cli_t`"), "{}", through.stdout);
    })
    .await;
}

#[tokio::test]
async fn use_and_default_database_work() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let port = tunnel.sidecar.port();
        let used = run(
            port,
            &["--batch", "-e", "USE tunnel_test; SELECT DATABASE(); USE mysql; SELECT DATABASE()"],
        )
        .await;
        assert!(used.success, "{}", used.stderr);
        assert_eq!(used.stdout, "DATABASE()\ntunnel_test\nDATABASE()\nmysql\n");
        let bad = run(port, &["--batch", "-e", "USE no_such_db"]).await;
        let bad_direct = run(mysql_port(), &["--batch", "-e", "USE no_such_db"]).await;
        assert!(!bad.success);
        assert_eq!(bad.stderr, bad_direct.stderr, "same error text as direct");
        let with_d = run(port, &["-D", "mysql", "--batch", "-e", "SELECT DATABASE()"]).await;
        assert_eq!(with_d.stdout, "DATABASE()\nmysql\n");
    })
    .await;
}

#[tokio::test]
async fn cli_errors_match_direct() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        for sql in [
            "SELEC 1",
            "SELECT * FROM tunnel_test.nope",
            "SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 3100",
        ] {
            let d = run(mysql_port(), &["--batch", "-e", sql]).await;
            let t = run(tunnel.sidecar.port(), &["--batch", "-e", sql]).await;
            assert!(!t.success);
            assert_eq!(d.stderr, t.stderr, "for {sql}");
        }
    })
    .await;
}

#[tokio::test]
async fn field_list_matches_direct() {
    within(60, async {
        use e2e::raw::RawClient;
        let tunnel = Tunnel::start().await;
        let mut direct = RawClient::login(mysql_port(), USER, PASSWORD, DATABASE).await;
        let mut through = RawClient::login(tunnel.sidecar.port(), USER, PASSWORD, DATABASE).await;
        direct.command_until_eof(b"\x03DROP TABLE IF EXISTS fl_t").await;
        direct.command_until_eof(b"\x03CREATE TABLE fl_t (id INT PRIMARY KEY, name VARCHAR(9) DEFAULT NULL, n DECIMAL(5,2))").await;
        for cmd in [&b"\x04fl_t\0"[..], b"\x04no_such_table\0"] {
            let d = direct.command_until_eof(cmd).await;
            let t = through.command_until_eof(cmd).await;
            // Definitions, default values included, then the EOF: the server's own packets.
            assert_eq!(t, d);
        }
        let t = through.command_until_eof(b"\x04fl_t\0").await;
        assert_eq!(t.len(), 4, "three column definitions and EOF");
        direct.command_until_eof(b"\x03DROP TABLE fl_t").await;
    })
    .await;
}

/// Runs `mariadb-admin` with `commands`; returns (success, stdout, stderr).
async fn mariadb_admin(port: u16, commands: &[&str]) -> (bool, String, String) {
    let mut command = std::process::Command::new("mariadb-admin");
    command
        .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "-uapp", "-papp-pw"])
        .arg(format!("-P{port}"))
        .args(commands);
    let out = tokio::task::spawn_blocking(move || command.output().expect("mariadb-admin"))
        .await
        .expect("mariadb-admin task");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test]
async fn mariadb_admin_status_answers_from_the_upstream() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        let direct = mariadb_admin(mysql_port(), &["status"]).await.1;
        let through = mariadb_admin(tunnel.sidecar.port(), &["status"]).await.1;
        let field = |s: &str, name: &str| -> Option<u64> {
            s.split("  ")
                .find_map(|part| part.strip_prefix(&format!("{name}: ")))
                .and_then(|v| v.trim().parse().ok())
        };
        for name in ["Uptime", "Threads", "Questions", "Slow queries", "Opens", "Open tables"] {
            assert!(field(&through, name).is_some(), "{name} missing from {through:?}");
        }
        let (du, tu) =
            (field(&direct, "Uptime").unwrap_or(0), field(&through, "Uptime").unwrap_or(0));
        assert!(du.abs_diff(tu) <= 2, "the same server's uptime: {direct} / {through}");
        assert!(through.contains("Queries per second avg: "), "{through}");
    })
    .await;
}

#[tokio::test]
async fn mariadb_admin_flush_refresh_and_processlist_work_as_directly() {
    within(60, async {
        let tunnel = Tunnel::start().await;
        // `refresh` is COM_REFRESH; the flush-* commands are FLUSH statements.
        for commands in [
            &["refresh"][..],
            &["flush-tables", "flush-status", "flush-hosts", "flush-privileges"],
            &["flush-logs"],
            &["ping"],
        ] {
            let direct = mariadb_admin(mysql_port(), commands).await;
            let through = mariadb_admin(tunnel.sidecar.port(), commands).await;
            assert!(through.0, "{commands:?}: {}", through.2);
            assert_eq!((through.0, &through.1, &through.2), (direct.0, &direct.1, &direct.2));
        }
        let list = mariadb_admin(tunnel.sidecar.port(), &["processlist"]).await;
        assert!(list.0 && list.1.contains("| Id ") && list.1.contains("processlist"), "{list:?}");
    })
    .await;
}

#[tokio::test]
async fn com_process_info_and_com_process_kill_act_as_on_a_server() {
    within(60, async {
        use e2e::raw::RawClient;
        let tunnel = Tunnel::start().await;
        // COM_PROCESS_INFO answers SHOW PROCESSLIST's result set: same column definitions.
        let columns = |packets: Vec<Vec<u8>>| -> Vec<Vec<u8>> {
            packets.into_iter().skip(1).take_while(|p| p.first() != Some(&0xfe)).collect()
        };
        let mut d = RawClient::login(mysql_port(), USER, PASSWORD, DATABASE).await;
        let mut t = RawClient::login(tunnel.sidecar.port(), USER, PASSWORD, DATABASE).await;
        let direct = columns(d.command_all(b"\x0a").await);
        let through = columns(t.command_all(b"\x0a").await);
        assert_eq!(direct.len(), 9, "{direct:?}");
        assert_eq!(through, direct);
        // COM_PROCESS_KILL with the greeting id of another tunnel connection ends that one.
        let mut victim = RawClient::login(tunnel.sidecar.port(), USER, PASSWORD, DATABASE).await;
        let id = victim.greeting_connection_id();
        let mut kill = vec![0x0c];
        kill.extend_from_slice(&id.to_le_bytes());
        let answer = t.command_until_eof(&kill).await;
        assert_eq!(answer[0][0], 0x00, "OK: {answer:?}");
        // The server ends the killed connection; its client sees it closed, as directly.
        drop(victim.try_write_command(b"\x03SELECT 1").await);
        assert_eq!(victim.read_until_quiet().await, Vec::<u8>::new(), "the victim is gone");
        let unknown = t.command_until_eof(&[0x0c, 0xff, 0xff, 0xff, 0x7f]).await;
        let direct_unknown = d.command_until_eof(&[0x0c, 0xff, 0xff, 0xff, 0x7f]).await;
        assert_eq!(unknown, direct_unknown, "unknown id: the server's 1094");
    })
    .await;
}
