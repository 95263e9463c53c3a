//! Unit tests of the stream carrier's message parsing and upgrade checks.

use super::*;
use http_body_util::Full;

fn upgrade_request() -> Request<RequestBody> {
    let mut req = Request::get("/v1/stream")
        .header(UPGRADE, "websocket")
        .header(CONNECTION, "keep-alive, Upgrade")
        .header(SEC_WEBSOCKET_VERSION, "13")
        .header(SEC_WEBSOCKET_PROTOCOL, STREAM_PROTOCOL)
        .header(SEC_WEBSOCKET_KEY, "dGhlIHNhbXBsZSBub25jZQ==")
        .body(Full::new(Bytes::new()).map_err(|never| match never {}).boxed())
        .expect("request");
    // What hyper leaves in an upgradable request (here: one that never upgrades).
    let pending = hyper::upgrade::on(Request::new(()));
    req.extensions_mut().insert(pending);
    req
}

/// A message made from a text head, as the sidecar makes them.
fn message(head: &[u8], body: &[u8]) -> Bytes {
    Bytes::from(common::wire::request_from_text(head, body).expect("a head"))
}

#[test]
fn a_repeated_path_is_routed_once_and_what_changes_is_read_anew() {
    let mut repeated = Repeated::default();
    let head = |method: &str, path: &str, step: &str| {
        message(
            format!("{method} {path} HTTP/1.1\r\nX-Tunnel-Step: {step}\r\n\r\n").as_bytes(),
            b"",
        )
    };
    let a = "/v1/sessions/aa/command";
    let b = "/v1/sessions/bb/command";
    for (method, path, step) in
        [("POST", a, "1"), ("POST", a, "2"), ("POST", b, "2"), ("DELETE", b, "3")]
    {
        let (route, req) =
            parse_request(head(method, path, step), &mut repeated).expect("a request");
        assert_eq!(route, Route::parse(method, path), "{method} {path}");
        assert_eq!(req.path(), path);
        assert_eq!(req.header(&crate::incoming::STEP), Some(step.as_bytes()));
    }
    let refused =
        parse_request(message(b"POST /v1/re\x7flay HTTP/1.1\r\n\r\n", b""), &mut repeated);
    assert!(matches!(refused, Err(Error::BadRequest(_))));
}

#[test]
fn an_upgrade_is_accepted_with_the_key_answered() {
    let response = accept(upgrade_request(), a_share()).expect("accepted");
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    // RFC 6455's own example key and answer.
    assert_eq!(response.headers()[SEC_WEBSOCKET_ACCEPT], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_eq!(response.headers()[SEC_WEBSOCKET_PROTOCOL], STREAM_PROTOCOL);
    assert!(response.extensions().get::<Upgrading>().is_some());
}

#[test]
fn what_is_not_an_upgrade_is_refused_with_426() {
    let strip = |name: http::HeaderName| {
        let mut req = upgrade_request();
        req.headers_mut().remove(name);
        req
    };
    for req in [
        strip(UPGRADE),
        strip(CONNECTION),
        strip(SEC_WEBSOCKET_KEY),
        strip(SEC_WEBSOCKET_PROTOCOL),
        strip(SEC_WEBSOCKET_VERSION),
    ] {
        let refused = accept(req, a_share()).expect_err("refused");
        assert_eq!(refused.to_api().0, StatusCode::UPGRADE_REQUIRED);
    }
    let mut inside = upgrade_request();
    inside.extensions_mut().remove::<OnUpgrade>();
    assert!(matches!(accept(inside, a_share()), Err(Error::UpgradeRequired(_))));
}

#[test]
fn a_lane_key_is_sixteen_hex_digits_or_none() {
    let key = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(LANE_HEADER, HeaderValue::from_str(value).expect("value"));
        lane_key(&headers)
    };
    assert_eq!(key("00000000000000ff"), Some(255));
    assert_eq!(key("FFFFFFFFFFFFFFFF"), Some(u64::MAX));
    for refused in ["ff", "+00000000000000f", "0x000000000000ff", "000000000000000g", ""] {
        assert_eq!(key(refused), None, "{refused:?}");
    }
    assert_eq!(lane_key(&HeaderMap::new()), None);
}

/// A place in an identity's streams, as `api.rs` takes one before `accept`.
fn a_share() -> crate::shares::Taken {
    let shares = std::sync::Arc::new(crate::shares::Shares::default());
    let id = crate::identity::IdentityId::named("tester");
    shares.take(&id, crate::shares::Share::Streams, 1, 1).expect("room")
}
