//! The running process's door (`take_over_socket`): a Unix socket created 0600 (made in a
//! private folder and renamed into place, so that it is never open to others and a planted
//! file or link is replaced, not followed), where a process of its own user knocks and says
//! hello; any other peer is turned away without holding the door.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use tokio::net::UnixListener;
use tracing::{debug, info, warn};

use super::Message;
use super::channel::Channel;

/// How long a new connection has to say hello.
const HELLO_WAIT: Duration = Duration::from_secs(2);
/// Pause after a failed accept (out of descriptors): the loop does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// A new process that knocked and said hello.
#[derive(Debug)]
pub struct Knock {
    /// The channel to it.
    pub channel: Channel,
    /// The message version it speaks.
    pub version: u32,
}

/// The door a new process knocks at.
#[derive(Debug)]
pub struct Door {
    listener: UnixListener,
}

impl Door {
    /// Opens the door at `path`. A live transport already there is an error unless `replace`
    /// (a process that took that one over); a socket file left by a dead one is replaced.
    pub fn open(path: &Path, replace: bool) -> std::io::Result<Self> {
        if !replace && std::os::unix::net::UnixStream::connect(path).is_ok() {
            let e = format!("a running transport already listens on {}", path.display());
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, e));
        }
        // The staged socket's path is at most two bytes longer than a `take-over.sock` beside
        // it: a socket's path has room for 107 bytes only.
        let mut suffix = [0u8; 6];
        getrandom::fill(&mut suffix).map_err(|e| std::io::Error::other(e.to_string()))?;
        let name = format!(".t{}", crate::identity::config::to_hex(&suffix));
        let private = path.parent().unwrap_or(Path::new(".")).join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&private)?;
        let staged = private.join("s");
        let opened = UnixListener::bind(&staged).and_then(|listener| {
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&staged, path)?;
            Ok(listener)
        });
        drop(std::fs::remove_file(&staged));
        drop(std::fs::remove_dir(&private));
        let listener = opened.map_err(|e| {
            let at = path.display();
            std::io::Error::new(e.kind(), format!("take_over_socket {at}: cannot open it: {e}"))
        })?;
        info!(path = %path.display(), "take-over socket open");
        Ok(Self { listener })
    }

    /// The next knock of a process of this user that says hello within [`HELLO_WAIT`]; others
    /// are turned away (another user's logged).
    pub async fn knock(&self) -> Knock {
        loop {
            let socket = match self.listener.accept().await {
                Ok((socket, _)) => socket,
                Err(e) => {
                    warn!(error = %e, "take-over socket: accept failed");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            };
            let mut channel = match Channel::new(socket) {
                Ok(channel) => channel,
                Err(e) => {
                    warn!(error = %e, "a take-over refused");
                    continue;
                }
            };
            match tokio::time::timeout(HELLO_WAIT, channel.recv::<Message>()).await {
                Ok(Ok(Some((Message::Hello { version }, _, _)))) => {
                    return Knock { channel, version };
                }
                _ => debug!("a connection to the take-over socket said no hello: closed"),
            }
        }
    }

    /// Hands each knock to the receiver, until it is dropped; then the door closes. (The
    /// socket file is left: a process that took this one over opened its own there.)
    pub fn serve(self) -> tokio::sync::mpsc::Receiver<Knock> {
        let (knocks, received) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                let knock = tokio::select! {
                    knock = self.knock() => knock,
                    () = knocks.closed() => return,
                };
                if knocks.send(knock).await.is_err() {
                    return;
                }
            }
        });
        received
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path with room for the socket (107 bytes) opens, though the staging folder beside it
    /// is longer than its own name (a 104-byte path failed when the staged one was 35 longer).
    #[tokio::test]
    async fn a_path_near_the_limit_opens() {
        let base = std::env::temp_dir().join(format!("sqltunnel-door-{}", std::process::id()));
        let name = "take-over.sock";
        let pad = 104usize.saturating_sub(base.as_os_str().len() + 2 + name.len());
        let dir = base.join("d".repeat(pad.max(1)));
        std::fs::create_dir_all(&dir).expect("dirs");
        let path = dir.join(name);
        assert!(path.as_os_str().len() >= 100, "{}", path.display());
        let door = Door::open(&path, false);
        assert!(door.is_ok(), "{:?}", door.err());
        let mode = std::fs::metadata(&path).expect("socket").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(door);
        let too_long = base.join("d".repeat(120)).join(name);
        std::fs::create_dir_all(too_long.parent().expect("folder")).expect("dirs");
        let refused = Door::open(&too_long, false).expect_err("no room");
        assert!(refused.to_string().contains("take_over_socket"), "{refused}");
        drop(std::fs::remove_dir_all(&base));
    }
}
