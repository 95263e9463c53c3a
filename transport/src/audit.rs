//! The audit log (off by default): one JSON line per command a session runs, with who ran it,
//! what (the statement text, a digest of it, or nothing, by configuration; an execute names
//! its prepared statement's text), how long it took, how many rows and which error. Lines go
//! through a bounded queue to a writer thread. A step takes room in the queue for its
//! commands' lines before it runs them, waiting up to `body_timeout` when the writer is behind
//! (then it runs nothing: [`crate::Error::AuditBehind`]): a flood of commands slows down, and
//! none runs unaudited. Passwords in statements are redacted, and the file is created readable
//! by its owner only.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tracing::warn;

use crate::audit_redact::redact_passwords;

/// Room for one line, taken before its command runs and given back once the writer wrote it:
/// its place among the lines waiting ([`QUEUE`]), and what else its step held for it (its
/// identity's share of those places, opaque here).
pub struct Room {
    _place: OwnedSemaphorePermit,
    _share: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Room")
    }
}

impl Room {
    /// One line's room, split from a step's `places` ([`AuditLog::room`]), with `share`.
    pub fn split(
        places: &mut OwnedSemaphorePermit,
        share: Option<Box<dyn Send + Sync>>,
    ) -> Option<Self> {
        Some(Room { _place: places.split(1)?, _share: share })
    }
}

/// Lines waiting for the writer, or for their commands to end, at most (each at most
/// [`MAX_TEXT`] of statement and its fields: 64 MiB or so in all).
pub const QUEUE: usize = 4 * 1024;
/// Longest statement text written (longer ones are cut, and say so).
pub const MAX_TEXT: usize = 16 * 1024;

/// The `audit` section of the transport's config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// File the lines are appended to; `-` for standard output.
    pub path: String,
    /// What of a statement is written.
    #[serde(default)]
    pub statements: StatementLogging,
}

/// What of a statement the audit log keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatementLogging {
    /// The text (up to 16 KiB).
    #[default]
    Text,
    /// The SHA-1 of the text, in hex: the same statement is recognised, its values are not kept.
    Digest,
    /// Nothing.
    None,
}

/// One audit line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Entry {
    /// When the command arrived (RFC 3339, UTC, milliseconds).
    pub time: String,
    /// The session (its label, as in the logs).
    pub session: String,
    /// The identity that opened the session: a named identity's name, the person an OpenID
    /// token names, or `token#n` for the n-th plain token (those of `token_env` and
    /// `token_file` follow).
    pub identity: String,
    /// The user the session logged in as.
    pub user: Option<String>,
    /// The upstream's name.
    pub upstream: String,
    /// The database in use, as far as the tunnel saw (login, COM_INIT_DB).
    pub database: Option<String>,
    /// The command (`Query`, `Prepare`, `Execute`…).
    pub command: &'static str,
    /// The statement text (or its digest), when the command has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement: Option<String>,
    /// True when `statement` was cut at 16 KiB.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// A prepared statement's id (prepare, execute).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement_id: Option<u32>,
    /// The user a COM_CHANGE_USER asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_to: Option<String>,
    /// Milliseconds from the request to the end of the answer.
    pub duration_ms: f64,
    /// Rows of result sets.
    pub rows: u64,
    /// Affected rows.
    pub affected_rows: u64,
    /// The error code the server answered, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<u16>,
    /// How the answer ended (`Done`; or `Closed`, `Cut`, `Abandoned`…).
    pub outcome: String,
}

/// The audit log's writer end.
#[derive(Debug)]
pub struct AuditLog {
    lines: mpsc::UnboundedSender<(String, Option<Room>)>,
    /// Places for lines: each step takes its lines' before its commands run.
    places: Arc<Semaphore>,
    statements: StatementLogging,
    dropped: Counter,
    /// Set by [`Self::reopen`]: the writer opens its file again before the next line.
    reopen: Arc<AtomicBool>,
}

impl AuditLog {
    /// Opens the log as `config` says and starts its writer; `dropped` counts lines lost to a
    /// full queue.
    pub fn open(config: &AuditConfig, dropped: Counter) -> std::io::Result<AuditLog> {
        let path = config.path.clone();
        let mut out = output(&path)?;
        let reopen = Arc::new(AtomicBool::new(false));
        let asked = reopen.clone();
        let (lines, mut queue) = mpsc::unbounded_channel::<(String, Option<Room>)>();
        std::thread::Builder::new().name("audit-writer".into()).spawn(move || {
            // A line's room goes back once it is written.
            while let Some((line, _room)) = queue.blocking_recv() {
                if asked.swap(false, Ordering::AcqRel) {
                    // A file moved away by logrotate: the lines go on in a new one at `path`.
                    drop(out.flush());
                    match output(&path) {
                        Ok(new) => out = new,
                        Err(e) => warn!(error = %e, %path, "the audit log could not be reopened"),
                    }
                }
                let mut written = out.write_all(line.as_bytes());
                while let Ok((more, _room)) = queue.try_recv() {
                    written = written.and_then(|()| out.write_all(more.as_bytes()));
                }
                if let Err(e) = written.and_then(|()| out.flush()) {
                    warn!(error = %e, "audit log write failed");
                }
            }
        })?;
        let places = Arc::new(Semaphore::new(QUEUE));
        Ok(AuditLog { lines, places, statements: config.statements, dropped, reopen })
    }

    /// Opens the file again before the next line (SIGHUP, after a log rotation).
    pub fn reopen(&self) {
        self.reopen.store(true, Ordering::Release);
    }

    /// What of `text` is written, and whether it was cut. Passwords are redacted first
    /// ([`redact_passwords`]), also before a digest (a digest of a password is a hash to
    /// crack).
    pub fn statement(&self, text: &[u8]) -> (Option<String>, bool) {
        if self.statements == StatementLogging::None {
            return (None, false);
        }
        let text = String::from_utf8_lossy(text);
        let text = redact_passwords(&text);
        match self.statements {
            StatementLogging::None => (None, false),
            StatementLogging::Digest => {
                let digest = Sha1::digest(text.as_bytes());
                (Some(digest.iter().map(|b| format!("{b:02x}")).collect()), false)
            }
            StatementLogging::Text => {
                let cut = text.len() > MAX_TEXT;
                let mut end = text.len().min(MAX_TEXT);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                (Some(text[..end].to_owned()), cut)
            }
        }
    }

    /// Places for `lines` lines, all at once (first come, first served), waited for up to
    /// `wait`; `None` if the writer stayed behind that long. Split them with [`Room::split`].
    pub async fn room(&self, lines: usize, wait: Duration) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(lines).ok()?;
        let places = self.places.clone().acquire_many_owned(n);
        tokio::time::timeout(wait, places).await.ok()?.ok()
    }

    /// Queues one line, in `room` taken for it ([`Self::room`]); never waits. A line without
    /// room (none is written so now) takes a free place, or is dropped and counted.
    pub fn write(&self, entry: &Entry, room: Option<Room>) {
        let Ok(mut line) = serde_json::to_string(entry) else {
            return;
        };
        line.push('\n');
        let room = room.or_else(|| {
            let place = self.places.clone().try_acquire_owned().ok()?;
            Some(Room { _place: place, _share: None })
        });
        match room {
            Some(room) => drop(self.lines.send((line, Some(room)))),
            None => drop(self.dropped.inc()),
        }
    }
}

/// Where the lines go: `path` appended to (created if missing), or standard output for `-`.
fn output(path: &str) -> std::io::Result<Box<dyn Write + Send>> {
    if path == "-" {
        return Ok(Box::new(std::io::stdout()));
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    // Only its owner reads it, whatever the umask: it names who ran what.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    Ok(Box::new(std::io::BufWriter::new(file)))
}

/// `now` as RFC 3339 in UTC with milliseconds.
pub fn rfc3339(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_435_200_123);
        assert_eq!(rfc3339(t), "2026-11-23T12:00:00.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }
}
