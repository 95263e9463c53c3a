//! The bearer token requests carry: a fixed one (`transport.token`), or one printed by
//! `transport.token_command` (the pattern of kubectl's exec credentials and git's credential
//! helpers), reused until its `exp` (when it is a JWT) less a margin, or until a 401, then
//! asked for again. The token is never logged.

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

/// Where a request's `Authorization` comes from.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A fixed `Bearer …` value.
    Fixed(Arc<str>),
    /// The token command's latest token.
    Command(Arc<TokenCommand>),
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

    /// The transport refused `header` (401): a token command is asked again next time. True
    /// when another header may do better.
    pub fn refused(&self, header: &Arc<str>) -> bool {
        match self {
            Credential::Fixed(_) => false,
            Credential::Command(command) => command.forget(header),
        }
    }
}

/// `transport.token_command` and the token it printed last.
#[derive(Debug)]
pub struct TokenCommand {
    argv: Vec<String>,
    /// The header and when to ask again (`None`: until a 401).
    current: Mutex<Option<(Arc<str>, Option<Instant>)>>,
    /// One run at a time.
    running: tokio::sync::Mutex<()>,
}

impl TokenCommand {
    /// The command `argv` (program first).
    pub fn new(argv: Vec<String>) -> Self {
        Self { argv, current: Mutex::new(None), running: tokio::sync::Mutex::new(()) }
    }

    fn fresh(&self) -> Option<Arc<str>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let (header, until) = current.as_ref()?;
        until.is_none_or(|t| Instant::now() < t).then(|| header.clone())
    }

    async fn header(&self) -> Result<Arc<str>, Error> {
        if let Some(header) = self.fresh() {
            return Ok(header);
        }
        let _running = self.running.lock().await;
        if let Some(header) = self.fresh() {
            return Ok(header);
        }
        let token = self.run().await?;
        let header: Arc<str> = format!("Bearer {token}").into();
        let until = jwt_expiry(&token).map(|exp| {
            let now = SystemTime::now();
            let left = exp.duration_since(now).unwrap_or_default();
            Instant::now() + left.saturating_sub(EXPIRY_MARGIN.min(left / 2))
        });
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some((header.clone(), until));
        Ok(header)
    }

    fn forget(&self, header: &Arc<str>) -> bool {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|(h, _)| h == header) {
            *current = None;
        }
        true
    }

    /// Runs the command; its first line of output is the token.
    async fn run(&self) -> Result<String, Error> {
        let failed = |why: String| Error::TokenCommand(why);
        let (program, args) = self.argv.split_first().ok_or_else(|| failed("empty".into()))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("{program} could not start: {e}")))?;
        let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
        let ran = async {
            // Both pipes at once: a command that fills one while the other is read would stall.
            let (out, err) =
                tokio::try_join!(read_all(stdout.as_mut()), read_all(stderr.as_mut()))?;
            Ok::<_, std::io::Error>((child.wait().await?, out, err))
        };
        let (status, out, err) = tokio::time::timeout(COMMAND_TIMEOUT, ran)
            .await
            .map_err(|_| failed(format!("{program} gave no token within {COMMAND_TIMEOUT:?}")))?
            .map_err(|e| failed(format!("{program}: {e}")))?;
        if !status.success() {
            let said = String::from_utf8_lossy(&err);
            let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
            return Err(failed(format!("{program} failed ({status}): {said}")));
        }
        let out =
            String::from_utf8(out).map_err(|_| failed(format!("{program} printed non-UTF-8")))?;
        let token = out.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        if token.is_empty() || token.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(failed(format!("{program} printed no usable token on its first line")));
        }
        Ok(token.to_owned())
    }
}

/// At most [`MAX_OUTPUT`] bytes of a pipe.
async fn read_all<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<&mut R>,
) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        pipe.take(MAX_OUTPUT).read_to_end(&mut bytes).await?;
    }
    Ok(bytes)
}

/// The `exp` of a JWT, read without verifying it (the transport verifies).
fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let json = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&json).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    Some(UNIX_EPOCH + Duration::from_secs(exp))
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
        assert!(command.refused(&first));
        assert_eq!(&*command.header().await.expect("a new one"), "Bearer token-2");
        let failing =
            TokenCommand::new(vec!["sh".into(), "-c".into(), "echo nope >&2; exit 3".into()]);
        let err = failing.header().await.expect_err("fails");
        assert!(err.to_string().contains("nope"), "{err}");
        drop(std::fs::remove_dir_all(&dir));
    }
}
