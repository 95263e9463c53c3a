//! The HTTP carrier's transport half: a request is routed, its token checked (and a client
//! that keeps guessing slowed down), and then it is a step for [`crate::run`] (its head read
//! from its path and headers), or one of the endpoints only HTTP has: health, readiness, the
//! metrics and the upgrade to a stream.

use std::net::SocketAddr;
use std::sync::Arc;

use common::wire::{Route, STREAM_PROTOCOL, STREAM_VERSIONS_HEADER, StepHead, header_number};
use http::header::{AUTHORIZATION, CONTENT_LENGTH};
use http::{HeaderValue, Request, Response, StatusCode};

use crate::Error;
use crate::client_addr::client_ip;
use crate::identity::{Caller, HeldCaller, Identities, LastCaller, Refusal};
use crate::refusals::Answer;
use crate::reply::ResponseBody;
use crate::reply::{Reply, Then, error_response, http_response, json, text};
use crate::request_body::RequestBody;
use crate::shares::Share;
use crate::state::AppState;
use crate::steps::{self, Step};
use crate::{run, stream};

/// Answers one HTTP request of a connection whose last accepted token is in `last`, calling
/// `shown` once its token is accepted (the connection's place is then its own; false: it gave
/// its place to a newer one a moment before); an error is no answer: the connection closes
/// unanswered (see [`http_response`]).
pub async fn handle(
    state: Arc<AppState>,
    peer: SocketAddr,
    req: Request<RequestBody>,
    (last, shown): (&LastCaller, impl FnOnce(Option<&Caller>) -> bool),
) -> Result<Response<ResponseBody>, Error> {
    let route = Route::parse(req.method().as_str(), req.uri().path());
    let authorization = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
    match route {
        // A request without a valid token gives back a place its connection held as its own
        // (`shown(None)`): a token shown once, then health checks, cannot keep it.
        Route::Health => {
            shown(None);
            return http_response(json(StatusCode::OK, &serde_json::json!({ "status": "ok" })));
        }
        // Without a token, only the status; a token presented is checked as on any route.
        Route::Ready if authorization.is_none() => {
            shown(None);
            return http_response(ready(&state, None));
        }
        _ => {}
    }
    // One view of the identities for the request: a stream holds its caller under the same
    // identities that accepted its token (a reload meanwhile makes its first step check again).
    let identities = state.identities();
    let caller = match identities.authorize_on(authorization, last).await {
        Ok(caller) => caller,
        Err(refusal) => {
            shown(None);
            return http_response(refused(&state, peer, req.headers(), refusal).await);
        }
    };
    if !shown(Some(&caller)) {
        return Err(Error::Evicted);
    }
    if route == Route::Ready {
        return http_response(ready(&state, Some(&caller)));
    }
    state.churn.note(req.version(), req.headers(), &state.metrics.requests_closing);
    // A body larger than any the transport reads is refused at once, before it is sent (a
    // client that asked `Expect: 100-continue` never sends it).
    let limit = state.config().max_request_bytes;
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| header_number(v.as_bytes()));
    if declared.is_some_and(|n| n > limit as u64) {
        return http_response(run::answer_of(&state, Err(Error::TooLarge { limit })));
    }
    let (parts, body) = req.into_parts();
    let values = |name: &'static str| parts.headers.get_all(name).iter().map(HeaderValue::as_bytes);
    let head = match StepHead::from_http(&route, parts.uri.query(), values) {
        Ok(Some(head)) => head,
        Ok(None) => {
            let req = Request::from_parts(parts, body);
            return match not_a_step(&state, route, req, (&identities, &caller)) {
                Ok(NotAStep::Upgrade(response)) => Ok(response),
                Ok(NotAStep::Answer(answer)) => http_response(answer),
                Err(Error::StreamVersion) => {
                    let mut response =
                        http_response(run::answer_of(&state, Err(Error::StreamVersion)))?;
                    let spoken = HeaderValue::from_static(STREAM_PROTOCOL);
                    response.headers_mut().insert(STREAM_VERSIONS_HEADER, spoken);
                    Ok(response)
                }
                Err(e) => http_response(run::answer_of(&state, Err(e))),
            };
        }
        Err(e) => {
            return http_response(run::answer_of(&state, Err(Error::BadRequest(e.to_string()))));
        }
    };
    http_response(run::run(&state, &caller, Step { head, body: steps::Body::Streamed(body) }).await)
}

/// What answers a request that is not a step.
enum NotAStep {
    /// The switch to a stream (HTTP only: `stream::accept`'s).
    Upgrade(Response<ResponseBody>),
    /// An answer.
    Answer(Reply),
}

/// Answers an authorized request that is not a step: the upgrade to a stream, the metrics,
/// or one of no endpoint.
fn not_a_step(
    state: &AppState,
    route: Route,
    req: Request<RequestBody>,
    (identities, caller): (&Arc<Identities>, &Arc<Caller>),
) -> Result<NotAStep, Error> {
    match route {
        Route::Stream => {
            state.refuse_if_draining()?;
            let share = state.take_share(caller, Share::Streams, 1)?;
            let authorization = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
            let held = HeldCaller::new(identities, authorization, caller.clone());
            stream::accept(req, share, held).map(NotAStep::Upgrade)
        }
        Route::Metrics => Ok(NotAStep::Answer(metrics(state))),
        Route::MethodNotAllowed => Err(Error::MethodNotAllowed),
        _ => Err(Error::NotFound),
    }
}

/// The answer to a request whose token was refused: counted, logged per client, and slowed
/// down for a client that keeps guessing, within bounds that keep the door open (see
/// [`crate::refusals`]); its connection is closed.
async fn refused(
    state: &AppState,
    peer: SocketAddr,
    headers: &http::HeaderMap,
    refusal: Refusal,
) -> Reply {
    state.metrics.unauthorized.inc();
    let mut error = Error::Unauthorized(refusal);
    if refusal.is_suspicious() {
        let trusted = &state.config().trusted_proxies;
        let client = client_ip(peer.ip(), headers, trusted);
        match state.refusals.refuse(client) {
            Answer::Now => {}
            Answer::At(at, held) => {
                tokio::time::sleep_until(at.into()).await;
                drop(held);
            }
            Answer::Throttled => {
                state.metrics.refusals_throttled.inc();
                error = Error::Throttled;
            }
        }
    }
    let mut response = error_response(&error);
    response.then = Then::Close;
    response
}

/// The metrics exposition (also served on `metrics_listen`, without a token).
pub fn metrics(state: &AppState) -> Reply {
    let (_, upstreams) = state.readiness.report(&state.config().upstreams);
    let sessions = (state.sessions.len(), state.sessions.parked_count());
    let body = state.metrics.render(sessions, state.resume_budget.used(), &upstreams);
    text(body, crate::metrics::CONTENT_TYPE)
}

/// Readiness: 200 when every upstream can be reached (as last probed or dialed), else 503;
/// 503 too once shutdown has begun. Without a token only the status is said: the upstreams'
/// names and errors are for a caller with a token (or `metrics_listen`), who sees those it may
/// reach, and who the transport took it for.
fn ready(state: &AppState, caller: Option<&Caller>) -> Reply {
    let (mut all, mut upstreams) = state.readiness.report(&state.config().upstreams);
    if let Some(caller) = caller {
        upstreams.retain(|u| caller.access.allows(&u.name));
        all = upstreams.iter().all(|u| u.ready);
    }
    let draining = state.draining.is_cancelled();
    let (status, word) = match (all, draining) {
        (_, true) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
        (true, false) => (StatusCode::OK, "ready"),
        (false, false) => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
    };
    let Some(caller) = caller else {
        return json(status, &serde_json::json!({ "status": word }));
    };
    let parked = state.sessions.parked_count();
    let body = serde_json::json!({
        "status": word,
        "identity": &*caller.name,
        "upstreams": upstreams,
        "parked_sessions": parked,
    });
    json(status, &body)
}
