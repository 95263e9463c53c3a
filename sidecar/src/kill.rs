//! `KILL [QUERY | CONNECTION] n` (and COM_PROCESS_KILL) translation. Clients know the connection id of the sidecar's
//! greeting, not the upstream's; `KILL n` is rewritten to the upstream id of the sidecar's
//! connection `n`, so Connector/J's `Statement.cancel()` cancels the right query and never a
//! stranger's thread. An id the sidecar does not know gets the server's error 1094.

use std::collections::HashMap;
use std::sync::Mutex;

/// Local connection id → upstream connection id, for the sidecar's live sessions.
#[derive(Debug, Default)]
pub struct ConnectionIds(Mutex<HashMap<u32, u32>>);

impl ConnectionIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a logged-in connection.
    pub fn insert(&self, local: u32, upstream: u32) {
        self.lock().insert(local, upstream);
    }

    /// Forgets a connection.
    pub fn remove(&self, local: u32) {
        self.lock().remove(&local);
    }

    /// The upstream id of local connection `local`.
    pub fn upstream(&self, local: u32) -> Option<u32> {
        self.lock().get(&local).copied()
    }
}

/// A parsed `KILL` statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    /// `KILL QUERY` (else the whole connection).
    pub query_only: bool,
    /// The id the client named.
    pub id: u32,
}

/// Recognises `KILL [HARD|SOFT] [QUERY|CONNECTION] <id>` (any case, optional `;`).
pub fn parse_kill(sql: &[u8]) -> Option<Kill> {
    let text = std::str::from_utf8(sql).ok()?.trim().trim_end_matches(';').trim();
    let mut words = text.split_ascii_whitespace();
    if !words.next()?.eq_ignore_ascii_case("kill") {
        return None;
    }
    let mut query_only = false;
    for word in words {
        if word.eq_ignore_ascii_case("hard")
            || word.eq_ignore_ascii_case("soft")
            || word.eq_ignore_ascii_case("connection")
        {
            continue;
        }
        if word.eq_ignore_ascii_case("query") {
            query_only = true;
            continue;
        }
        return word.parse().ok().map(|id| Kill { query_only, id });
    }
    None
}

/// COM_PROCESS_KILL's payload: the connection id to kill (the whole connection).
pub fn process_kill(payload: &[u8]) -> Option<Kill> {
    let id: [u8; 4] = payload.get(..4)?.try_into().ok()?;
    Some(Kill { query_only: false, id: u32::from_le_bytes(id) })
}

impl Kill {
    /// The statement to run upstream instead.
    pub fn upstream_sql(&self, upstream_id: u32) -> Vec<u8> {
        let what = if self.query_only { "QUERY " } else { "" };
        format!("KILL {what}{upstream_id}").into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_kill_forms() {
        assert_eq!(parse_kill(b"KILL QUERY 12"), Some(Kill { query_only: true, id: 12 }));
        assert_eq!(parse_kill(b"  kill connection 7 ;"), Some(Kill { query_only: false, id: 7 }));
        assert_eq!(parse_kill(b"KILL HARD QUERY 3"), Some(Kill { query_only: true, id: 3 }));
        assert_eq!(parse_kill(b"KILL 9"), Some(Kill { query_only: false, id: 9 }));
        assert_eq!(parse_kill(b"KILL USER bob"), None);
        assert_eq!(parse_kill(b"SELECT 'KILL 1'"), None);
        assert_eq!(parse_kill(b"KILL QUERY ID 5"), None);
        assert_eq!(
            Kill { query_only: true, id: 1 }.upstream_sql(4711),
            b"KILL QUERY 4711".to_vec()
        );
    }
}
