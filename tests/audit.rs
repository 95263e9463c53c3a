//! The audit log, line by line: a session with text statements (DDL, DML, a SELECT, an error)
//! and a prepared statement writes one JSON line per command with who, what, how long, how
//! many rows and which error, pipelined commands too; with `statements: digest` the text is
//! replaced by its digest. A COM_CHANGE_USER's line names the user it asks for, and later
//! lines name it once the server said OK (not after a refusal).

use std::time::Duration;

use e2e::raw::RawClient;
use e2e::{DATABASE, PASSWORD, TOKEN, Tunnel, USER, mysql_port, opts, sidecar_yaml, within};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use serde_json::Value;

/// A tunnel whose transport writes its audit log to a fresh file, with `statements` as given.
async fn audited_tunnel(tag: &str, statements: &str) -> (Tunnel, std::path::PathBuf) {
    let path =
        std::env::temp_dir().join(format!("sqltunnel-audit-{}-{tag}.jsonl", std::process::id()));
    drop(std::fs::remove_file(&path));
    let transport = format!(
        "{}audit:\n  path: {}\n  statements: {statements}\n",
        e2e::transport_yaml(mysql_port()),
        path.display()
    );
    let tunnel = Tunnel::start_custom(&transport, |url| sidecar_yaml(url, TOKEN)).await;
    (tunnel, path)
}

/// The audit lines once at least one names `last` (the writer runs on its own thread).
async fn lines_until(path: &std::path::Path, last: &str) -> Vec<Value> {
    for _ in 0..100 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(last) {
            return text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no audit line names {last:?}");
}

fn find<'a>(lines: &'a [Value], command: &str, statement: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["command"] == command && l["statement"] == statement)
        .unwrap_or_else(|| panic!("no {command} line for {statement:?} in {lines:#?}"))
}

#[tokio::test]
async fn every_command_of_a_session_is_one_audit_line() {
    within(60, async {
        let (tunnel, path) = audited_tunnel("text", "text").await;
        let mut conn = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await.expect("login");
        conn.query_drop("CREATE TABLE IF NOT EXISTS audit_probe (id INT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        conn.query_drop("DELETE FROM audit_probe").await.expect("delete");
        conn.query_drop("INSERT INTO audit_probe VALUES (1, 10), (2, 20)").await.expect("insert");
        let rows: Vec<(i32, i32)> =
            conn.query("SELECT id, v FROM audit_probe ORDER BY id").await.expect("select");
        assert_eq!(rows.len(), 2);
        assert!(conn.query_drop("SELECT * FROM no_such_table").await.is_err());
        let v: Option<i32> = conn
            .exec_first("SELECT v FROM audit_probe WHERE id = ?", (2,))
            .await
            .expect("prepared");
        assert_eq!(v, Some(20));
        conn.query_drop("SELECT 'the end'").await.expect("last");
        drop(conn);

        let lines = lines_until(&path, "SELECT 'the end'").await;
        for line in &lines {
            let time = line["time"].as_str().unwrap_or_default();
            assert!(time.len() == 24 && time.ends_with('Z') && time.starts_with("20"), "{line}");
            assert_eq!(line["session"].as_str().map(str::len), Some(8), "{line}");
            assert_eq!(line["identity"], "token#1", "{line}");
            assert_eq!(line["user"], USER, "{line}");
            assert_eq!(line["upstream"], "main", "{line}");
            assert_eq!(line["database"], DATABASE, "{line}");
            assert!(line["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{line}");
        }
        let insert = find(&lines, "Query", "INSERT INTO audit_probe VALUES (1, 10), (2, 20)");
        assert_eq!(insert["affected_rows"], 2);
        assert_eq!(insert["outcome"], "Done");
        assert!(insert.get("error").is_none());
        let select = find(&lines, "Query", "SELECT id, v FROM audit_probe ORDER BY id");
        assert_eq!(select["rows"], 2);
        let failed = find(&lines, "Query", "SELECT * FROM no_such_table");
        assert_eq!(failed["error"], 1146);
        let prepared = "SELECT v FROM audit_probe WHERE id = ?";
        let prepare = find(&lines, "Prepare", prepared);
        let id = prepare["statement_id"].as_u64().expect("the prepare's statement id");
        let execute = find(&lines, "Execute", prepared);
        assert_eq!(execute["statement_id"].as_u64(), Some(id));
        assert_eq!(execute["rows"], 1);
        // One line per command, in order: the INSERT before the SELECT before the error.
        let at = |l: &Value| lines.iter().position(|x| x == l).unwrap_or(usize::MAX);
        assert!(at(insert) < at(select) && at(select) < at(failed) && at(failed) < at(execute));
        drop(std::fs::remove_file(&path));
    })
    .await;
}

#[tokio::test]
async fn pipelined_commands_are_one_audit_line_each() {
    within(60, async {
        let (tunnel, path) = audited_tunnel("pipelined", "text").await;
        let mut client = RawClient::login(tunnel.sidecar.port(), USER, PASSWORD, DATABASE).await;
        let pipeline = [
            "CREATE TEMPORARY TABLE piped (id INT)",
            "INSERT INTO piped VALUES (1), (2), (3)",
            "SELECT * FROM piped",
            "SELECT * FROM no_such_table",
            "SELECT 'piped end'",
        ];
        let commands: Vec<Vec<u8>> =
            pipeline.iter().map(|q| [&[3u8][..], q.as_bytes()].concat()).collect();
        let answers = client.pipeline_bytes(&commands).await;
        assert!(answers.ends_with(&[5, 0, 0, 5, 254, 0, 0, 2, 0]), "every answer came");
        let lines = lines_until(&path, "SELECT 'piped end'").await;
        let line = |statement: &str| find(&lines, "Query", statement).clone();
        assert_eq!(line(pipeline[1])["affected_rows"], 3);
        assert_eq!(line(pipeline[2])["rows"], 3);
        assert_eq!(line(pipeline[3])["error"], 1146);
        assert_eq!(line(pipeline[4])["rows"], 1);
        let order: Vec<&str> = lines.iter().filter_map(|l| l["statement"].as_str()).collect();
        assert_eq!(order, pipeline, "one line per command, in order");
        drop(std::fs::remove_file(&path));
    })
    .await;
}

#[tokio::test]
async fn digest_mode_keeps_no_statement_text() {
    within(60, async {
        let (tunnel, path) = audited_tunnel("digest", "digest").await;
        let mut conn = Conn::new(opts(tunnel.sidecar.port(), Some(DATABASE))).await.expect("login");
        for _ in 0..2 {
            conn.query_drop("SELECT 'secret value'").await.expect("query");
        }
        conn.query_drop("SELECT 'the end'").await.expect("query");
        drop(conn);
        // sha1("SELECT 'the end'")
        let end = "db58d39ce6f06d861c09d81fbad32cd72576a733";
        let lines = lines_until(&path, end).await;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains("secret value"), "{text}");
        let digests: Vec<&str> = lines.iter().filter_map(|l| l["statement"].as_str()).collect();
        assert!(digests.iter().all(|d| d.len() == 40 && d.bytes().all(|b| b.is_ascii_hexdigit())));
        let secret = digests.iter().filter(|d| **d == digests[digests.len() - 2]).count();
        assert_eq!(secret, 2, "the same statement gets the same digest: {digests:?}");
        drop(std::fs::remove_file(&path));
    })
    .await;
}

#[tokio::test]
async fn sighup_reopens_the_audit_file_after_a_rotation() {
    within(60, async {
        let dir = std::env::temp_dir().join(format!("sqltunnel-rotate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("audit.jsonl");
        let port = e2e::processes::free_port();
        let yaml = format!(
            "{}audit:\n  path: {}\n  statements: text\n",
            e2e::transport_yaml(mysql_port()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}")),
            path.display()
        );
        let transport = e2e::processes::Proc::start("transport", &yaml, "rotate");
        e2e::processes::wait_port(port).await;
        let sidecar_yaml = sidecar_yaml(&format!("http://127.0.0.1:{port}/"), TOKEN);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let sidecar = Tunnel::start_sidecar(&sidecar_yaml, shutdown.clone()).await;
        let mut conn = Conn::new(opts(sidecar.port(), Some(DATABASE))).await.expect("login");
        conn.query_drop("SELECT 'before rotation'").await.expect("query");
        lines_until(&path, "before rotation").await;
        // logrotate's default: the file is renamed, then the service told (postrotate).
        let rotated = dir.join("audit.jsonl.1");
        std::fs::rename(&path, &rotated).expect("rotate");
        let reloaded = transport.log_count("configuration reloaded");
        transport.signal("HUP");
        transport.log_grows("configuration reloaded", reloaded).await;
        conn.query_drop("SELECT 'after rotation'").await.expect("query");
        let fresh = lines_until(&path, "after rotation").await;
        assert!(fresh.iter().all(|l| l["statement"] != "SELECT 'before rotation'"), "{fresh:#?}");
        let old = std::fs::read_to_string(&rotated).expect("the rotated file");
        assert!(old.contains("before rotation") && !old.contains("after rotation"), "{old}");
        drop(conn);
        shutdown.cancel();
        drop(std::fs::remove_dir_all(&dir));
    })
    .await;
}

#[tokio::test]
async fn lines_after_a_change_user_name_the_new_user() {
    within(60, async {
        let path = std::env::temp_dir()
            .join(format!("sqltunnel-audit-{}-change-user.jsonl", std::process::id()));
        drop(std::fs::remove_file(&path));
        let transport = format!(
            "{}audit:\n  path: {}\n  statements: text\n",
            e2e::transport_yaml(mysql_port()),
            path.display()
        );
        let tunnel = Tunnel::start_passthrough_on(&transport, "").await;
        let (first, second) = (
            e2e::create_user("audit_first", "First-pw-1").await,
            e2e::create_user("audit_second", "Second-pw-2").await,
        );
        let login = e2e::opts_as(tunnel.sidecar.port(), &first, "First-pw-1", Some(DATABASE));
        let mut conn = Conn::new(login).await.expect("login");
        conn.query_drop("SELECT 'before the change'").await.expect("select");
        let wrong = mysql_async::ChangeUserOpts::default()
            .with_user(Some(second.clone()))
            .with_pass(Some("wrong".into()));
        assert!(conn.change_user(wrong).await.is_err(), "a wrong password is refused");
        conn.query_drop("SELECT 'after a failed change'").await.expect("select");
        let to = mysql_async::ChangeUserOpts::default()
            .with_user(Some(second.clone()))
            .with_pass(Some("Second-pw-2".into()))
            .with_db_name(Some(DATABASE.into()));
        conn.change_user(to).await.expect("change user");
        conn.query_drop("SELECT 'after the change'").await.expect("select");
        drop(conn.disconnect().await);
        let lines = lines_until(&path, "after the change").await;
        let before = find(&lines, "Query", "SELECT 'before the change'");
        let after = find(&lines, "Query", "SELECT 'after the change'");
        let failed = find(&lines, "Query", "SELECT 'after a failed change'");
        assert_eq!(failed["user"], first.as_str(), "a failed change keeps the user");
        let changed = lines.iter().find(|l| l["command"] == "Change user").expect("its line");
        println!(
            "user before: {}, on the change: {} changed to {}, after: {}",
            before["user"], changed["user"], changed["changed_to"], after["user"]
        );
        assert_eq!(before["user"], first.as_str());
        assert_eq!(changed["changed_to"], second.as_str(), "the change's line names the new user");
        assert_eq!(after["user"], second.as_str(), "later lines name the new user");
        drop(std::fs::remove_file(&path));
    })
    .await;
}
