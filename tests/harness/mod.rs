//! Test harness: the real MariaDB (`scripts/test.sh`'s, or the test binary's own,
//! `mariadb.rs`), a tunnel (transport + sidecar) run in-process on ephemeral ports, and helpers
//! that compare answers field by field.

pub mod answer;
pub mod certs;
pub mod cli;
pub mod clients;
pub mod door;
pub mod fault_check;
pub mod fault_kinds;
pub mod fault_python;
pub mod fault_run;
pub mod fault_takeovers;
pub mod fault_workload;
pub mod faults;
pub mod http;
pub mod idp;
pub mod java;
pub mod mariadb;
pub mod nginx;
pub mod processes;
pub mod raw;
pub mod scripts;
pub mod shaper;
pub mod wine;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use common::config::parse_yaml;
use mysql_async::{Conn, OptsBuilder};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use answer::{Answer, answer_of, assert_same_answers, compare_script, exec_answer};

/// Any free port on loopback.
const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Token shared by the in-process transport and sidecar.
pub const TOKEN: &str = "tEst-T0ken-9fK2mQ7xV4bN8pL3wR6z";
/// Local login configured in the sidecar (also a real MariaDB user with the same password).
pub const USER: &str = "app";
/// Its password.
pub const PASSWORD: &str = "app-pw";
/// Database created by the test script.
pub const DATABASE: &str = "tunnel_test";

/// Port of the real MariaDB (`SQLTUNNEL_TEST_MYSQL_PORT`, set by `scripts/test.sh`; without it
/// the test binary starts its own).
pub fn mysql_port() -> u16 {
    mariadb::server().port
}

/// The CA of the real MariaDB's certificate (`SQLTUNNEL_TEST_MYSQL_CA` with
/// `SQLTUNNEL_TEST_MYSQL_PORT`).
pub fn mysql_ca() -> String {
    mariadb::server().ca.to_string_lossy().into_owned()
}

/// Runs a test body with a deadline, so no test can hang.
pub async fn within<F: Future>(secs: u64, fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), fut).await.expect("test timed out")
}

/// Connection options for `user` / `password` at `port`.
pub fn opts_as(port: u16, user: &str, password: &str, db: Option<&str>) -> OptsBuilder {
    opts(port, db).user(Some(user)).pass(Some(password))
}

/// Creates (or recreates) a real MariaDB user with `password`, allowed everything on the test
/// database, and returns its name.
pub async fn create_user(name: &str, password: &str) -> String {
    let mut admin = direct().await;
    for sql in [
        format!("DROP USER IF EXISTS '{name}'@'%'"),
        format!("CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL ON {DATABASE}.* TO '{name}'@'%'"),
    ] {
        mysql_async::prelude::Queryable::query_drop(&mut admin, sql).await.expect("user admin");
    }
    admin.disconnect().await.expect("disconnect");
    name.to_owned()
}

/// Connection options for a MySQL server at `port`.
pub fn opts(port: u16, db: Option<&str>) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(USER))
        .pass(Some(PASSWORD))
        .db_name(db)
        .prefer_socket(false)
        .stmt_cache_size(0)
}

/// A direct connection to MariaDB.
pub async fn direct() -> Conn {
    Conn::new(opts(mysql_port(), Some(DATABASE))).await.expect("direct connection")
}

/// Waits until the server's thread `id` runs a statement containing `needle` (at most 10 s).
pub async fn wait_running(id: u64, needle: &str) {
    use mysql_async::prelude::Queryable;
    let mut d = direct().await;
    let start = std::time::Instant::now();
    loop {
        let n: Option<u64> = d
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE ?",
                (id, format!("%{needle}%")),
            )
            .await
            .expect("processlist");
        if n.unwrap_or(0) > 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "thread {id} never ran {needle:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(d.disconnect().await);
}

/// A transport and a sidecar running in-process.
pub struct Tunnel {
    /// The sidecar's MySQL port.
    pub sidecar: SocketAddr,
    /// The transport's HTTP address.
    pub transport: SocketAddr,
    shutdown: CancellationToken,
}

impl Tunnel {
    /// Starts both halves against the test MariaDB.
    pub async fn start() -> Tunnel {
        let transport_listener = common::runtime::bind(LOOPBACK).expect("bind transport");
        let transport = transport_listener.local_addr().expect("addr");
        let transport_cfg = transport_yaml(mysql_port());
        Self::start_with(
            transport_listener,
            &transport_cfg,
            &sidecar_yaml(&format!("http://{transport}/"), TOKEN),
        )
        .await
    }

    /// [`Self::start`] with the sidecar on `carrier`.
    pub async fn start_on(carrier: Carrier) -> Tunnel {
        Self::start_custom(&transport_yaml(mysql_port()), |url| {
            carrier.sidecar(&sidecar_yaml(url, TOKEN))
        })
        .await
    }

    /// Starts both halves with a sidecar in passthrough mode (no `users`, client TLS offered with
    /// a generated certificate) plus `extra` sidecar YAML.
    pub async fn start_passthrough(extra: &str) -> Tunnel {
        Self::start_passthrough_on(&transport_yaml(mysql_port()), extra).await
    }

    /// [`Self::start_passthrough`] with a transport of `transport_yaml`.
    pub async fn start_passthrough_on(transport_yaml: &str, extra: &str) -> Tunnel {
        Self::start_custom(transport_yaml, |url| {
            format!(
                "listen: 127.0.0.1:0\ntransport:\n  url: {url}\n  token: {TOKEN}\nclient_tls:\n  enabled: true\n{extra}"
            )
        })
        .await
    }

    /// Starts a transport from `transport_yaml` on a free port and a sidecar from the YAML that
    /// `sidecar_yaml` makes of the transport's URL.
    pub async fn start_custom(
        transport_yaml: &str,
        sidecar_yaml: impl FnOnce(&str) -> String,
    ) -> Tunnel {
        let listener = common::runtime::bind(LOOPBACK).expect("bind transport");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        Self::start_with(listener, transport_yaml, &sidecar_yaml(&url)).await
    }

    /// Starts a transport from `transport_yaml` on `listener` and a sidecar from `sidecar_yaml`.
    pub async fn start_with(
        listener: TcpListener,
        transport_yaml: &str,
        sidecar_yaml: &str,
    ) -> Tunnel {
        let shutdown = CancellationToken::new();
        let transport = listener.local_addr().expect("addr");
        let config: transport::TransportConfig =
            parse_yaml(transport_yaml).expect("transport yaml");
        config.validate().expect("valid transport config");
        tokio::spawn(transport::run(listener, config, shutdown.clone()));
        let sidecar = Self::start_sidecar(sidecar_yaml, shutdown.clone()).await;
        Tunnel { sidecar, transport, shutdown }
    }

    /// Starts only a sidecar (e.g. pointing at nothing); returns its address.
    pub async fn start_sidecar(sidecar_yaml: &str, shutdown: CancellationToken) -> SocketAddr {
        let listener = common::runtime::bind(LOOPBACK).expect("bind sidecar");
        let addr = listener.local_addr().expect("addr");
        let config: sidecar::SidecarConfig = parse_yaml(sidecar_yaml).expect("sidecar yaml");
        config.validate().expect("valid sidecar config");
        tokio::spawn(sidecar::run(listener, config, shutdown));
        addr
    }

    /// A connection through the tunnel.
    pub async fn connect(&self) -> Conn {
        Conn::new(opts(self.sidecar.port(), Some(DATABASE))).await.expect("tunnel connection")
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A transport config reaching the MariaDB at `mysql_port`.
pub fn transport_yaml(mysql_port: u16) -> String {
    format!(
        "listen: 127.0.0.1:0\ntokens: [{TOKEN}]\nupstreams:\n  - name: main\n    address: 127.0.0.1:{mysql_port}\nsession_timeout: 30s\n"
    )
}

/// A sidecar config for the transport at `url` with `token`.
pub fn sidecar_yaml(url: &str, token: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ntransport:\n  url: {url}\n  token: {token}\n  connect_timeout: 2s\nusers:\n  - name: {USER}\n    password: {PASSWORD}\n    upstream: main\n"
    )
}

/// How the sidecar carries a session's steps to the transport (`transport.stream`): what a
/// test of a carrier-independent promise runs on, once each ([`on_both_carriers!`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// WebSocket streams (`stream: on`): what the default, `auto`, takes wherever the path
    /// passes the upgrade; `on`, so that a test never falls back to requests unseen.
    Stream,
    /// One HTTP request per step (`stream: off`).
    Requests,
}

impl Carrier {
    /// Both, the default first.
    pub const BOTH: [Carrier; 2] = [Carrier::Stream, Carrier::Requests];

    /// The sidecar's `transport.stream` line (indented for the `transport` section).
    pub fn setting(self) -> &'static str {
        match self {
            Carrier::Stream => "  stream: on\n",
            Carrier::Requests => "  stream: off\n",
        }
    }

    /// A sidecar config made by [`sidecar_yaml`] (or an edit of one) set to this carrier.
    pub fn sidecar(self, yaml: &str) -> String {
        const AT: &str = "  connect_timeout: 2s\n";
        assert!(yaml.contains(AT), "not a sidecar config of the harness: {yaml}");
        yaml.replacen(AT, &format!("{AT}{}", self.setting()), 1)
    }

    /// A short name for tags, table names and messages: `stream`, `requests`.
    pub fn name(self) -> &'static str {
        match self {
            Carrier::Stream => "stream",
            Carrier::Requests => "requests",
        }
    }
}

/// Two tests of one body, `async fn body(carrier: Carrier)`: `body::over_a_stream` and
/// `body::over_requests`. A test attribute other than `#[tokio::test]` may come first.
#[macro_export]
macro_rules! on_both_carriers {
    ($body:ident) => {
        $crate::on_both_carriers!(
            #[tokio::test]
            $body
        );
    };
    (#[$test:meta] $body:ident) => {
        mod $body {
            #[$test]
            async fn over_a_stream() {
                super::$body($crate::Carrier::Stream).await;
            }

            #[$test]
            async fn over_requests() {
                super::$body($crate::Carrier::Requests).await;
            }
        }
    };
}
