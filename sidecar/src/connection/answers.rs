//! Writing what the transport sends back: a relayed answer's packets as they are, or login
//! packets renumbered for the client leg; each ends with whose turn it is.

use bytes::Bytes;
use common::wire::{Frame, TurnEnd};

use crate::Error;
use crate::error::Broken;
use crate::protocol::{PacketIo, split_payloads};
use crate::tunnel::FrameStream;

/// Writes a relayed answer's packets as they are, each piece as it arrives (the writer
/// follows packet headers across pieces); returns how the turn ended.
pub async fn write_answer(
    io: &mut PacketIo,
    frames: &mut FrameStream<'_>,
) -> Result<TurnEnd, Error> {
    while let Some(frame) = frames.next_piece().await? {
        match frame {
            Frame::Packets(packets) => io.write_raw(packets).await?,
            Frame::Heartbeat => {}
            // The answer is whole: it goes to the client before the rest of the body is
            // checked and the connection to the transport is put back.
            Frame::Turn(end) => {
                io.flush().await?;
                return expect_body_end(frames, end).await;
            }
        }
    }
    Err(Error::StreamBroken(Broken::EndedEarly))
}

/// Writes login packets with the client leg's own sequence ids (TLS may be on one leg only,
/// and an SSLRequest takes a sequence id); returns how the turn ended and the payloads.
pub async fn write_login_packets(
    io: &mut PacketIo,
    frames: &mut FrameStream<'_>,
) -> Result<(TurnEnd, Vec<Bytes>), Error> {
    let mut written = Vec::new();
    while let Some(frame) = frames.next().await? {
        match frame {
            Frame::Packets(packets) => {
                for payload in split_payloads(&packets)? {
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

/// The end of a turn must be the end of the body.
async fn expect_body_end(frames: &mut FrameStream<'_>, end: TurnEnd) -> Result<TurnEnd, Error> {
    match frames.next().await? {
        None => Ok(end),
        Some(_) => Err(Error::StreamBroken(Broken::AfterTurnEnd)),
    }
}
