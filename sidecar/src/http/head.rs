//! A request's head as either carrier writes it: HTTP/1.1 text, or the compact head of a
//! stream message (`common::wire::HeadWriter`), made from the same parts without text in
//! between.

use std::fmt::Write;
use std::io;

use common::wire::{AFFINITY_HEADER, HeadWriter, SESSION_HEADER};

/// A request's method, path and headers.
#[derive(Debug, Clone)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: &'a str,
    /// The base URL's path prefix (ends with `/`).
    pub prefix: &'a str,
    /// The path below the prefix.
    pub path: &'a str,
    /// The `Host` header (HTTP only: a stream was opened for one host).
    pub host: &'a str,
    /// The other headers, in order.
    pub headers: Vec<(&'a str, &'a str)>,
}

impl RequestHead<'_> {
    /// The head as HTTP/1.1 text, up to and without its last empty line (more header lines
    /// may follow).
    pub fn text_lines(&self, content_length: usize) -> String {
        let mut text = String::with_capacity(192 + self.path.len());
        for part in [self.method, " ", self.prefix, self.path, " HTTP/1.1\r\nHost: ", self.host] {
            text.push_str(part);
        }
        // Writing to a String cannot fail.
        let _ = write!(text, "\r\nContent-Length: {content_length}\r\n");
        for (name, value) in &self.headers {
            for part in [*name, ": ", *value, "\r\n"] {
                text.push_str(part);
            }
        }
        text
    }

    /// The whole head as HTTP/1.1 text.
    pub fn text(&self, content_length: usize) -> String {
        let mut text = self.text_lines(content_length);
        text.push_str("\r\n");
        text
    }

    /// The request and `body` as one stream message.
    pub fn message(&self, body: &[u8]) -> io::Result<Vec<u8>> {
        let invalid = |e: common::Error| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
        let mut path = String::with_capacity(self.prefix.len() + self.path.len());
        path.push_str(self.prefix);
        path.push_str(self.path);
        let mut writer = HeadWriter::request(self.method, &path, body.len()).map_err(invalid)?;
        // Headers for the proxies on the way (to route by, to log) stay off: no proxy reads a
        // stream's messages.
        let for_proxies = |name: &str| name == AFFINITY_HEADER || name == SESSION_HEADER;
        for (name, value) in self.headers.iter().filter(|(name, _)| !for_proxies(name)) {
            writer.header(name, value.as_bytes()).map_err(invalid)?;
        }
        let mut message = writer.finish().map_err(invalid)?;
        message.extend_from_slice(body);
        Ok(message)
    }
}

/// An answer's `Content-Type`: one of the protocol's own without a copy, any other copied.
pub(super) fn content_type(value: &str) -> std::borrow::Cow<'static, str> {
    let own = [common::wire::FRAMES_CONTENT_TYPE, common::wire::JSON_CONTENT_TYPE];
    own.into_iter()
        .find(|known| *known == value)
        .map_or_else(|| value.to_owned().into(), Into::into)
}
