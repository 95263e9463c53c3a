//! Unit tests of the stream carrier's message parsing and upgrade checks.

use super::*;

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
fn a_message_is_a_request_head_and_its_body() {
    let message = message(
        b"POST /db/v1/sessions/ab12/command HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-Tunnel-Step: 7\r\nX-Other: o\r\n\r\n",
        b"abc",
    );
    let (route, req) = parse_request(message, &mut Repeated::default()).expect("a request");
    assert_eq!(route, Route::Command("ab12".into()));
    assert_eq!(req.method(), "POST");
    assert_eq!(req.uri().path(), "/db/v1/sessions/ab12/command");
    assert_eq!(req.headers()["x-tunnel-step"], "7");
    assert_eq!(req.headers()["x-other"], "o");
    let body = req.into_body().collect().now_or_never().expect("ready").expect("body");
    assert_eq!(body.to_bytes(), Bytes::from_static(b"abc"));
}

#[test]
fn what_repeats_on_a_stream_is_taken_again_and_what_changes_is_read_anew() {
    let mut repeated = Repeated::default();
    let head = |path: &str, step: &str, token: &[u8]| {
        let mut head = format!("POST {path} HTTP/1.1\r\nX-Tunnel-Step: {step}\r\n").into_bytes();
        head.extend_from_slice(b"Authorization: ");
        head.extend_from_slice(token);
        head.extend_from_slice(b"\r\n\r\n");
        message(&head, b"")
    };
    let a = "/v1/sessions/aa/command";
    let b = "/v1/sessions/bb/command";
    for (path, step, token) in
        [(a, "1", &b"Bearer x"[..]), (a, "2", b"Bearer x"), (b, "2", b"Bearer y")]
    {
        let (route, req) =
            parse_request(head(path, step, token), &mut repeated).expect("a request");
        assert_eq!(route, Route::parse("POST", path));
        assert_eq!(req.uri().path(), path);
        assert_eq!(req.headers()["x-tunnel-step"], step);
        assert_eq!(req.headers()["authorization"].as_bytes(), token);
    }
    // A bad value is refused though the one before it, under the same name, was good.
    let refused = parse_request(head(b, "3", b"Bearer \x7f"), &mut repeated);
    assert!(matches!(refused, Err(Error::BadRequest(_))));
    let (_, req) = parse_request(head(b, "3", b"Bearer y"), &mut repeated).expect("a request");
    assert_eq!(req.headers()["authorization"], "Bearer y");
    // The same path with another method is routed anew.
    let delete = message(format!("DELETE {b} HTTP/1.1\r\n\r\n").as_bytes(), b"");
    let (route, _) = parse_request(delete, &mut repeated).expect("a request");
    assert_eq!(route, Route::MethodNotAllowed);
}

#[test]
fn garbage_and_lies_are_refused() {
    let lies = [
        message(b"POST /v1/relay HTTP/1.1\r\nContent-Length: 9\r\n\r\n", b"abc"),
        message(b"POST /v1/relay HTTP/1.1\r\nContent-Length: 1\r\n\r\n", b"abc"),
        message(b"P\x01ST /v1/relay HTTP/1.1\r\n\r\n", b""),
        message(b"POST /v1/re\x7flay HTTP/1.1\r\n\r\n", b""),
        message(b"POST /v1/relay HTTP/1.1\r\nX-A: \x7f\r\n\r\n", b""),
        message(b"POST /v1/relay HTTP/1.1\r\nX A: b\r\n\r\n", b""),
    ];
    let garbage = [&b"\x00\x01garbage"[..], b"\x00", b""].map(Bytes::from_static);
    let mut repeated = Repeated::default();
    for message in lies.into_iter().chain(garbage) {
        let parsed = parse_request(message.clone(), &mut repeated);
        assert!(matches!(parsed, Err(Error::BadRequest(_))), "{message:?}");
    }
    let huge = format!("POST /v1/relay HTTP/1.1\r\nX-A: {}\r\n\r\n", "a".repeat(MAX_HEAD_BYTES));
    let parsed = parse_request(message(huge.as_bytes(), b""), &mut repeated);
    assert!(parsed.is_err(), "a head over the limit");
}

#[test]
fn an_upgrade_is_accepted_with_the_key_answered() {
    let response = accept(upgrade_request()).expect("accepted");
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
        let refused = accept(req).expect_err("refused");
        assert_eq!(refused.to_api().0, StatusCode::UPGRADE_REQUIRED);
    }
    let mut inside = upgrade_request();
    inside.extensions_mut().remove::<OnUpgrade>();
    assert!(matches!(accept(inside), Err(Error::UpgradeRequired(_))));
}
