//! A command in flight, driven by whoever polls its response body: no task of its own, so a
//! small answer is computed inline and sent with a Content-Length in one write, and a large
//! one streams as the body is read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::mysql::error_code;
use common::wire::{encode_err, encode_heartbeat};
use mysql_async::Conn;
use tokio::sync::OwnedMutexGuard;
use tokio::sync::mpsc;
use tracing::warn;

use crate::command::{Outcome, execute};
use crate::session::Session;
use crate::sink::{CHANNEL_CHUNKS, FrameSink};

type BoxedRun = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What rides along with a command.
#[derive(Debug, Default)]
pub struct Extras {
    /// Statements the client closed since its last command.
    pub closes: Vec<u32>,
    /// COM_STMT_SEND_LONG_DATA for this execute: (parameter, data).
    pub long_data: Vec<(u16, Bytes)>,
    /// The client has multi-statements off: a query holding several is refused.
    pub single_statement: bool,
}

/// The running command and the chunks it has produced so far.
pub struct CommandRun {
    fut: Option<BoxedRun>,
    rx: mpsc::Receiver<Bytes>,
}

impl std::fmt::Debug for CommandRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandRun").field("running", &self.fut.is_some()).finish()
    }
}

/// Owns a session's connection for one command; if the command is abandoned half-way (the
/// HTTP client went away), the connection's state is unknown, so it is dropped.
struct ConnLease {
    guard: OwnedMutexGuard<Option<Conn>>,
    finished: bool,
}

impl Drop for ConnLease {
    fn drop(&mut self) {
        if !self.finished && self.guard.take().is_some() {
            warn!("command abandoned mid-answer; upstream connection closed");
        }
    }
}

impl CommandRun {
    /// Prepares `payload` to run on the leased connection of `session`, after closing the
    /// statements listed in `extras`.
    pub fn start(
        guard: OwnedMutexGuard<Option<Conn>>,
        payload: Bytes,
        extras: Extras,
        heartbeat: Duration,
        session: Arc<Session>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let fut = async move {
            let mut lease = ConnLease { guard, finished: false };
            let mut sink = FrameSink::new(tx.clone());
            let outcome = match lease.guard.as_mut() {
                Some(conn) => {
                    session.statements.close(conn, &extras.closes).await;
                    let run = execute(conn, &payload, &mut sink, &session, &extras);
                    with_heartbeats(run, &tx, heartbeat).await
                }
                None => {
                    let msg =
                        b"MySQL server has gone away (the upstream connection was lost earlier)";
                    encode_err(
                        sink.buf(),
                        error_code::CONNECTION_LOST,
                        error_code::STATE_COMM,
                        msg,
                    );
                    Ok(Outcome::Healthy)
                }
            };
            if matches!(outcome, Ok(Outcome::Broken)) {
                *lease.guard = None;
            }
            lease.finished = outcome.is_ok();
            if sink.flush().await.is_err() {
                warn!("sidecar went away before the answer was sent");
            }
            session.touch();
        };
        Self { fut: Some(Box::pin(fut)), rx }
    }

    /// Advances the command and returns its next chunk; `None` once it is finished and drained.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(fut) = &mut self.fut
            && fut.as_mut().poll(cx).is_ready()
        {
            self.fut = None;
        }
        self.rx.poll_recv(cx)
    }

    /// True once the command has finished (its chunks may still be queued).
    pub fn is_finished(&self) -> bool {
        self.fut.is_none()
    }

    /// Takes every queued chunk of a finished command into one buffer.
    pub fn drain_into(&mut self, buf: &mut BytesMut) {
        while let Ok(chunk) = self.rx.try_recv() {
            buf.extend_from_slice(&chunk);
        }
    }
}

/// Runs `work`, sending a heartbeat frame every `every` while it has not finished.
async fn with_heartbeats<T>(
    work: impl Future<Output = T>,
    tx: &mpsc::Sender<Bytes>,
    every: Duration,
) -> T {
    tokio::pin!(work);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = ticker.tick() => {
                let mut hb = BytesMut::new();
                encode_heartbeat(&mut hb);
                // A full channel already tells the proxy that data flows.
                drop(tx.try_send(hb.freeze()));
            }
        }
    }
}
