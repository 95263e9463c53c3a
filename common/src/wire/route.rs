//! Request routing: maps a method and path (with any proxy prefix) to an endpoint.

/// An endpoint of the transport's HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET|HEAD …/v1/health`: liveness (no token).
    Health,
    /// `GET|HEAD …/v1/ready`: readiness, whether every upstream can be reached (no token).
    Ready,
    /// `POST …/v1/relay`: opens a relayed session; answers the upstream's greeting.
    OpenRelay,
    /// `POST …/v1/sessions/{id}/login`: a relayed client's login packet.
    Login(String),
    /// `POST …/v1/keepalive`
    KeepAlive,
    /// `POST …/v1/sessions/{id}/command`
    Command(String),
    /// `POST …/v1/sessions/{id}/infile`: a piece of the file a LOAD DATA LOCAL asked for.
    Infile(String),
    /// `DELETE …/v1/sessions/{id}`
    CloseSession(String),
    /// `GET …/v1/stream`: a WebSocket upgrade, after which requests travel as messages.
    Stream,
    /// `GET /metrics`
    Metrics,
    /// Known path, wrong method.
    MethodNotAllowed,
    /// Anything else.
    NotFound,
}

impl Route {
    /// Routes a request. Everything before the last `/v1/` is a prefix a proxy may add or keep,
    /// so `/db-tunnel/v1/health` and `/v1/health` are the same endpoint.
    pub fn parse(method: &str, path: &str) -> Route {
        if path == "/metrics" {
            return if method == "GET" { Route::Metrics } else { Route::MethodNotAllowed };
        }
        let Some(at) = last_v1(path.as_bytes()) else { return Route::NotFound };
        let rest = &path[at + 4..];
        // At most three parts: one more makes it a path of no endpoint.
        let mut split = rest.splitn(4, '/');
        let parts: [Option<&str>; 4] = std::array::from_fn(|_| split.next());
        let (route, allowed) = match parts {
            [Some("health"), None, ..] => (Route::Health, method == "GET" || method == "HEAD"),
            [Some("ready"), None, ..] => (Route::Ready, method == "GET" || method == "HEAD"),
            [Some("keepalive"), None, ..] => (Route::KeepAlive, method == "POST"),
            [Some("relay"), None, ..] => (Route::OpenRelay, method == "POST"),
            [Some("stream"), None, ..] => (Route::Stream, method == "GET"),
            [Some("sessions"), Some(id), Some("login"), None] if valid_id(id) => {
                (Route::Login(id.to_owned()), method == "POST")
            }
            [Some("sessions"), Some(id), None, _] if valid_id(id) => {
                (Route::CloseSession(id.to_owned()), method == "DELETE")
            }
            [Some("sessions"), Some(id), Some("command"), None] if valid_id(id) => {
                (Route::Command(id.to_owned()), method == "POST")
            }
            [Some("sessions"), Some(id), Some("infile"), None] if valid_id(id) => {
                (Route::Infile(id.to_owned()), method == "POST")
            }
            _ => return Route::NotFound,
        };
        if allowed { route } else { Route::MethodNotAllowed }
    }

    /// The route's method and path below the base URL (`v1/sessions/{id}/command`), as a
    /// sidecar asks for it; `None` for what is not an endpoint of the API.
    pub fn request(&self) -> Option<(&'static str, String)> {
        Some(match self {
            Route::Health => ("GET", "v1/health".into()),
            Route::Ready => ("GET", "v1/ready".into()),
            Route::OpenRelay => ("POST", "v1/relay".into()),
            Route::Stream => ("GET", "v1/stream".into()),
            Route::KeepAlive => ("POST", "v1/keepalive".into()),
            Route::Login(id) => ("POST", ["v1/sessions/", id, "/login"].concat()),
            Route::Command(id) => ("POST", ["v1/sessions/", id, "/command"].concat()),
            Route::Infile(id) => ("POST", ["v1/sessions/", id, "/infile"].concat()),
            Route::CloseSession(id) => ("DELETE", ["v1/sessions/", id].concat()),
            Route::Metrics | Route::MethodNotAllowed | Route::NotFound => return None,
        })
    }

    /// [`Self::request`]'s path alone (empty for what is not an endpoint).
    pub fn path(&self) -> String {
        self.request().map(|(_, path)| path).unwrap_or_default()
    }
}

/// Where the last `/v1/` of a path begins. (By hand: `str::rfind`'s searcher costs more to
/// set up than a path takes to read.)
fn last_v1(path: &[u8]) -> Option<usize> {
    // From slash to slash backwards: a path has few, and a session id many digits.
    let mut end = path.len();
    while let Some(slash) = path[..end].iter().rposition(|&b| b == b'/') {
        if path[slash..].starts_with(b"/v1/") {
            return Some(slash);
        }
        end = slash;
    }
    None
}

pub(super) fn valid_id(id: &str) -> bool {
    // Every byte looked at (no early exit): the compiler checks them many at a time.
    let alphanumeric = id.bytes().fold(true, |all, b| all & b.is_ascii_alphanumeric());
    !id.is_empty() && id.len() <= 64 && alphanumeric
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_is_asked_for_where_it_is_routed() {
        let id = "0123456789abcdef".to_owned();
        for route in [
            Route::Health,
            Route::Ready,
            Route::OpenRelay,
            Route::Stream,
            Route::KeepAlive,
            Route::Login(id.clone()),
            Route::Command(id.clone()),
            Route::Infile(id.clone()),
            Route::CloseSession(id),
        ] {
            let (method, path) = route.request().expect("an endpoint");
            assert_eq!(Route::parse(method, &format!("/db-tunnel/{path}")), route);
        }
        assert_eq!(Route::Metrics.request(), None);
    }

    #[test]
    fn the_last_v1_is_found_as_rfind_finds_it() {
        for path in ["/v1/", "/a/v1/b/v1/c", "/v11/", "v1/", "/v/1/", "/v1", "//v1//", "", "1/"] {
            assert_eq!(last_v1(path.as_bytes()), path.rfind("/v1/"), "{path:?}");
        }
        // Every path of up to 7 characters over the characters that matter.
        let alphabet = ['/', 'v', '1', 'a'];
        for len in 0..=7u32 {
            for n in 0..4usize.pow(len) {
                let path: String = (0..len).map(|i| alphabet[n / 4usize.pow(i) % 4]).collect();
                assert_eq!(last_v1(path.as_bytes()), path.rfind("/v1/"), "{path:?}");
            }
        }
    }

    #[test]
    fn routes_with_and_without_prefix() {
        assert_eq!(Route::parse("GET", "/v1/health"), Route::Health);
        assert_eq!(Route::parse("GET", "/db-tunnel/v1/health"), Route::Health);
        assert_eq!(Route::parse("POST", "/a/b/v1/relay"), Route::OpenRelay);
        assert_eq!(
            Route::parse("POST", "/v1/sessions/abc123/command"),
            Route::Command("abc123".into())
        );
        assert_eq!(
            Route::parse("DELETE", "/v1/sessions/abc123"),
            Route::CloseSession("abc123".into())
        );
        assert_eq!(
            Route::parse("POST", "/p/v1/sessions/abc123/infile"),
            Route::Infile("abc123".into())
        );
        assert_eq!(Route::parse("GET", "/metrics"), Route::Metrics);
        assert_eq!(Route::parse("POST", "/p/v1/keepalive"), Route::KeepAlive);
        assert_eq!(Route::parse("POST", "/p/v1/relay"), Route::OpenRelay);
        assert_eq!(Route::parse("POST", "/v1/sessions/ab1/login"), Route::Login("ab1".into()));
        assert_eq!(Route::parse("GET", "/v1/relay"), Route::MethodNotAllowed);
    }

    #[test]
    fn refuses_wrong_methods_and_odd_ids() {
        assert_eq!(Route::parse("GET", "/v1/relay"), Route::MethodNotAllowed);
        assert_eq!(Route::parse("POST", "/v1/sessions"), Route::NotFound);
        assert_eq!(Route::parse("POST", "/v1/sessions/../command"), Route::NotFound);
        assert_eq!(Route::parse("POST", "/v1/sessions//command"), Route::NotFound);
        assert_eq!(Route::parse("GET", "/"), Route::NotFound);
        assert_eq!(Route::parse("GET", "/v1/health/x"), Route::NotFound);
    }
}

/// How a session ends when its sidecar closes it (`DELETE …/v1/sessions/{id}?end=…`): what the
/// server sees should be what it would see from a direct client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The client quit: COM_QUIT upstream.
    Quit,
    /// The client hung up without COM_QUIT: the upstream connection is dropped, and the server
    /// counts an aborted client.
    HangUp,
    /// The sidecar shuts down: a running statement is killed first, then COM_QUIT.
    KillQuery,
}

impl SessionEnd {
    /// The query string of the close request (empty for a quit).
    pub fn query(self) -> &'static str {
        match self {
            SessionEnd::Quit => "",
            SessionEnd::HangUp => "?end=hangup",
            SessionEnd::KillQuery => "?kill=query",
        }
    }

    /// The ending a close request's query string asks for.
    pub fn from_query(query: Option<&str>) -> Self {
        let has = |p: &str| query.is_some_and(|q| q.split('&').any(|x| x == p));
        if has("kill=query") {
            SessionEnd::KillQuery
        } else if has("end=hangup") {
            SessionEnd::HangUp
        } else {
            SessionEnd::Quit
        }
    }
}

#[cfg(test)]
mod session_end_tests {
    use super::SessionEnd;

    #[test]
    fn endings_go_through_their_query_string() {
        for end in [SessionEnd::Quit, SessionEnd::HangUp, SessionEnd::KillQuery] {
            assert_eq!(SessionEnd::from_query(end.query().strip_prefix('?')), end);
        }
        assert_eq!(SessionEnd::from_query(Some("x=1&end=hangup")), SessionEnd::HangUp);
        assert_eq!(SessionEnd::from_query(Some("end=other")), SessionEnd::Quit);
    }
}
