//! The person's browser: started on the provider's page (`$BROWSER` when set, else the
//! system's opener), and the loopback redirect it comes back to with the code (a port on
//! 127.0.0.1 open for this one login, RFC 8252).

use std::time::Duration;

use crate::Error;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Longest wait for the person to log in.
const LOGIN_LIMIT: Duration = Duration::from_secs(5 * 60);
/// Largest request taken on the loopback port.
const MAX_REQUEST: usize = 16 * 1024;
/// Longest a connection to the loopback port may take to send its request.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);
/// Most connections to the loopback port served at once (the others wait to be accepted).
const MAX_CONNECTIONS: usize = 64;

/// Opens `url` in the person's browser: `$BROWSER` (a program given the URL), else `open`
/// (macOS), `explorer` (Windows), `xdg-open` (elsewhere). The program is not waited for.
pub fn open(url: &str) -> std::io::Result<()> {
    let chosen = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let program = chosen.unwrap_or_else(|| {
        if cfg!(target_os = "macos") {
            "open".into()
        } else if cfg!(windows) {
            "explorer".into()
        } else {
            "xdg-open".into()
        }
    });
    let mut child = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    // Reaped in the background: a browser that stays open is not waited for.
    std::thread::spawn(move || drop(child.wait()));
    Ok(())
}

/// The loopback port the provider sends the browser back to.
#[derive(Debug)]
pub struct Loopback {
    listener: TcpListener,
    port: u16,
}

impl Loopback {
    /// A port on 127.0.0.1 chosen by the system.
    pub async fn bind() -> Result<Self, Error> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| {
            Error::Login(format!("cannot open a port on 127.0.0.1 for the login: {e}"))
        })?;
        let port = listener.local_addr().map_err(|e| Error::Login(e.to_string()))?.port();
        Ok(Self { listener, port })
    }

    /// The `redirect_uri` that names it.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for the browser's return with a code for `state`; answers it with a page that
    /// says how it went. Requests without the state (a favicon, a stray visit) are answered
    /// 404 and waited past. Connections are served side by side, so one that sends nothing
    /// (a browser's speculative connection, another local process) does not hold up the
    /// browser's return; at most [`MAX_CONNECTIONS`] at once, each for [`REQUEST_LIMIT`].
    pub async fn code(self, state: &str) -> Result<String, Error> {
        let wait = async {
            let mut serving = FuturesUnordered::new();
            loop {
                tokio::select! {
                    accepted = self.listener.accept(), if serving.len() < MAX_CONNECTIONS => {
                        if let Ok((socket, _)) = accepted {
                            serving.push(serve(socket, state));
                        }
                    }
                    served = serving.next(), if !serving.is_empty() => {
                        if let Some(Some(outcome)) = served {
                            return outcome;
                        }
                    }
                }
            }
        };
        tokio::time::timeout(LOGIN_LIMIT, wait).await.unwrap_or_else(|_| {
            Err(Error::Login(format!(
                "no login within {} minutes: run `sidecar login` again",
                LOGIN_LIMIT.as_secs() / 60
            )))
        })
    }
}

/// One connection to the loopback port: its request, read within [`REQUEST_LIMIT`], answered
/// with a page; the login's outcome when it was the browser's return with `state`.
async fn serve(mut socket: TcpStream, state: &str) -> Option<Result<String, Error>> {
    let target = tokio::time::timeout(REQUEST_LIMIT, read_target(&mut socket)).await.ok()?.ok()?;
    let outcome = outcome(&target, state);
    let page = match &outcome {
        Some(Ok(_)) => (200, "Logged in: you may close this window and go back to the terminal."),
        Some(Err(_)) => (400, "The login failed: see the terminal."),
        None => (404, "Not the login's address."),
    };
    drop(tokio::time::timeout(REQUEST_LIMIT, reply(&mut socket, page)).await);
    outcome
}

/// The request target of an HTTP request (its path and query).
async fn read_target(socket: &mut TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(2048);
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > MAX_REQUEST || socket.read_buf(&mut buf).await? == 0 {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
    let line = buf.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    Ok(line.split(' ').nth(1).unwrap_or_default().to_owned())
}

/// What a request to the loopback port says: `None` when it is not the login's return.
fn outcome(target: &str, state: &str) -> Option<Result<String, Error>> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/callback" {
        return None;
    }
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    if get("state").as_deref() != Some(state) {
        return None;
    }
    Some(match (get("code"), get("error")) {
        (Some(code), None) => Ok(code),
        (_, error) => {
            let detail = get("error_description").unwrap_or_default();
            Err(Error::Login(format!(
                "the provider refused the login: {} {detail}",
                error.unwrap_or_default()
            )))
        }
    })
}

async fn reply(socket: &mut TcpStream, (status, text): (u16, &str)) -> std::io::Result<()> {
    let body = format!("<!DOCTYPE html><html><body><p>{text}</p></body></html>");
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        if status == 200 { "OK" } else { "Error" },
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_callback_with_its_state_counts() {
        let said = |target: &str| outcome(target, "s1").map(|r| r.map_err(|e| e.to_string()));
        assert_eq!(said("/callback?code=abc&state=s1"), Some(Ok("abc".into())));
        assert_eq!(said("/callback?code=abc&state=other"), None, "another login's");
        assert_eq!(said("/favicon.ico"), None);
        let refused = said("/callback?error=access_denied&state=s1");
        assert!(refused.is_some_and(|r| r.is_err_and(|e| e.contains("access_denied"))));
        assert_eq!(said("/callback?code=a%2Bb&state=s1"), Some(Ok("a+b".into())));
    }

    /// A connection that sends nothing (a browser's speculative one, or another process's) held
    /// the one-at-a-time loop for 10 s while the browser's return waited behind it.
    #[tokio::test]
    async fn a_silent_connection_does_not_hold_up_the_browsers_return() {
        let loopback = Loopback::bind().await.expect("bind");
        let port = loopback.port;
        let waiting = tokio::spawn(async move { loopback.code("s1").await });
        let _silent = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut browser = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let request = "GET /callback?code=c0de&state=s1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        browser.write_all(request.as_bytes()).await.expect("send");
        let code = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        let code = code.expect("answered before the silent one's limit").expect("join");
        assert_eq!(code.map_err(|e| e.to_string()), Ok("c0de".into()));
        let mut page = String::new();
        drop(browser.read_to_string(&mut page).await);
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    }
}
