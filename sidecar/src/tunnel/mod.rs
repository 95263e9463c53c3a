//! The client of the transport's HTTP API. [`TunnelClient`] knows where the transport is;
//! each client connection gets its own [`TunnelConn`] (one keep-alive HTTP connection), and
//! every non-sqltunnel answer (a proxy's HTML error page…) becomes a clear error.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::wire::{
    AFFINITY_HEADER, ApiError, ApiErrorKind, DECODED_LENGTH_HEADER, FRAMES_CONTENT_TYPE,
    FrameDecoder, INFILE_HEADER, JSON_CONTENT_TYPE, LoginAs, MAX_STREAM_BODY, PACKETS_CONTENT_TYPE,
    Route, SESSION_HEADER, STEP_HEADER, StreamDecompressor, ZSTD,
};

use crate::Error;
use crate::error::Broken;
use crate::http::{HttpConn, ResponseHead};

mod answer;
mod carrier;
mod control;
mod credential;
mod endpoint;
mod resend;

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
}

impl Steps {
    fn of(session: &str) -> Self {
        let command_path = Route::Command(session.to_owned()).path().into();
        Self { session: session.into(), number: 0, command_path }
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
}

impl<'a> Outgoing<'a> {
    /// A JSON control request (tried again on a fresh connection when a kept-alive one was
    /// closed).
    fn control(method: &'a str, path: &'a str, session: Option<&'a str>, body: &'a [u8]) -> Self {
        let content_type = JSON_CONTENT_TYPE;
        Self { method, path, content_type, session, body, extra_headers: &[], tries: 2 }
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

    fn unreachable(&self, e: &std::io::Error) -> Error {
        Error::TransportUnreachable { url: self.endpoint.url.clone(), reason: e.to_string() }
    }

    /// Sends one request; returns the head and the connection once a 2xx head has been read.
    /// A token from `token_command` that the transport refused is asked for again, and the
    /// request sent once more (a refused request ran nothing).
    async fn send(
        &mut self,
        req: Outgoing<'_>,
    ) -> Result<(Box<ResponseHead>, &mut HttpConn), Error> {
        let authorization = self.authorization.header().await?;
        // Pinned where it is made: awaited as it is returned, it would be moved (2.4 KB).
        let sent = std::pin::pin!(self.send_once(req, &authorization)).await;
        let head = match sent {
            Err(Error::TokenRefused { url, reason }) => {
                if !self.authorization.refused(&authorization).await {
                    return Err(Error::TokenRefused { url, reason });
                }
                let authorization = self.authorization.header().await?;
                Box::pin(self.send_once(req, &authorization)).await?
            }
            sent => sent?,
        };
        let conn = self.http.as_mut().ok_or(Broken::ConnectionLost)?;
        Ok((head, conn))
    }

    /// [`Self::send`] with this `Authorization`, once; the connection is left in `self.http`.
    async fn send_once(
        &mut self,
        req: Outgoing<'_>,
        authorization: &str,
    ) -> Result<Box<ResponseHead>, Error> {
        let Outgoing { method, path, content_type, session, body, extra_headers, tries } = req;
        let ep = self.endpoint.clone();
        let affinity = self.affinity.clone();
        let mut head = ep.target().head(method, path);
        head.headers.extend([
            // Lower case, as the stream's message codes are found first.
            ("authorization", authorization),
            ("content-type", content_type),
            (AFFINITY_HEADER, &*affinity),
        ]);
        if let Some(id) = session {
            head.headers.push((SESSION_HEADER, id));
        }
        if ep.compress {
            head.headers.push(("accept-encoding", ZSTD));
        }
        head.headers.extend(extra_headers.iter().map(|(name, value)| (*name, value.as_str())));
        // A body too large for a stream message travels as a plain request: the stream waits
        // in the idle pool for the next session.
        let plain = body.len() > MAX_STREAM_BODY;
        if plain && self.http.as_ref().is_some_and(HttpConn::is_stream) {
            self.give_back();
        }
        if self.http.is_none() {
            self.http = self.idle_connection(plain);
        }
        for _attempt in 0..tries {
            let reused = self.http.as_ref().is_some_and(HttpConn::reusable);
            if !reused {
                // Rare paths are boxed: a command's futures stay small (they are moved and
                // zeroed at each command).
                self.http = Some(Box::pin(self.open_connection(plain, authorization)).await?);
            }
            let Some(conn) = self.http.as_mut() else { break };
            conn.set_silence_limit(Duration::from_millis(
                ep.silence_limit_ms.load(Ordering::Relaxed),
            ));
            match conn.send(&head, body).await {
                Ok(response) if (200..300).contains(&response.status) => return Ok(response),
                Ok(response) => {
                    let err = Box::pin(self.error_from(&response, body.len())).await;
                    return Err(err);
                }
                // A kept-alive connection the other side had already closed: try a fresh one.
                Err(e) if reused && e.kind() == std::io::ErrorKind::ConnectionAborted => {
                    self.http = None
                }
                Err(e) => {
                    self.http = None;
                    return Err(self.failed(&e));
                }
            }
        }
        Err(self.unreachable(&std::io::Error::other("the connection kept closing")))
    }

    /// What a connection's failure is: silence, a break (another connection may not meet
    /// it), or an unreachable transport.
    fn failed(&self, e: &std::io::Error) -> Error {
        let url = self.endpoint.url.clone();
        match e.kind() {
            std::io::ErrorKind::TimedOut => Error::TransportSilent { url, reason: e.to_string() },
            _ if is_break(e) => Error::ConnectionBroken { url, reason: e.to_string() },
            _ => self.unreachable(e),
        }
    }

    /// Turns a non-2xx answer into an error, whatever produced it.
    async fn error_from(&mut self, response: &ResponseHead, size: usize) -> Error {
        let body = match self.http.as_mut() {
            Some(conn) => conn.body_to_end(MAX_CONTROL_BODY).await.unwrap_or_default(),
            None => bytes::Bytes::new(),
        };
        self.error_of(response, &body, size)
    }

    /// The error a non-2xx answer with `body` means (`size`: the request body's length).
    fn error_of(&self, response: &ResponseHead, body: &[u8], size: usize) -> Error {
        let is_json = response.content_type.starts_with(JSON_CONTENT_TYPE);
        let api: Option<ApiError> = if is_json { serde_json::from_slice(body).ok() } else { None };
        let url = self.endpoint.url.clone();
        let status = response.status_line();
        match (response.status, api) {
            (401, api) => {
                let reason = api.map_or_else(|| "no reason given".into(), |a| a.message);
                Error::TokenRefused { url, reason }
            }
            (413, _) => Error::RequestTooLarge { url, size },
            (_, Some(ApiError { mysql: Some(mysql), .. })) => Error::Upstream(mysql),
            (_, Some(ApiError { error: ApiErrorKind::SessionNotFound, .. })) => Error::SessionLost,
            (_, Some(ApiError { error: ApiErrorKind::SessionBusy, .. })) => Error::SessionBusy,
            (_, Some(ApiError { error: ApiErrorKind::StepRefused, message, .. })) => {
                Error::NotResumed(message)
            }
            (_, Some(api)) => Error::BadAnswer { url, status, detail: format!(": {}", api.message) },
            (_, None) => Error::BadAnswer {
                url,
                status,
                detail: " which is not a sqltunnel answer (a proxy error page?): is the transport running and the URL right?".into(),
            },
        }
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
        let mut content_type = PACKETS_CONTENT_TYPE;
        let other_path = |route: Route| Arc::<str>::from(route.path());
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
        let pending = Pending { extra, path, content_type, session, body };
        // A broken connection (a stale kept-alive one too) is the resume's to send again.
        let sent = self.send(pending.outgoing(&pending.extra)).await.map(|(head, _)| head);
        let mut head = match sent {
            Ok(head) => head,
            Err(
                Error::TransportUnreachable { .. }
                | Error::ConnectionBroken { .. }
                | Error::TransportSilent { .. },
            ) => Box::pin(self.resend(&pending, 0)).await?,
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
