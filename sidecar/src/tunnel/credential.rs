//! The bearer token requests carry: a fixed one (`transport.token`), or one printed by
//! `transport.token_command` (the pattern of kubectl's exec credentials and git's credential
//! helpers) or got from the person's kept login (`transport.login`, `sidecar login`), reused
//! until its `exp` (when it is a JWT) less a margin, or until a 401, then asked for again. The
//! token is never logged.

use std::hash::{Hash, Hasher};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::config::Secret;
use tokio::io::AsyncReadExt;

use crate::Error;

/// Longest wait for the token command (an SSO helper may open a browser).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest output read from it.
const MAX_OUTPUT: u64 = 64 << 10;
/// A JWT is asked for again this long before its `exp` (or halfway, for a shorter life).
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);
/// After the command failed, it is not run again for this long (each request gets the error).
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// How long output is still read once the command exited (a process it started may hold the
/// pipes open).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// Where a request's `Authorization` comes from. Its `Debug` shows no token.
#[derive(Clone)]
pub enum Credential {
    /// A fixed `Bearer …` value.
    Fixed(Arc<str>),
    /// The token command's (or the login's) latest token.
    Command(Arc<TokenCommand>),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Fixed(_) => f.write_str("Credential::Fixed(***)"),
            Credential::Command(c) => write!(f, "Credential::Command({:?})", c.source),
        }
    }
}

impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Credential::Fixed(a), Credential::Fixed(b)) => a == b,
            (Credential::Command(a), Credential::Command(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Credential {}

impl Hash for Credential {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Credential::Fixed(value) => value.hash(state),
            Credential::Command(command) => Arc::as_ptr(command).hash(state),
        }
    }
}

impl Credential {
    /// A fixed token.
    pub fn fixed(token: &Secret) -> Self {
        Credential::Fixed(format!("Bearer {}", token.expose()).into())
    }

    /// The `Authorization` header value to send now.
    pub async fn header(&self) -> Result<Arc<str>, Error> {
        match self {
            Credential::Fixed(value) => Ok(value.clone()),
            Credential::Command(command) => command.header().await,
        }
    }

    /// The transport refused `header` (401): a token command is asked again. True when the
    /// request is worth sending once more (with a token other than the refused one).
    pub async fn refused(&self, header: &Arc<str>) -> bool {
        match self {
            Credential::Fixed(_) => false,
            Credential::Command(command) => {
                command.forget(header);
                command.header().await.is_ok_and(|new| new != *header)
            }
        }
    }
}

/// The token command's last token.
struct Token {
    header: Arc<str>,
    /// When to ask for a new one (`None`: only after a 401).
    renew_at: Option<Instant>,
    /// When it stops being valid (its `exp`), if known: until then it is still sent while a
    /// new one is asked for.
    valid_until: Option<Instant>,
}

/// Where new tokens come from.
enum Source {
    /// `transport.token_command`: the program and its arguments.
    Command(Vec<String>),
    /// `transport.login`: a refresh of the person's kept login.
    Login(crate::login::Refresher),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Command(argv) => write!(f, "{argv:?}"),
            Source::Login(_) => f.write_str("login"),
        }
    }
}

/// Why the last token could not be had, kept to answer requests for a while.
#[derive(Debug, Clone)]
enum Failure {
    Command(String),
    LoginNeeded(String),
    Login(String),
}

impl Failure {
    fn error(&self) -> Error {
        match self.clone() {
            Failure::Command(why) => Error::TokenCommand(why),
            Failure::LoginNeeded(why) => Error::LoginNeeded(why),
            Failure::Login(why) => Error::LoginFailed(why),
        }
    }
}

/// `transport.token_command` (or `transport.login`) and the token it gave last. Its `Debug`
/// shows no token.
pub struct TokenCommand {
    source: Source,
    current: Mutex<Option<Token>>,
    /// The last failure, and when: the command is not run again for [`RETRY_AFTER`].
    failed: Mutex<Option<(Instant, Failure)>>,
    /// One run at a time.
    running: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for TokenCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCommand").field("source", &self.source).finish_non_exhaustive()
    }
}

impl TokenCommand {
    /// The command `argv` (program first).
    pub fn new(argv: Vec<String>) -> Self {
        Self::of(Source::Command(argv))
    }

    /// The tokens of the person's kept login.
    pub fn login(refresher: crate::login::Refresher) -> Self {
        Self::of(Source::Login(refresher))
    }

    fn of(source: Source) -> Self {
        let running = tokio::sync::Mutex::new(());
        Self { source, current: Mutex::new(None), failed: Mutex::new(None), running }
    }

    /// The token to send without asking: fresh, or (`usable`) still valid.
    fn kept(&self, usable: bool) -> Option<Arc<str>> {
        let current = lock(&self.current);
        let token = current.as_ref()?;
        let now = Instant::now();
        let fresh = token.renew_at.is_none_or(|t| now < t);
        let valid = usable && token.valid_until.is_some_and(|t| now < t);
        (fresh || valid).then(|| token.header.clone())
    }

    async fn header(&self) -> Result<Arc<str>, Error> {
        if let Some(header) = self.kept(false) {
            return Ok(header);
        }
        // One caller asks; the others go on with the old token while it is valid.
        let running = match self.running.try_lock() {
            Ok(running) => running,
            Err(_) => match self.kept(true) {
                Some(header) => return Ok(header),
                None => self.running.lock().await,
            },
        };
        if let Some(header) = self.kept(false) {
            return Ok(header);
        }
        if let Some((at, failure)) = lock(&self.failed).as_ref()
            && at.elapsed() < RETRY_AFTER
        {
            return Err(failure.error());
        }
        let got = match &self.source {
            Source::Command(argv) => run(argv).await,
            Source::Login(refresher) => refresher.access_token().await.map_err(|e| match e {
                Error::LoginNeeded(why) => Failure::LoginNeeded(why),
                Error::LoginFailed(why) => Failure::Login(why),
                other => Failure::Login(other.to_string()),
            }),
        };
        let token = match got {
            Ok(token) => token,
            Err(failure) => {
                *lock(&self.failed) = Some((Instant::now(), failure.clone()));
                return Err(failure.error());
            }
        };
        drop(running);
        let header: Arc<str> = format!("Bearer {token}").into();
        let left =
            jwt_expiry(&token).map(|exp| exp.duration_since(SystemTime::now()).unwrap_or_default());
        let now = Instant::now();
        let token = Token {
            header: header.clone(),
            renew_at: left.map(|l| {
                now.checked_add(l.saturating_sub(EXPIRY_MARGIN.min(l / 2))).unwrap_or(now)
            }),
            valid_until: left.and_then(|l| now.checked_add(l)),
        };
        *lock(&self.current) = Some(token);
        Ok(header)
    }

    /// Forgets `header` (refused), so the next request asks again.
    fn forget(&self, header: &Arc<str>) {
        let mut current = lock(&self.current);
        if current.as_ref().is_some_and(|t| t.header == *header) {
            *current = None;
        }
    }
}

/// Runs the command `argv`; its first line of output is the token. Its output is read while it
/// runs (capped); what it says on stderr (a device-code prompt) is shown on the sidecar's own
/// when that is a terminal, where a person reads it: elsewhere the sidecar's stderr is its log
/// (journald, a redirected file), and a helper's verbose or debug output may hold its tokens;
/// once it has exited, a process it left holding the pipes is not waited for beyond a moment.
/// On Windows a `.cmd` or `.bat` helper (`gcloud`, `az`) runs through `cmd /C`.
async fn run(argv: &[String]) -> Result<String, Failure> {
    let (program, args) = argv.split_first().ok_or(Failure::Command("empty command".into()))?;
    let mut command = tokio::process::Command::new(program);
    #[cfg(windows)]
    {
        let lower = program.to_ascii_lowercase();
        if lower.ends_with(".cmd") || lower.ends_with(".bat") {
            command = tokio::process::Command::new("cmd");
            command.arg("/C").arg(program);
        }
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure::Command(format!("{program} could not start: {e}")))?;
    let (out, err) = (Arc::default(), Arc::default());
    let mut stdout = tokio::spawn(read_all(child.stdout.take(), Arc::clone(&out), false));
    let echo = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut stderr = tokio::spawn(read_all(child.stderr.take(), Arc::clone(&err), echo));
    let status = tokio::time::timeout(COMMAND_TIMEOUT, child.wait())
        .await
        .map_err(|_| {
            Failure::Command(format!("{program} gave no token within {COMMAND_TIMEOUT:?}"))
        })?
        .map_err(|e| Failure::Command(format!("{program}: {e}")))?;
    let (out, err) = (collect(&mut stdout, &out).await, collect(&mut stderr, &err).await);
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        return Err(Failure::Command(format!("{program} failed ({status}): {said}")));
    }
    let out = String::from_utf8(out)
        .map_err(|_| Failure::Command(format!("{program} printed non-UTF-8")))?;
    let token = out.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if token.is_empty() || token.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(Failure::Command(format!(
            "{program} printed no usable token on its first line"
        )));
    }
    Ok(token.to_owned())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a pipe's reader got, waiting at most [`PIPE_GRACE`] after the command exited.
async fn collect(reader: &mut tokio::task::JoinHandle<()>, read: &Mutex<Vec<u8>>) -> Vec<u8> {
    if tokio::time::timeout(PIPE_GRACE, &mut *reader).await.is_err() {
        reader.abort();
    }
    std::mem::take(&mut *lock(read))
}

/// Reads at most [`MAX_OUTPUT`] bytes of a pipe into `into` (then the pipe is closed: a
/// command that writes on gets a broken pipe rather than stalling); `echo`: shown on the
/// sidecar's stderr (a terminal) as well.
async fn read_all<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    into: Arc<Mutex<Vec<u8>>>,
    echo: bool,
) {
    let Some(pipe) = pipe else { return };
    let mut pipe = pipe.take(MAX_OUTPUT);
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
        if echo {
            use std::io::Write;
            drop(std::io::stderr().write_all(&chunk[..n]));
        }
        lock(&into).extend_from_slice(&chunk[..n]);
    }
}

/// The claims of a JWT, read without verifying it (the transport verifies).
pub(crate) fn jwt_claims(token: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    let payload = token.split('.').nth(1)?;
    let json = URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice(&json).ok()
}

/// The `exp` of a JWT, read without verifying it.
fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let exp = jwt_claims(token)?.get("exp")?.as_u64()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_expiry_of_a_jwt_only() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"sub":"a","exp":2000000000}"#);
        let jwt = format!("eyJhbGciOiJFUzI1NiJ9.{payload}.c2ln");
        assert_eq!(jwt_expiry(&jwt), Some(UNIX_EPOCH + Duration::from_secs(2_000_000_000)));
        assert_eq!(jwt_expiry("plain-token-123"), None);
        let huge = URL_SAFE_NO_PAD.encode(br#"{"exp":18446744073709551615}"#);
        assert_eq!(jwt_expiry(&format!("e30.{huge}.c2ln")), None, "no panic");
    }

    #[tokio::test]
    async fn runs_the_command_again_only_after_a_refusal() {
        let dir =
            std::env::temp_dir().join(format!("sqltunnel-token-command-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let count = dir.join("count");
        let script = format!("echo x >> {0}; echo token-$(wc -l < {0})", count.display());
        let command = Credential::Command(Arc::new(TokenCommand::new(vec![
            "sh".into(),
            "-c".into(),
            script,
        ])));
        let first = command.header().await.expect("a token");
        assert_eq!(&*first, "Bearer token-1");
        assert_eq!(command.header().await.expect("again"), first, "reused");
        assert!(command.refused(&first).await, "a new token is worth a try");
        assert_eq!(&*command.header().await.expect("the new one"), "Bearer token-2");
        let failing =
            TokenCommand::new(vec!["sh".into(), "-c".into(), "echo nope >&2; exit 3".into()]);
        let err = failing.header().await.expect_err("fails");
        assert!(err.to_string().contains("nope"), "{err}");
        // A command that leaves a process holding its output open is not waited for.
        let started = Instant::now();
        let lingering =
            TokenCommand::new(vec!["sh".into(), "-c".into(), "echo tok-1; sleep 30 &".into()]);
        assert_eq!(&*lingering.header().await.expect("a token"), "Bearer tok-1");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        drop(std::fs::remove_dir_all(&dir));
    }
}
