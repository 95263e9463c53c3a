//! The HTTP client to the transport: pooled keep-alive connections, one request per command,
//! and every non-sqltunnel answer (a proxy's HTML error page…) turned into a clear error.

use std::time::Duration;

use bytes::Bytes;
use common::wire::{
    ApiError, ApiErrorKind, COMMAND_CONTENT_TYPE, DEFAULT_MAX_FRAME, FRAMES_CONTENT_TYPE, Frame,
    FrameDecoder, JSON_CONTENT_TYPE, OpenSession, SESSION_HEADER, SessionOpened, UpstreamInfo,
};
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::Error;
use crate::config::TransportLink;

/// Largest error body read from a non-2xx answer.
const MAX_ERROR_BODY: usize = 16 * 1024;

/// A handle to the transport; cheap to clone.
#[derive(Debug, Clone)]
pub struct TunnelClient {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    auth: http::HeaderValue,
}

impl TunnelClient {
    /// A client for the configured transport.
    pub fn new(link: &TransportLink) -> Result<Self, Error> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(link.connect_timeout));
        connector.set_keepalive(Some(Duration::from_secs(30)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        let base =
            if link.url.ends_with('/') { link.url.clone() } else { format!("{}/", link.url) };
        let token = link.token.clone().unwrap_or_default();
        let mut auth =
            http::HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                common::Error::ConfigInvalid(
                    "transport.token has characters not allowed in a header".into(),
                )
            })?;
        auth.set_sensitive(true);
        Ok(Self { client, base, auth })
    }

    /// The base URL, for messages.
    pub fn url(&self) -> &str {
        &self.base
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        session: Option<&str>,
        body: Bytes,
    ) -> Result<Response<Incoming>, Error> {
        let size = body.len();
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(AUTHORIZATION, self.auth.clone())
            .header(CONTENT_TYPE, content_type);
        if let Some(id) = session {
            req = req.header(SESSION_HEADER, id).header(common::wire::AFFINITY_HEADER, id);
        }
        let req = req.body(Full::new(body)).map_err(|e| self.unreachable(e.to_string()))?;
        let response = self
            .client
            .request(req)
            .await
            .map_err(|e| self.unreachable(describe_client_error(&e)))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.error_from(response, size).await)
    }

    fn unreachable(&self, reason: String) -> Error {
        Error::TransportUnreachable { url: self.base.clone(), reason }
    }

    /// Turns a non-2xx answer into an error, whatever produced it.
    async fn error_from(&self, response: Response<Incoming>, size: usize) -> Error {
        let status = response.status();
        let is_json = content_type(&response).starts_with(JSON_CONTENT_TYPE);
        let body = Limited::new(response.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let api: Option<ApiError> = if is_json { serde_json::from_slice(&body).ok() } else { None };
        let url = self.base.clone();
        match (status, api) {
            (StatusCode::UNAUTHORIZED, _) => Error::TokenRefused { url },
            (StatusCode::PAYLOAD_TOO_LARGE, _) => Error::RequestTooLarge { url, size },
            (_, Some(ApiError { mysql: Some(mysql), .. })) => Error::Upstream(mysql),
            (_, Some(ApiError { error: ApiErrorKind::SessionNotFound, .. })) => Error::SessionLost,
            (_, Some(api)) => Error::BadAnswer { url, status: status_line(status), detail: format!(": {}", api.message) },
            (_, None) => Error::BadAnswer {
                url,
                status: status_line(status),
                detail: " which is not a sqltunnel answer (a proxy error page?): is the transport running and the URL right?".into(),
            },
        }
    }

    /// Versions of the upstreams the transport serves.
    pub async fn upstreams(&self) -> Result<Vec<UpstreamInfo>, Error> {
        let response =
            self.send(Method::GET, "v1/upstreams", JSON_CONTENT_TYPE, None, Bytes::new()).await?;
        self.json(response).await
    }

    /// Opens an upstream session.
    pub async fn open_session(&self, req: &OpenSession) -> Result<SessionOpened, Error> {
        let body = serde_json::to_vec(req).map_err(|e| self.unreachable(e.to_string()))?;
        let response = self
            .send(Method::POST, "v1/sessions", JSON_CONTENT_TYPE, None, Bytes::from(body))
            .await?;
        self.json(response).await
    }

    /// Sends one command packet payload; the answer is read frame by frame.
    pub async fn command(&self, session: &str, payload: Bytes) -> Result<FrameStream, Error> {
        let path = format!("v1/sessions/{session}/command");
        let response =
            self.send(Method::POST, &path, COMMAND_CONTENT_TYPE, Some(session), payload).await?;
        if content_type(&response) != FRAMES_CONTENT_TYPE {
            return Err(Error::BadAnswer {
                url: self.base.clone(),
                status: status_line(response.status()),
                detail: " with an unexpected content type".into(),
            });
        }
        Ok(FrameStream {
            body: response.into_body(),
            decoder: FrameDecoder::new(DEFAULT_MAX_FRAME),
            done: false,
        })
    }

    /// Closes a session (COM_QUIT); errors are not interesting to anyone.
    pub async fn close_session(&self, session: &str) {
        let path = format!("v1/sessions/{session}");
        if let Err(e) =
            self.send(Method::DELETE, &path, JSON_CONTENT_TYPE, Some(session), Bytes::new()).await
        {
            tracing::debug!(error = %e, "closing the session failed");
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        response: Response<Incoming>,
    ) -> Result<T, Error> {
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_ERROR_BODY * 4)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| Error::StreamBroken(e.to_string()))?;
        serde_json::from_slice(&body).map_err(|e| Error::BadAnswer {
            url: self.base.clone(),
            status: status_line(status),
            detail: format!(" with a body that is not valid JSON ({e})"),
        })
    }
}

/// The frames of one command's answer, decoded as the body arrives.
#[derive(Debug)]
pub struct FrameStream {
    body: Incoming,
    decoder: FrameDecoder,
    done: bool,
}

impl FrameStream {
    /// The next frame; `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            if let Some(frame) =
                self.decoder.next_frame().map_err(|e| Error::StreamBroken(e.to_string()))?
            {
                return Ok(Some(frame));
            }
            if self.done {
                return if self.decoder.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::StreamBroken("answer ended inside a frame".into()))
                };
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.extend(&data);
                    }
                }
                Some(Err(e)) => return Err(Error::StreamBroken(e.to_string())),
                None => self.done = true,
            }
        }
    }
}

fn content_type(response: &Response<Incoming>) -> &str {
    response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn status_line(status: StatusCode) -> String {
    format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""))
}

/// The innermost cause of a client error ("connection refused" rather than "client error").
fn describe_client_error(e: &hyper_util::client::legacy::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    let mut last = e.to_string();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}
