//! The client of the transport's HTTP API. [`TunnelClient`] knows where the transport is;
//! each client connection gets its own [`TunnelConn`] (one keep-alive HTTP connection), and
//! every non-sqltunnel answer (a proxy's HTML error page…) becomes a clear error.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::wire::{
    BodyEncoding, FRAMES_CONTENT_TYPE, FrameDecoder, LoginAs, RESUMABLE_FROM, StepHead, StepKind,
    StreamDecompressor,
};

use crate::Error;

mod answer;
mod carrier;
mod connections;
mod control;
mod credential;
mod endpoint;
mod send;

pub(crate) use credential::jwt_claims;
pub use credential::{Credential, TokenCommand};

pub use connections::{other_version, refuses_streams};
use endpoint::Endpoint;
pub(crate) use endpoint::is_loopback;
pub use endpoint::{Target, TunnelClient};

/// Largest error or control body read from the transport.
const MAX_CONTROL_BODY: usize = 64 * 1024;

/// The first pause before a session is opened again after its connection broke (doubled
/// each time, six tries in all).
const OPEN_PAUSE: Duration = Duration::from_millis(50);

/// Heartbeat intervals of silence after which the transport is taken for dead.
const SILENT_HEARTBEATS: u64 = 3;

/// The shortest silence limit, whatever the heartbeat (a loaded host may pause that long).
const MIN_SILENCE_LIMIT_MS: u64 = 1_000;

impl TunnelClient {
    /// A new (not yet connected) HTTP connection for one client session. Every request it
    /// sends carries `affinity`, so a hashing proxy keeps them all on one transport.
    pub fn connection(&self, affinity: &str) -> TunnelConn {
        self.connection_as(affinity, self.authorization())
    }

    /// [`Self::connection`] with the `Authorization` a session was opened with: a session
    /// answers only the token that opened it, even after the token is changed by a reload.
    pub fn connection_as(&self, affinity: &str, authorization: Credential) -> TunnelConn {
        let endpoint = self.0.clone();
        let affinity = Arc::from(affinity);
        let steps = Steps::of("");
        TunnelConn { endpoint, http: None, affinity, authorization, steps }
    }
}

/// One client session's HTTP connection to the transport.
#[derive(Debug)]
pub struct TunnelConn {
    endpoint: Arc<Endpoint>,
    http: Option<carrier::Connection>,
    /// Sent with every request (a hashing proxy routes by it); shared, not copied, each time.
    affinity: Arc<str>,
    authorization: Credential,
    /// The session of the last step, and its number.
    steps: Steps,
}

/// A session's steps: its id and the number of its last step.
#[derive(Debug)]
struct Steps {
    session: Arc<str>,
    number: u64,
    /// The most the transport said it holds of the last step's body (a resumable upload).
    uploaded: usize,
}

impl Steps {
    fn of(session: &str) -> Self {
        Self { session: session.into(), number: 0, uploaded: 0 }
    }
}

/// A step to send to the transport, and how.
#[derive(Clone, Copy)]
struct Outgoing<'a> {
    head: &'a StepHead,
    body: &'a [u8],
    /// Connections tried: a second when a kept-alive one turns out closed.
    tries: usize,
    /// A resumable upload (`common::wire::UploadRange`): `body` is the step's whole body.
    upload: Option<&'a [u8]>,
    /// Where an upload's request starts in it (`None`: an empty probe).
    upload_from: Option<usize>,
}

impl<'a> Outgoing<'a> {
    /// A control step (tried again on a fresh connection when a kept-alive one was closed).
    fn control(head: &'a StepHead, body: &'a [u8]) -> Self {
        Self { head, body, tries: 2, upload: None, upload_from: None }
    }
}

/// A session's step, kept to be sent again if its connection breaks. (Its `Debug` shows the
/// body's length only: a login's holds a password.)
struct Pending {
    head: StepHead,
    body: bytes::Bytes,
    /// Sent as a resumable upload (`common::wire::UploadRange`).
    upload: bool,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = self.body.len();
        f.debug_struct("Pending").field("head", &self.head).field("body_len", &body).finish()
    }
}

impl Pending {
    /// Its session's id.
    fn session(&self) -> &str {
        self.head.session.as_deref().unwrap_or_default()
    }

    /// The step with `head` (its own, or one that says where its answer resumes); tried once
    /// (a broken connection is the resume's to retry, saying how much of the answer arrived).
    fn outgoing<'a>(&'a self, head: &'a StepHead) -> Outgoing<'a> {
        Outgoing {
            head,
            body: &self.body,
            tries: 1,
            upload: self.upload.then_some(&self.body[..]),
            upload_from: Some(0),
        }
    }
}

impl TunnelConn {
    /// A step of `kind` (of `session`), taking zstd answers when the sidecar does.
    fn step_head(&self, kind: StepKind, session: Option<&str>) -> StepHead {
        let mut head = StepHead::new(kind);
        head.session = session.map(str::to_owned);
        head.accept_zstd = self.endpoint.compress;
        head
    }

    /// How many commands with an answer one command request may carry: the client's
    /// pipelined commands go together (1 until a session was opened, or for a transport that
    /// takes one at a time).
    pub fn pipeline_limit(&self) -> usize {
        self.endpoint.pipeline.load(Ordering::Relaxed)
    }

    /// Where the `Authorization` its requests carry comes from.
    pub fn authorization(&self) -> Credential {
        self.authorization.clone()
    }

    /// Sends one relayed step of a session: a login packet, client packets for a command, or a
    /// piece of a LOAD DATA LOCAL file. The answer is read frame by frame.
    pub async fn relay(
        &mut self,
        session: &str,
        step: RelayStep<'_>,
    ) -> Result<FrameStream<'_>, Error> {
        if *self.steps.session != *session {
            self.steps = Steps::of(session);
        }
        self.steps.number += 1;
        self.steps.uploaded = 0;
        // A command's or a file piece's body may be resumed (login steps are small, and read
        // whole by the transport).
        let resumable = matches!(step, RelayStep::Command(_) | RelayStep::File { .. });
        let (kind, body) = match step {
            RelayStep::Login(payload) => (StepKind::Login, payload),
            RelayStep::LoginAs(login) => (StepKind::LoginAs, Bytes::from(control::to_json(login))),
            RelayStep::Command(packets) => (StepKind::Command, packets),
            RelayStep::File { packets, last } => (StepKind::FilePiece { last }, packets),
        };
        let mut head = self.step_head(kind, Some(session));
        head.step = Some(self.steps.number);
        let body = match self.compressed(&body) {
            Some(packed) => {
                head.encoding = BodyEncoding::Zstd { decoded: body.len() as u64 };
                packed
            }
            None => body,
        };
        let upload = resumable
            && body.len() >= RESUMABLE_FROM
            && self.endpoint.upload_part.load(Ordering::Relaxed) > 0;
        let pending = Pending { head, body, upload };
        // A broken connection (a stale kept-alive one too) is the resume's to send again; so
        // is a proxy's 502, whose own connection to the transport broke (its kept-alive one
        // closed by a transport that was taken over, or restarted): the step's number makes
        // sending it again safe.
        let sent = self.send_step(pending.outgoing(&pending.head), false).await;
        let mut head = match sent {
            Ok(head) => head,
            Err(
                Error::TransportUnreachable { .. }
                | Error::ConnectionBroken { .. }
                | Error::TransportSilent { .. },
            ) => Box::pin(self.resend(&pending, 0)).await?,
            Err(Error::BadAnswer { status, .. }) if status.starts_with("502") => {
                Box::pin(self.resend(&pending, 0)).await?
            }
            // The session was still busy (a turn finishing, a take-over moving it): the step
            // never began, and is sent again until its session takes it.
            Err(Error::SessionBusy) => Box::pin(self.resend(&pending, 0)).await?,
            Err(e) => return Err(e),
        };
        if head.status == 204 {
            head.content_type = FRAMES_CONTENT_TYPE.into();
        }
        let mut frames = self.frames(head)?;
        frames.pending = Some(pending);
        Ok(frames)
    }
}

impl Drop for TunnelConn {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// True for an error of a connection that worked and broke (a reset, a close mid-answer),
/// which another connection may not meet; not for one the transport or a proxy refused (a
/// TLS alert, garbage), which it would.
fn is_break(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(e.kind(), BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof)
}

/// The frames of one command's answer, decoded as the body arrives.
#[derive(Debug)]
pub struct FrameStream<'a> {
    tunnel: &'a mut TunnelConn,
    decoder: FrameDecoder,
    done: bool,
    /// The step's request, to send again if the connection breaks mid-answer.
    pending: Option<Pending>,
    /// The answer received so far: its length and CRC (hashed when a resume needs it).
    received: common::wire::HeldDigest,
    /// The turn frame was read (or no frames come: a 204).
    ended: bool,
    /// The body's decompressor, when it is compressed.
    inflate: Option<StreamDecompressor>,
}

/// One step of a relayed conversation, sent as client packets (kept, without a copy, to be
/// sent again if its connection breaks).
#[derive(Debug, Clone)]
pub enum RelayStep<'a> {
    /// A login packet's payload (the handshake response or an auth answer).
    Login(Bytes),
    /// A login the sidecar checked itself: the transport logs in with these credentials.
    LoginAs(&'a LoginAs),
    /// Client packets, headers included: one command, or those the client pipelined, and
    /// commands without an answer among them.
    Command(Bytes),
    /// Packets of a LOAD DATA LOCAL file; `last` when they end with the empty packet.
    File {
        /// The packets, headers included.
        packets: Bytes,
        /// The file ends here.
        last: bool,
    },
}
