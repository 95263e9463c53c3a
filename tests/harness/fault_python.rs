//! The fault run's second client library: PyMySQL running `tests/clients/fault_workload.py`,
//! its own seeded operations through the same tunnel, each printed as a JSON line of what it
//! was told, read here into the same [`Outcome`] as a mysql_async client's.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::fault_workload::{Blob, Outcome};

/// What the PyMySQL client runs with.
pub struct PythonClient<'a> {
    /// Its client number (its ids start at this times 10^9).
    pub client: usize,
    /// Its seed.
    pub seed: u64,
    /// The sidecar's port.
    pub port: u16,
    /// The common prefix of the run's tables.
    pub table: &'a str,
    /// The file its LOAD DATA LOCAL reads.
    pub file: &'a Path,
    /// Operations to run.
    pub operations: usize,
    /// Blob inserts and reads are part of the mix.
    pub blobs: bool,
}

impl PythonClient<'_> {
    /// Runs the client to its end; what it was told.
    pub async fn run(self) -> Outcome {
        let python = crate::mariadb::client_path("SQLTUNNEL_TEST_PYTHON", "venv/bin/python");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients").join("fault_workload.py");
        let args = [
            self.port.to_string(),
            crate::USER.into(),
            crate::PASSWORD.into(),
            crate::DATABASE.into(),
            self.table.into(),
            self.client.to_string(),
            self.seed.to_string(),
            self.operations.to_string(),
            self.file.display().to_string(),
            if self.blobs { "1" } else { "0" }.into(),
        ];
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the PyMySQL client");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut outcome = Outcome { client: self.client, ..Outcome::default() };
        while let Some(line) = lines.next_line().await.expect("read the PyMySQL client") {
            let told: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("{line}"));
            settle(&mut outcome, &told);
        }
        let status = child.wait().await.expect("wait for the PyMySQL client");
        assert!(status.success(), "the PyMySQL client ended with {status}");
        outcome
    }
}

/// Adds what one operation was told to `outcome`.
fn settle(outcome: &mut Outcome, told: &Value) {
    let client = outcome.client;
    let (op, kind) = (&told["op"], told["kind"].as_str().unwrap_or("?"));
    if let Some(error) = told["error"].as_str() {
        outcome.errors.push(format!("PyMySQL client {client} op {op} {kind}: {error}"));
        if kind == "connect" {
            return;
        }
    }
    outcome.operations += 1;
    *outcome.kinds.entry(format!("PyMySQL {kind}")).or_default() += 1;
    let ok = told["ok"].as_bool() == Some(true);
    if let Some(what) = told["garbled"].as_str() {
        outcome.garbled.push(format!("PyMySQL client {client}: {what}"));
    }
    for id in told["ids"].as_array().into_iter().flatten().filter_map(Value::as_u64) {
        if ok { outcome.inserted.push(id) } else { outcome.doubtful_ids.push(id) }
    }
    let counts = told["counts"].as_u64().unwrap_or(0);
    if ok {
        outcome.counted += counts
    } else {
        outcome.doubtful_counts += counts
    }
    for blob in told["blobs"].as_array().into_iter().flatten() {
        let blob = Blob {
            id: blob[0].as_u64().expect("blob id"),
            len: blob[1].as_u64().expect("blob length"),
            sha1: blob[2].as_str().expect("blob SHA-1").to_owned(),
        };
        if ok { outcome.blobs.push(blob) } else { outcome.doubtful_blobs.push(blob) }
    }
}
