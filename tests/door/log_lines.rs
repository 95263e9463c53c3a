//! Text an identity gets into the transport's log cannot forge a line of it or reach the
//! operator's terminal: an upstream name holding a newline, a whole fake line and terminal
//! escapes is written on the refusal's own line, escaped; a sidecar works meanwhile.

use e2e::door::{Legit, transport_with};
use e2e::http::call;
use e2e::within;

const BOB: &str = "bob-T0ken-3Hk6Yt1Gf8Sd5Ja2Qe";

#[tokio::test]
async fn a_logged_value_cannot_forge_a_line_or_reach_the_terminal() {
    within(60, async {
        let bob = format!("identities:\n  - name: bob\n    token: {BOB}\n    upstreams: [main]\n");
        let (transport, port) = transport_with("log-lines", &bob).await;
        let legit = Legit::start(port).await;
        let forged = "x\\n2026-12-07T00:00:00.000000Z  INFO transport::session_endpoints: relayed session opened session=deadbeef identity=alice upstream=main\\r\\u001b[2J\\u009b31m";
        for _ in 0..3 {
            let body = format!("{{\"upstream\":\"{forged}\"}}");
            let (status, said, _) = call(port, BOB, "POST", "/v1/relay", &body).await;
            assert_eq!(status, 403, "{said}");
            legit.login_and_query().await.expect("the sidecar works meanwhile");
        }
        transport.log_grows("session refused", 2).await;
        let log = std::fs::read_to_string(&transport.log).expect("the log");
        let faked: Vec<&str> = log.lines().filter(|l| l.contains("session=deadbeef")).collect();
        assert_eq!(faked.len(), 3, "{log}");
        for line in faked {
            assert!(
                line.contains("session refused") && line.contains("\\n2026-12-07"),
                "the forged text stays on the refusal's line, escaped: {line}"
            );
        }
        assert!(!log.contains('\u{1b}') && !log.contains('\u{9b}') && !log.contains('\r'), "{log}");
    })
    .await;
}
