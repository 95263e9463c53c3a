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

#[test]
fn a_message_is_read_as_a_step_and_what_is_not_one_is_refused() {
    let mut head = StepHead::new(common::wire::StepKind::Command);
    head.session = Some("aa".into());
    head.step = Some(2);
    let mut message = Vec::new();
    head.encode(&mut message);
    message.extend_from_slice(b"\x01\0\0\0\x0e");
    let step = read_step(Bytes::from(message)).expect("a step");
    assert_eq!(step.head, head);
    assert!(matches!(step.body, steps::Body::Whole(ref b) if &b[..] == b"\x01\0\0\0\x0e"));
    assert!(format!("{step:?}").contains("body: \"5 bytes\""), "a body is never printed");
    // A version 2 message (an HTTP head in a message) is no step.
    let old = b"\0\x0c\x04POST\0\x05/v1/x\0";
    let refused = read_step(Bytes::from_static(old)).expect_err("refused");
    assert!(matches!(&refused, Error::BadRequest(m) if m.contains("not a step")), "{refused}");
}

#[test]
fn an_upgrade_is_accepted_with_the_key_answered() {
    let response = accept(upgrade_request(), a_share(), a_caller()).expect("accepted");
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
        let refused = accept(req, a_share(), a_caller()).expect_err("refused");
        assert_eq!(refused.to_api().0, StatusCode::UPGRADE_REQUIRED);
    }
    let mut inside = upgrade_request();
    inside.extensions_mut().remove::<OnUpgrade>();
    assert!(matches!(accept(inside, a_share(), a_caller()), Err(Error::UpgradeRequired(_))));
}

#[test]
fn an_upgrade_offering_another_version_only_is_refused_naming_this_one() {
    let mut req = upgrade_request();
    req.headers_mut().insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static("sqltunnel.v2"));
    let refused = accept(req, a_share(), a_caller()).expect_err("refused");
    assert_eq!(refused.to_api().0, StatusCode::UPGRADE_REQUIRED);
    assert!(refused.to_string().contains("sqltunnel.v3"), "{refused}");
    // Offered among others, this version is taken.
    let mut req = upgrade_request();
    let both = HeaderValue::from_static("sqltunnel.v4, sqltunnel.v3");
    req.headers_mut().insert(SEC_WEBSOCKET_PROTOCOL, both);
    let response = accept(req, a_share(), a_caller()).expect("accepted");
    assert_eq!(response.headers()[SEC_WEBSOCKET_PROTOCOL], STREAM_PROTOCOL);
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

/// The caller of a static token, held as a stream's.
fn a_caller() -> HeldCaller {
    let token = common::config::Secret::new("stream-token-aaaaaaaaaaaa");
    let identities = std::sync::Arc::new(
        crate::identity::Identities::new(&[token], &[], None, None).expect("identities"),
    );
    let authorization = b"Bearer stream-token-aaaaaaaaaaaa";
    let caller = futures_util::FutureExt::now_or_never(identities.authorize(Some(authorization)))
        .expect("at once")
        .expect("a caller");
    HeldCaller::new(&identities, Some(authorization), caller)
}
