//! Reading an answer: frames decoded as the body arrives (decompressed when it is zstd), and
//! a connection that breaks mid-answer resumed from the byte where it broke.

use common::wire::{
    DEFAULT_MAX_FRAME, FRAMES_CONTENT_TYPE, Frame, FrameDecoder, HeldDigest, StreamDecompressor,
    TurnEnd, ZSTD,
};

use super::{FrameStream, TunnelConn};
use crate::Error;
use crate::error::Broken;
use crate::http::{AnswerBody, ResponseHead};
use crate::protocol::split_payloads;

impl TunnelConn {
    /// The frames of an answer whose head was read.
    pub(super) fn frames(&mut self, head: Box<ResponseHead>) -> Result<FrameStream<'_>, Error> {
        if head.content_type != FRAMES_CONTENT_TYPE {
            let detail =
                format!(" with content type {:?} instead of sqltunnel frames", head.content_type);
            let url = self.endpoint.url.clone();
            return Err(Error::BadAnswer { url, status: head.status_line(), detail });
        }
        if self.http.is_none() {
            return Err(Broken::ConnectionLost.into());
        }
        let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME);
        let ended = head.status == 204;
        let inflate = inflater(&head, &self.endpoint.url)?;
        Ok(FrameStream {
            tunnel: self,
            decoder,
            done: false,
            pending: None,
            received: HeldDigest::default(),
            ended,
            inflate,
        })
    }
}

impl TunnelConn {
    /// The frames of an answer already read whole.
    pub(super) fn frames_of(
        &mut self,
        head: Box<ResponseHead>,
        body: &[u8],
    ) -> Result<FrameStream<'_>, Error> {
        let mut frames = self.frames(head)?;
        match frames.inflate.as_mut() {
            Some(inflate) => inflate.push(body),
            None => {
                frames.received.update(body);
                frames.decoder.extend(body);
            }
        }
        frames.done = true;
        Ok(frames)
    }
}

/// Most decompressed bytes taken at once.
const INFLATE_PIECE: usize = 64 * 1024;

/// A decompressor for a compressed body; an error for an encoding the sidecar did not ask for.
fn inflater(head: &ResponseHead, url: &str) -> Result<Option<StreamDecompressor>, Error> {
    match head.content_encoding.as_str() {
        "" | "identity" => Ok(None),
        ZSTD => StreamDecompressor::new().map(Some).map_err(|e| Broken::NoDecoder(e).into()),
        other => Err(Error::BadAnswer {
            url: url.to_owned(),
            status: head.status_line(),
            detail: format!(
                " encoded as {other:?}, which the sidecar did not ask for (a proxy compressing answers?)"
            ),
        }),
    }
}

impl FrameStream<'_> {
    /// The next frame; `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<Frame>, Error> {
        self.next_taken(FrameDecoder::next_frame).await
    }

    /// The next frame, a `Packets` frame's payload in pieces as it arrives (they may end
    /// inside a MySQL packet); `None` at the end of the body.
    pub async fn next_piece(&mut self) -> Result<Option<Frame>, Error> {
        self.next_taken(FrameDecoder::next_piece).await
    }

    /// The next frame as `take` takes it from the decoder.
    async fn next_taken(
        &mut self,
        take: fn(&mut FrameDecoder) -> Result<Option<Frame>, common::Error>,
    ) -> Result<Option<Frame>, Error> {
        loop {
            if let Some(frame) = take(&mut self.decoder).map_err(Broken::BadFrame)? {
                self.ended |= matches!(frame, Frame::Turn(_));
                return Ok(Some(frame));
            }
            if let Some(inflate) = self.inflate.as_mut().filter(|i| !i.is_drained()) {
                let mut piece = bytes::BytesMut::new();
                let n = inflate.pull(&mut piece, INFLATE_PIECE).map_err(Broken::Corrupt)?;
                if n > 0 {
                    self.received.update(&piece);
                    self.decoder.extend(&piece);
                    continue;
                }
            }
            if self.done {
                return if self.decoder.is_empty() {
                    Ok(None)
                } else {
                    Err(Broken::InsideFrame.into())
                };
            }
            let Some(conn) = self.tunnel.http.as_mut() else {
                return Err(Broken::ConnectionLost.into());
            };
            // The turn's end came and nothing follows it: no read to say so.
            if self.ended && conn.has_ended() {
                self.done = true;
                continue;
            }
            match conn.body_chunk().await {
                Ok(Some(data)) => match self.inflate.as_mut() {
                    Some(inflate) => inflate.push(&data),
                    None => {
                        self.decoder.extend_shared(data.clone());
                        self.received.push(data);
                    }
                },
                // An answer ends with its turn frame: one that ends before it broke off.
                Ok(None) | Err(_) if self.ended => self.done = true,
                Ok(None) | Err(_) if self.pending.is_some() => Box::pin(self.resume()).await?,
                Ok(None) => self.done = true,
                Err(e) => {
                    let url = self.tunnel.endpoint.url.clone();
                    return Err(Broken::Read { url, reason: e }.into());
                }
            }
        }
    }
}

impl FrameStream<'_> {
    /// The packet payloads of a whole answer (a greeting), and how its turn ended.
    pub async fn payloads(&mut self) -> Result<(Vec<bytes::Bytes>, Option<TurnEnd>), Error> {
        let (mut payloads, mut end) = (Vec::new(), None);
        while let Some(frame) = self.next().await? {
            match frame {
                Frame::Packets(packets) => payloads.extend(split_payloads(&packets)?),
                Frame::Turn(turn) => end = Some(turn),
                Frame::Heartbeat => {}
            }
        }
        Ok((payloads, end))
    }

    /// The connection broke mid-answer: the step is sent again, and the answer goes on from
    /// the byte where it broke.
    async fn resume(&mut self) -> Result<(), Error> {
        let Some(pending) = self.pending.take() else { return Ok(()) };
        let received = self.received.len();
        tracing::info!(session = %common::wire::session_label(pending.session()), received, "the connection to the transport broke mid-answer: resuming");
        let head = self.tunnel.resend(&pending, received).await?;
        if head.status == 204 {
            self.ended = true;
        } else if head.content_type != FRAMES_CONTENT_TYPE {
            return Err(Error::NotResumed(format!("answered {}", head.status_line())));
        } else {
            // Not a byte of an answer that does not continue what arrived reaches the client.
            self.received.settle().check_resumed(head.resumed).map_err(|e| {
                tracing::warn!(session = %common::wire::session_label(pending.session()), error = %e, "a resumed answer was refused");
                Error::NotResumed(e.to_string())
            })?;
        }
        self.inflate = inflater(&head, &self.tunnel.endpoint.url)?;
        self.pending = Some(pending);
        Ok(())
    }
}
