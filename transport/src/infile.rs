//! LOAD DATA LOCAL INFILE across the tunnel. Each upstream connection has an [`InfileBridge`]
//! installed as its `mysql_async` local-infile handler: when the upstream asks for a file, the
//! running query is told (it sends an `Infile` frame in order with its other output), and the
//! file's pieces, uploaded by the sidecar to `…/sessions/{id}/infile`, flow through a small
//! channel into the upstream connection — never held whole.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, InfileData, LocalInfileError, Opts};
use tokio::sync::mpsc;

use crate::Error;

/// What MariaDB answers when the client does not allow local infile (ER 4166).
pub const CAPABILITY_DISABLED: &str = "The used command is not allowed because the MariaDB server or client has disabled the local infile capability";
/// ER_LOAD_INFILE_CAPABILITY_DISABLED.
pub const CAPABILITY_DISABLED_CODE: u16 = 4166;
/// Pieces buffered between the upload request and the upstream connection.
const PIECES_IN_FLIGHT: usize = 4;

/// What the handler tells the running command.
#[derive(Debug)]
pub enum InfileEvent {
    /// The upstream asks for this file: send an `Infile` frame, pieces will follow.
    File(Vec<u8>),
    /// The client does not allow local infile: the upstream got an empty file, and the load's
    /// OK must be answered with the server's error instead.
    Refused,
}

/// The link between one upstream connection's infile requests and the session using it.
pub struct InfileBridge {
    state: Mutex<BridgeState>,
    /// How long a transfer may wait for its next piece.
    piece_timeout: Duration,
    /// How to reach the upstream from a second connection (to cancel a stalled load).
    side_door: Opts,
}

#[derive(Debug, Default)]
struct BridgeState {
    /// The session's client set CLIENT_LOCAL_FILES.
    client_allows: bool,
    /// The connection's id on the upstream server.
    connection_id: u32,
    /// The running command's events.
    events: Option<mpsc::UnboundedSender<InfileEvent>>,
    /// Where uploaded pieces go while a file is being received.
    upload: Option<mpsc::Sender<Bytes>>,
}

/// Leaves out `side_door`: it holds the upstream password.
impl std::fmt::Debug for InfileBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InfileBridge").field("state", &self.state).finish_non_exhaustive()
    }
}

/// A running query's side of the bridge; closes it when dropped.
#[derive(Debug)]
pub struct InfileEvents<'a> {
    bridge: &'a InfileBridge,
    /// Requests from the upstream, in order.
    pub rx: mpsc::UnboundedReceiver<InfileEvent>,
    /// A refusal is waiting for the load's OK.
    pub refused: bool,
}

impl Drop for InfileEvents<'_> {
    fn drop(&mut self) {
        let mut state = self.bridge.lock();
        state.events = None;
        state.upload = None;
    }
}

impl InfileBridge {
    /// A new bridge; install [`InfileBridge::handler`] in the connection's options, which are
    /// `side_door` plus the handler.
    pub fn new(piece_timeout: Duration, side_door: Opts) -> Arc<Self> {
        Arc::new(Self { state: Mutex::default(), piece_timeout, side_door })
    }

    /// A bridge that never serves a file (a relayed session passes files as packets).
    pub fn unused(piece_timeout: Duration) -> Arc<Self> {
        Self::new(piece_timeout, Opts::from(mysql_async::OptsBuilder::default()))
    }

    /// Records the connection's id once it is connected.
    pub fn set_connection_id(&self, id: u32) {
        self.lock().connection_id = id;
    }

    /// The `mysql_async` handler: `file_name` is what the upstream asks for.
    pub fn handler(
        self: &Arc<Self>,
    ) -> impl Fn(
        &[u8],
    )
        -> futures_util::future::BoxFuture<'static, Result<InfileData, LocalInfileError>>
    + Send
    + Sync
    + 'static {
        let bridge = self.clone();
        move |file_name: &[u8]| {
            let data = bridge.request(file_name);
            Box::pin(async move { Ok(data) })
        }
    }

    /// Records whether the client of the session now using this connection allows local infile.
    pub fn set_client_allows(&self, allows: bool) {
        self.lock().client_allows = allows;
    }

    /// A query starts: the upstream's requests go to the returned events until they drop.
    pub fn open(&self) -> InfileEvents<'_> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().events = Some(tx);
        InfileEvents { bridge: self, rx, refused: false }
    }

    /// Hands one uploaded piece to the waiting upstream (waiting for room: back-pressure);
    /// `last` ends the file.
    pub async fn upload(&self, piece: Bytes, last: bool) -> Result<(), Error> {
        let Some(tx) = self.lock().upload.clone() else {
            return Err(Error::BadRequest(
                "no LOCAL INFILE transfer is waiting on this session".into(),
            ));
        };
        if !piece.is_empty() && tx.send(piece).await.is_err() {
            return Err(Error::BadRequest("the LOCAL INFILE transfer was abandoned".into()));
        }
        if last {
            self.lock().upload = None;
        }
        Ok(())
    }

    /// The data the upstream gets for `file_name`. Refusals send an empty file: an error here
    /// would make `mysql_async` drop the connection.
    fn request(&self, file_name: &[u8]) -> InfileData {
        let mut state = self.lock();
        let Some(events) = state.events.clone() else {
            return failed("the upstream asked for a file outside of a query");
        };
        if !state.client_allows {
            drop(events.send(InfileEvent::Refused));
            return futures_util::stream::empty().boxed();
        }
        let (tx, rx) = mpsc::channel(PIECES_IN_FLIGHT);
        state.upload = Some(tx);
        drop(events.send(InfileEvent::File(file_name.to_vec())));
        let stall = Stall {
            timeout: self.piece_timeout,
            side_door: self.side_door.clone(),
            connection_id: state.connection_id,
        };
        futures_util::stream::unfold((rx, stall), |(mut rx, stall)| async move {
            match tokio::time::timeout(stall.timeout, rx.recv()).await {
                Ok(Some(piece)) => Some((Ok(piece), (rx, stall))),
                Ok(None) => None,
                Err(_) => {
                    // Ending the file now would load what arrived so far: the statement is
                    // killed first, so the server rolls it back, as when its own client stalls.
                    stall.cancel_statement().await;
                    rx.close();
                    let e = io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client's file stopped arriving",
                    );
                    Some((Err(e), (rx, stall)))
                }
            }
        })
        .boxed()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BridgeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a waiting transfer needs to give up cleanly.
struct Stall {
    timeout: Duration,
    side_door: Opts,
    connection_id: u32,
}

impl Stall {
    /// `KILL QUERY` on the loading connection, from a second one with the same login.
    async fn cancel_statement(&self) {
        let kill = async {
            let mut conn = Conn::new(self.side_door.clone()).await?;
            conn.query_drop(format!("KILL QUERY {}", self.connection_id)).await?;
            conn.disconnect().await
        };
        match tokio::time::timeout(self.timeout, kill).await {
            Ok(Ok(())) => {
                tracing::info!(
                    connection_id = self.connection_id,
                    "stalled LOAD DATA LOCAL cancelled"
                )
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot cancel a stalled LOAD DATA LOCAL"),
            Err(_) => tracing::warn!("cannot cancel a stalled LOAD DATA LOCAL: no answer"),
        }
    }
}

fn failed(reason: &'static str) -> InfileData {
    futures_util::stream::once(async move { Err(io::Error::other(reason)) }).boxed()
}
