//! Upstream connections: opening a `mysql_async::Conn` for a session, and reading a server's
//! version string from its greeting.

use std::time::{Duration, Instant};

use common::wire::OpenSession;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use common::mysql::capability;

use crate::Error;
use crate::config::UpstreamConfig;
use crate::infile::InfileBridge;
use crate::pool::Upstream;

/// CLIENT_FOUND_ROWS capability bit.
const CLIENT_FOUND_ROWS: u32 = 0x0000_0002;
/// utf8mb4_general_ci, the collation `mysql_async` logs in with.
const LOGIN_COLLATION: u8 = 45;
/// Largest greeting packet we are willing to read when probing.
const MAX_GREETING: usize = 1024;

/// Opens the upstream connection of a new session, as the client asked for it. A LOAD DATA
/// LOCAL transfer whose next piece takes longer than `infile_timeout` is abandoned.
pub async fn connect(
    upstream: &UpstreamConfig,
    req: &OpenSession,
    timeout: Duration,
    infile_timeout: Duration,
) -> Result<Upstream, Error> {
    let (host, port) = split_address(&upstream.address)
        .ok_or_else(|| Error::UnknownUpstream(upstream.name.clone()))?;
    let opts = OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(req.user.clone()))
        .pass(Some(req.password.clone()))
        .db_name(req.database.clone())
        .tcp_nodelay(true)
        .stmt_cache_size(0)
        .prefer_socket(false)
        .client_found_rows(req.client_flags & CLIENT_FOUND_ROWS != 0)
        .ssl_opts(upstream.tls.as_ref().map(|tls| {
            let roots = tls.ca_file.iter().map(|p| p.clone().into()).collect();
            SslOpts::default()
                .with_root_certs(roots)
                .with_danger_skip_domain_validation(tls.skip_domain_validation)
        }));
    // The bridge keeps options without its own handler (no reference cycle) to cancel a stalled
    // transfer from a second connection.
    let infile = InfileBridge::new(infile_timeout, Opts::from(opts.clone()));
    let opts = opts.local_infile_handler(Some(infile.handler()));
    let mut conn = match tokio::time::timeout(timeout, Conn::new(opts)).await {
        Ok(result) => result.map_err(|e| Error::from_mysql(&upstream.name, e))?,
        Err(_) => {
            return Err(Error::UpstreamUnreachable {
                name: upstream.name.clone(),
                reason: format!("no answer within {}s", timeout.as_secs()),
            });
        }
    };
    apply_session_flags(&mut conn, req.client_flags)
        .await
        .map_err(|e| Error::from_mysql(&upstream.name, e))?;
    apply_collation(&mut conn, req.collation)
        .await
        .map_err(|e| Error::from_mysql(&upstream.name, e))?;
    infile.set_connection_id(conn.id());
    Ok(Upstream { conn, born: Instant::now(), infile })
}

/// Applies what the client's capability flags change in a server session: CLIENT_IGNORE_SPACE
/// adds IGNORE_SPACE to `sql_mode`, CLIENT_INTERACTIVE makes `wait_timeout` the interactive one.
/// (`mysql_async` logs in without them; CLIENT_FOUND_ROWS is set at login.)
pub async fn apply_session_flags(conn: &mut Conn, client_flags: u32) -> mysql_async::Result<()> {
    let mut sets = Vec::new();
    if client_flags & capability::IGNORE_SPACE != 0 {
        sets.push("sql_mode = CONCAT(@@sql_mode, ',IGNORE_SPACE')");
    }
    if client_flags & capability::INTERACTIVE != 0 {
        sets.push("wait_timeout = @@interactive_timeout");
    }
    if sets.is_empty() {
        return Ok(());
    }
    conn.query_drop(format!("SET SESSION {}", sets.join(", "))).await
}

/// Applies the collation from the client's handshake, as a server does at login (nothing to
/// do for the one `mysql_async` logs in with).
pub async fn apply_collation(conn: &mut Conn, id: u8) -> mysql_async::Result<()> {
    if id == LOGIN_COLLATION || id == 0 {
        return Ok(());
    }
    let row: Option<(String, String)> = conn
        .query_first(format!(
            "SELECT CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS WHERE ID = {id}"
        ))
        .await?;
    if let Some((charset, collation)) = row {
        conn.query_drop(format!("SET NAMES {charset} COLLATE {collation}")).await?;
    }
    Ok(())
}

/// Splits `host:port` (or `[v6]:port`).
fn split_address(address: &str) -> Option<(String, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_owned(), port.parse().ok()?))
}

/// Reads the server version string from an upstream's initial handshake packet, then hangs up.
pub async fn probe_version(upstream: &UpstreamConfig, timeout: Duration) -> Result<String, Error> {
    let unreachable =
        |reason: String| Error::UpstreamUnreachable { name: upstream.name.clone(), reason };
    let read = async {
        let mut stream = TcpStream::connect(&upstream.address).await?;
        let mut header = [0u8; 4];
        stream.read_exact(&mut header).await?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let mut payload = vec![0u8; len.min(MAX_GREETING)];
        stream.read_exact(&mut payload).await?;
        Ok::<_, std::io::Error>(payload)
    };
    let payload = match tokio::time::timeout(timeout, read).await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Err(_) => return Err(unreachable("no greeting in time".into())),
    };
    parse_greeting_version(&payload).ok_or_else(|| unreachable("not a MySQL greeting".into()))
}

/// Extracts the version from a HandshakeV10 payload (`0x0a`, then a NUL-terminated string).
fn parse_greeting_version(payload: &[u8]) -> Option<String> {
    let (&protocol, rest) = payload.split_first()?;
    if protocol != 10 {
        return None;
    }
    let end = rest.iter().position(|&b| b == 0)?;
    String::from_utf8(rest[..end].to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_greeting_version() {
        let mut p = vec![10u8];
        p.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0\x01\x00\x00\x00");
        assert_eq!(parse_greeting_version(&p).as_deref(), Some("5.5.5-10.11.6-MariaDB"));
        assert_eq!(parse_greeting_version(&[0xff, 1, 2]), None);
        assert_eq!(parse_greeting_version(&[10, b'x']), None);
    }

    #[test]
    fn splits_addresses() {
        assert_eq!(split_address("db:3306"), Some(("db".into(), 3306)));
        assert_eq!(split_address("[::1]:3307"), Some(("::1".into(), 3307)));
        assert_eq!(split_address("db"), None);
    }
}
