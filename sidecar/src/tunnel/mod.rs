//! The client of the transport's HTTP API. [`TunnelClient`] knows where the transport is;
//! each client connection gets its own [`TunnelConn`] (one keep-alive HTTP connection), and
//! every non-sqltunnel answer (a proxy's HTML error page…) becomes a clear error.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::wire::{
    DECODED_LENGTH_HEADER, FRAMES_CONTENT_TYPE, FrameDecoder, INFILE_HEADER, JSON_CONTENT_TYPE,
    LoginAs, PACKETS_CONTENT_TYPE, RESUMABLE_FROM, Route, STEP_HEADER, StreamDecompressor, ZSTD,
};

use crate::Error;
use crate::http::HttpConn;

mod answer;
mod carrier;
mod control;
mod credential;
mod endpoint;
mod resend;
mod send;

pub(crate) use credential::jwt_claims;
pub use credential::{Credential, TokenCommand};

pub use carrier::refuses_streams;
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
    http: Option<HttpConn>,
    /// Sent with every request (a hashing proxy routes by it); shared, not copied, each time.
    affinity: Arc<str>,
    authorization: Credential,
    /// The session of the last step, and its number.
    steps: Steps,
}

/// A session's steps: its id, the number of its last step, and the path of its commands, made
/// once for the session (shared, not copied, by each step kept for a resend).
#[derive(Debug)]
struct Steps {
    session: Arc<str>,
    number: u64,
    command_path: Arc<str>,
    /// The most the transport said it holds of the last step's body (a resumable upload).
    uploaded: usize,
}

impl Steps {
    fn of(session: &str) -> Self {
        let command_path = Route::Command(session.to_owned()).path().into();
        Self { session: session.into(), number: 0, command_path, uploaded: 0 }
    }
}

/// A request to the transport.
#[derive(Clone, Copy)]
struct Outgoing<'a> {
    method: &'a str,
    path: &'a str,
    content_type: &'a str,
    session: Option<&'a str>,
    body: &'a [u8],
    /// Extra headers.
    extra_headers: &'a [(&'static str, String)],
    /// Connections tried: a second when a kept-alive one turns out closed.
    tries: usize,
    /// A resumable upload (`common::wire::UploadRange`): `body` is the step's whole body.
    upload: Option<&'a [u8]>,
    /// Where an upload's request starts in it (`None`: an empty probe).
    upload_from: Option<usize>,
}

impl<'a> Outgoing<'a> {
    /// A JSON control request (tried again on a fresh connection when a kept-alive one was
    /// closed).
    fn control(method: &'a str, path: &'a str, session: Option<&'a str>, body: &'a [u8]) -> Self {
        let content_type = JSON_CONTENT_TYPE;
        let (upload, upload_from) = (None, None);
        Self {
            method,
            path,
            content_type,
            session,
            body,
            extra_headers: &[],
            tries: 2,
            upload,
            upload_from,
        }
    }
}

/// A step's request, kept to be sent again if its connection breaks.
#[derive(Debug)]
struct Pending {
    path: Arc<str>,
    content_type: &'static str,
    session: Arc<str>,
    body: bytes::Bytes,
    /// Extra headers, the step number's included.
    extra: Vec<(&'static str, String)>,
    /// Sent as a resumable upload (`common::wire::UploadRange`).
    upload: bool,
}

impl Pending {
    /// The request, with `extra` headers; tried once (a broken connection is the resume's to
    /// retry, saying how much of the answer arrived).
    fn outgoing<'a>(&'a self, extra: &'a [(&'static str, String)]) -> Outgoing<'a> {
        Outgoing {
            method: "POST",
            path: &self.path,
            content_type: self.content_type,
            session: Some(&self.session),
            body: &self.body,
            extra_headers: extra,
            tries: 1,
            upload: self.upload.then_some(&self.body[..]),
            upload_from: Some(0),
        }
    }
}

impl TunnelConn {
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
        let mut content_type = PACKETS_CONTENT_TYPE;
        let other_path = |route: Route| Arc::<str>::from(route.path());
        // A command's or a file piece's body may be resumed (login steps are small, and read
        // whole by the transport).
        let resumable = matches!(step, RelayStep::Command(_) | RelayStep::File { .. });
        let (path, body, mut extra) = match step {
            RelayStep::Login(payload) => {
                (other_path(Route::Login(session.into())), payload, vec![])
            }
            RelayStep::LoginAs(login) => {
                let json = control::to_json(login);
                content_type = JSON_CONTENT_TYPE;
                (other_path(Route::Login(session.into())), Bytes::from(json), vec![])
            }
            RelayStep::Command(packets) => (self.steps.command_path.clone(), packets, vec![]),
            RelayStep::File { packets, last } => (
                other_path(Route::Infile(session.into())),
                packets,
                vec![(INFILE_HEADER, if last { "end" } else { "more" }.to_owned())],
            ),
        };
        extra.push((STEP_HEADER, self.steps.number.to_string()));
        let body = match self.compressed(&body) {
            Some(packed) => {
                extra.push(("content-encoding", ZSTD.to_owned()));
                extra.push((DECODED_LENGTH_HEADER, body.len().to_string()));
                packed
            }
            None => body,
        };
        let session = self.steps.session.clone();
        let upload = resumable
            && body.len() >= RESUMABLE_FROM
            && self.endpoint.upload_part.load(Ordering::Relaxed) > 0;
        let pending = Pending { extra, path, content_type, session, body, upload };
        // A broken connection (a stale kept-alive one too) is the resume's to send again; so
        // is a proxy's 502, whose own connection to the transport broke (its kept-alive one
        // closed by a transport that was taken over, or restarted): the step's number makes
        // sending it again safe.
        let sent = self.send_step(pending.outgoing(&pending.extra), false).await;
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
