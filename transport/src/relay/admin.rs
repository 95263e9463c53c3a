//! The transport's own short connections, logged in as the upstream's `admin_user` (or a
//! `users` entry): `KILL QUERY <thread id>` ends a running statement from outside its
//! connection, as `mysql`'s Ctrl-C does (that connection gets the server's error 1317 and
//! lives on), and a readiness probe logs in and runs a statement.

use std::time::Duration;

use common::mysql::err_packet::ErrPacket;
use common::mysql::{capability as cap, packet};
use common::wire::LoginAs;

use super::handshake::ClientLeg;
use super::link::{LinkError, Phase, RelayLink, UpstreamTlsLink};
use crate::config::UpstreamConfig;
use common::mysql::packets::PacketHead;

/// utf8mb4_general_ci, the collation of the transport's own logins.
const COLLATION: u8 = 45;

/// Why one of the transport's own connections failed. No variant holds the password.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The upstream could not be reached.
    #[error(transparent)]
    Dial(#[from] crate::Error),
    /// The connection failed after it was made.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The upstream answered with an error packet ("code: message").
    #[error("{0}")]
    Refused(String),
    /// The upstream refused the login.
    #[error("login as {user:?} refused: {reason}")]
    LoginRefused {
        /// Who logged in.
        user: String,
        /// The upstream's error ("code: message").
        reason: String,
    },
    /// Nothing came back in time.
    #[error("no answer within {}s", .0.as_secs())]
    NoAnswer(Duration),
}

/// The login of `upstream`'s `admin_user`, if it has one.
pub fn admin_login(upstream: &UpstreamConfig) -> Option<LoginAs> {
    let user = upstream.admin_user.clone()?;
    let password = upstream.admin_password.as_ref().map(|p| p.expose().to_owned());
    Some(LoginAs {
        user,
        password: password.unwrap_or_default(),
        database: None,
        client_flags: cap::LONG_PASSWORD | cap::TRANSACTIONS | cap::MULTI_RESULTS,
        mariadb_flags: 0,
        collation: COLLATION,
    })
}

/// A connection of the transport's own to `upstream`, logged in as `login` (no database).
async fn log_in(
    upstream: &UpstreamConfig,
    tls: Option<UpstreamTlsLink>,
    login: &LoginAs,
    timeout: Duration,
) -> Result<RelayLink, AdminError> {
    let (mut link, greeting) =
        RelayLink::dial(upstream, tls, ClientLeg::default(), timeout).await?;
    if greeting.get(PacketHead::LEN) == Some(&packet::ERR) {
        return Err(AdminError::Refused(error_text(&greeting)));
    }
    let answer = link.login_as(login).await?;
    if answer.get(PacketHead::LEN) != Some(&packet::OK) {
        let (user, reason) = (login.user.clone(), error_text(&answer));
        return Err(AdminError::LoginRefused { user, reason });
    }
    link.phase = Phase::Ready;
    Ok(link)
}

/// Runs `sql` (answered by one OK or ERR) on a connection of its own, all within `timeout`.
/// The error says what failed (never the password).
async fn run_alone(
    upstream: &UpstreamConfig,
    tls: Option<UpstreamTlsLink>,
    login: &LoginAs,
    sql: &str,
    timeout: Duration,
) -> Result<(), AdminError> {
    let steps = async {
        let mut link = log_in(upstream, tls, login, timeout).await?;
        let answer = link.run_simple(sql).await?;
        link.quit().await;
        match answer.get(PacketHead::LEN) {
            Some(&packet::OK) => Ok(()),
            _ => Err(AdminError::Refused(error_text(&answer))),
        }
    };
    tokio::time::timeout(timeout, steps).await.unwrap_or(Err(AdminError::NoAnswer(timeout)))
}

/// Kills the statement running on connection `thread_id` of `upstream`, as `login`.
pub async fn kill_query(
    upstream: &UpstreamConfig,
    tls: Option<UpstreamTlsLink>,
    thread_id: u32,
    login: &LoginAs,
    timeout: Duration,
) -> Result<(), AdminError> {
    run_alone(upstream, tls, login, &format!("KILL QUERY {thread_id}"), timeout).await
}

/// Checks that `upstream` answers a login of `login` and a statement (readiness).
pub async fn probe(
    upstream: &UpstreamConfig,
    tls: Option<UpstreamTlsLink>,
    login: &LoginAs,
    timeout: Duration,
) -> Result<(), AdminError> {
    run_alone(upstream, tls, login, "DO 1", timeout).await
}

/// "code: message" of an ERR packet (header included).
fn error_text(packet: &[u8]) -> String {
    let payload = packet.get(PacketHead::LEN..).unwrap_or_default();
    match ErrPacket::parse(payload) {
        Some(err) => format!("{}: {}", err.code, String::from_utf8_lossy(err.message)),
        None => "an unexpected answer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_reads_code_and_message() {
        let mut p = vec![0, 0, 0, 1];
        common::mysql::encode_err(&mut p, 1094, b"HY000", b"Unknown thread id: 7");
        assert_eq!(error_text(&p), "1094: Unknown thread id: 7");
        assert_eq!(error_text(&[0, 0, 0, 1, 0]), "an unexpected answer");
    }
}
