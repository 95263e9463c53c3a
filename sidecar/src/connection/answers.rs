//! Writing what the transport sends back: a relayed answer's packets as they are, or login
//! packets renumbered for the client leg; each ends with whose turn it is.

use bytes::Bytes;
use common::mysql::greeting::Greeting;
use common::wire::{Frame, TurnEnd};

use super::file_request::{file_request_allowed, requested_name};
use crate::Error;
use crate::error::Broken;
use crate::protocol::{PacketIo, split_payloads};
use crate::tunnel::FrameStream;

/// Writes a relayed answer's packets as they are, each piece as it arrives (the writer
/// follows packet headers across pieces); returns how the turn ended. `asked` is the client's
/// command the answer is for (`None` for an auth step): a LOCAL INFILE request goes to the
/// client only when that command named the file (the writer holds a short packet starting
/// with 0xFB back until the turn's end, so a refused one is never sent).
pub async fn write_answer(
    io: &mut PacketIo,
    frames: &mut FrameStream<'_>,
    asked: Option<&[u8]>,
    auth: Option<bool>,
) -> Result<TurnEnd, Error> {
    // An answer within an authentication (`auth`: whether a password may go in clear) is
    // small: held whole, and checked before any of it is written.
    let mut held = auth.map(|_| bytes::BytesMut::new());
    while let Some(frame) = frames.next_piece().await? {
        match frame {
            Frame::Packets(packets) => match held.as_mut() {
                None => io.write_raw(packets).await?,
                Some(whole) => hold_auth_piece(whole, &packets)?,
            },
            Frame::Heartbeat => {}
            // The answer is whole: it goes to the client before the rest of the body is
            // checked and the connection to the transport is put back.
            Frame::Turn(end) => {
                if let Some(whole) = held.take() {
                    refuse_cleartext(&whole, auth == Some(true))?;
                    io.write_raw(whole.freeze()).await?;
                }
                refuse_unasked_file_request(io, asked, end)?;
                io.flush().await?;
                return expect_body_end(frames, end).await;
            }
        }
    }
    Err(Error::StreamBroken(Broken::EndedEarly))
}

/// Most bytes of an answer within an authentication (an OK, an ERR, an auth switch or more
/// auth data).
const MAX_AUTH_ANSWER: usize = 64 * 1024;

/// Adds a piece of an answer within an authentication to what is held of it.
fn hold_auth_piece(whole: &mut bytes::BytesMut, piece: &[u8]) -> Result<(), Error> {
    whole.extend_from_slice(piece);
    if whole.len() > MAX_AUTH_ANSWER {
        let long = std::io::Error::other("an authentication answer of more than 64 KiB");
        return Err(Error::StreamBroken(Broken::ControlBody(long)));
    }
    Ok(())
}

/// Refuses packets in which the server asks for the password in clear, unless `cleartext`.
fn refuse_cleartext(packets: &[u8], cleartext: bool) -> Result<(), Error> {
    if cleartext {
        return Ok(());
    }
    split_payloads(packets)?.iter().try_for_each(|payload| refuse_cleartext_payload(payload, false))
}

/// Refuses a login packet in which the server asks for the password in clear, unless
/// `cleartext`.
pub(super) fn refuse_cleartext_payload(payload: &[u8], cleartext: bool) -> Result<(), Error> {
    match cleartext_plugin(payload) {
        Some(plugin) if !cleartext => Err(Error::CleartextRefused { plugin }),
        _ => Ok(()),
    }
}

/// Writes login packets with the client leg's own sequence ids (TLS may be on one leg only,
/// and an SSLRequest takes a sequence id); returns how the turn ended and the payloads.
pub async fn write_login_packets(
    io: &mut PacketIo,
    frames: &mut FrameStream<'_>,
    cleartext: bool,
) -> Result<(TurnEnd, Vec<Bytes>), Error> {
    let mut written = Vec::new();
    while let Some(frame) = frames.next().await? {
        match frame {
            Frame::Packets(packets) => {
                for payload in split_payloads(&packets)? {
                    refuse_cleartext_payload(&payload, cleartext)?;
                    io.queue_packet(&payload);
                    written.push(payload);
                }
            }
            Frame::Heartbeat => {}
            Frame::Turn(end) => {
                io.flush().await?;
                return Ok((expect_body_end(frames, end).await?, written));
            }
        }
    }
    Err(Error::StreamBroken(Broken::EndedEarly))
}

/// Auth plugins that have the client send its password as it is (MySQL's cleartext plugin,
/// and MariaDB's `dialog`, which PAM uses).
const CLEARTEXT_PLUGINS: [&[u8]; 2] = [b"mysql_clear_password", b"dialog"];

/// The cleartext plugin a login packet from the server names, if any: a greeting's, or an
/// AuthSwitchRequest's (0xFE, the plugin's name, a NUL, its data). A greeting that cannot be
/// read counts as one.
fn cleartext_plugin(payload: &[u8]) -> Option<String> {
    let named = match payload.first()? {
        0xfe => payload[1..].split(|&b| b == 0).next()?.to_vec(),
        // A greeting the sidecar cannot read may name anything to a client that can.
        10 => match Greeting::parse(payload) {
            Some(greeting) => greeting.plugin,
            None => return Some("a greeting that could not be read".into()),
        },
        _ => return None,
    };
    CLEARTEXT_PLUGINS
        .contains(&named.as_slice())
        .then(|| String::from_utf8_lossy(&named).into_owned())
}

/// Takes back the LOCAL INFILE request that ends a turn (`end`), unless the turn waits for
/// the file and `asked` named it: the error then takes its place. A turn that ends on such a
/// request without waiting for the file is no answer a server gives (the client would send the
/// file as its next command): refused too.
fn refuse_unasked_file_request(
    io: &mut PacketIo,
    asked: Option<&[u8]>,
    end: TurnEnd,
) -> Result<(), Error> {
    let request = io.queued_file_request();
    let waits_for_the_file = end == TurnEnd::AwaitFile;
    if request.is_none() && !waits_for_the_file {
        return Ok(());
    }
    if waits_for_the_file && request.is_some_and(|request| file_request_allowed(asked, request)) {
        return Ok(());
    }
    let requested = requested_name(request);
    io.take_back_file_request();
    Err(Error::FileRequestRefused { requested })
}

/// The end of a turn must be the end of the body.
async fn expect_body_end(frames: &mut FrameStream<'_>, end: TurnEnd) -> Result<TurnEnd, Error> {
    match frames.next().await? {
        None => Ok(end),
        Some(_) => Err(Error::StreamBroken(Broken::AfterTurnEnd)),
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A writer to a client that is never read (nothing here fills its socket).
    async fn writer() -> (PacketIo, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).await;
        let (server, _) = listener.accept().await.expect("accept");
        (PacketIo::new(server, 1 << 20), client.expect("connect"))
    }

    fn packet(seq: u8, payload: &[u8]) -> Bytes {
        let mut p = vec![payload.len() as u8, 0, 0, seq];
        p.extend_from_slice(payload);
        Bytes::from(p)
    }

    /// Whether an answer ending with `last` (a packet with sequence id 1) and `end` passes, as
    /// the answer to `asked`.
    async fn passes(asked: Option<&[u8]>, last: &[u8], end: TurnEnd) -> bool {
        let (mut io, _client) = writer().await;
        io.write_raw(packet(1, last)).await.expect("write");
        let refused = refuse_unasked_file_request(&mut io, asked, end);
        if let Err(Error::FileRequestRefused { requested }) = &refused {
            // A request is taken back: the sidecar's error takes its sequence id.
            let name = last.strip_prefix(b"\xfb").map(|n| String::from_utf8_lossy(n).into_owned());
            assert_eq!(io.next_seq(), if name.is_some() { 1 } else { 2 });
            assert_eq!(requested, &name);
        }
        refused.is_ok()
    }

    #[tokio::test]
    async fn a_file_request_passes_only_where_the_query_named_the_file() {
        let load = packet(0, b"\x03LOAD DATA LOCAL INFILE '/tmp/data.csv' INTO TABLE t");
        let select = packet(0, b"\x03SELECT 1");
        let (wanted, secret) = (&b"\xfb/tmp/data.csv"[..], &b"\xfb/home/me/.aws/credentials"[..]);
        assert!(passes(Some(&load), wanted, TurnEnd::AwaitFile).await);
        assert!(!passes(Some(&load), secret, TurnEnd::AwaitFile).await);
        assert!(!passes(Some(&select), wanted, TurnEnd::AwaitFile).await);
        assert!(!passes(None, wanted, TurnEnd::AwaitFile).await);
        // A turn that waits for a file it never asked for, or asks without waiting.
        assert!(!passes(Some(&load), b"\x00\x00\x00\x02\x00\x00\x00", TurnEnd::AwaitFile).await);
        for end in [TurnEnd::Done, TurnEnd::AwaitAuth, TurnEnd::Closed] {
            assert!(!passes(Some(&load), wanted, end).await, "{end:?}");
            assert!(passes(Some(&select), b"\x00\x00\x00\x02\x00\x00\x00", end).await, "{end:?}");
            assert!(passes(Some(&select), b"\xfe\x00\x00\x02\x00", end).await, "{end:?}");
        }
    }
}
