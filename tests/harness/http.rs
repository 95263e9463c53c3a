//! Raw HTTP/1.1 requests to the transport, written by hand so a test controls every byte.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `request` as is on a new connection and reads until the transport closes it; returns
/// the status code (0 when there was no answer) and the whole answer, lossily as text.
pub async fn raw_request(port: u16, request: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    // A request refused before it is all sent (a huge one) may meet a reset here: its answer
    // is read all the same.
    drop(s.write_all(request.as_bytes()).await);
    let mut bytes = Vec::new();
    drop(s.read_to_end(&mut bytes).await);
    let out = String::from_utf8_lossy(&bytes).into_owned();
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

/// A request with a bearer `token` and a JSON `body`, on a new connection; returns the status,
/// the session id the answer named (or empty), and the body.
pub async fn call(
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String, String) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, text) = raw_request(port, &request).await;
    let session = text
        .lines()
        .find_map(|l| l.strip_prefix("x-tunnel-session: "))
        .unwrap_or("")
        .trim()
        .to_owned();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, session, body)
}

/// A sample's value from the `/metrics` at `port` (with `token`, for the API address), read on
/// a new connection; 0 when absent.
pub async fn metric(port: u16, token: Option<&str>, name: &str) -> u64 {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n");
    let (_, text) = raw_request(port, &request).await;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// The upstream names a `/v1/ready` answer lists (those its caller may reach).
pub fn ready_upstreams(ready: &serde_json::Value) -> Vec<String> {
    let listed = ready["upstreams"].as_array().map(Vec::as_slice).unwrap_or_default();
    listed.iter().filter_map(|u| u["name"].as_str().map(str::to_owned)).collect()
}
