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
