//! Turns the frames of one answer into MySQL packets for the client: column count and
//! definitions, rows, terminators (EOF or OK-with-0xFE per CLIENT_DEPRECATE_EOF), OK, ERR.

use bytes::{BufMut, BytesMut};
use common::mysql::status::MORE_RESULTS_EXISTS;
use common::wire::{Frame, PacketList};

use crate::Error;
use crate::infile::InfileTarget;
use crate::protocol::{
    PacketIo, QueuedPacket, encode_eof, encode_err, encode_ok, encode_result_end, put_lenenc_int,
};
use crate::tunnel::FrameStream;

/// Offset of the status flags in an EOF payload (`0xfe`, warnings u16, status u16).
const EOF_STATUS_AT: usize = 3;

/// How the client wants answers shaped.
#[derive(Debug, Clone, Copy)]
pub struct ClientStyle {
    /// The client set CLIENT_DEPRECATE_EOF.
    pub deprecate_eof: bool,
    /// The command was COM_FIELD_LIST (definitions only, no column count).
    pub field_list: bool,
    /// The command was COM_STATISTICS (the answer is one bare string packet).
    pub statistics: bool,
}

/// Relays one answer. Returns the last status flags seen. An answer that ends before its final
/// packet is an error (the client is then told the connection was lost).
pub async fn relay_answer(
    io: &mut PacketIo,
    frames: &mut FrameStream<'_>,
    style: ClientStyle,
    mut status: u16,
    infile: InfileTarget<'_>,
) -> Result<u16, Error> {
    let mut scratch = BytesMut::with_capacity(256);
    let mut complete = false;
    // Definition lists still to come after a prepare's OK (parameters, then columns).
    let mut prepared_lists = 0;
    // The EOF after column definitions: a server puts the result set's final status there, which
    // the tunnel learns only at `End`; patched then if it has not been sent yet.
    let mut metadata_eof: Option<QueuedPacket> = None;
    while let Some(frame) = frames.next().await? {
        let definitions_of_prepare = prepared_lists > 0 && matches!(frame, Frame::Columns(_));
        if complete && !definitions_of_prepare {
            return Err(Error::StreamBroken("data after the final packet".into()));
        }
        scratch.clear();
        match frame {
            Frame::Prepared { statement_id, columns, params, warnings } => {
                scratch.put_u8(0);
                scratch.put_u32_le(statement_id);
                scratch.put_u16_le(columns);
                scratch.put_u16_le(params);
                scratch.put_u8(0);
                scratch.put_u16_le(warnings);
                io.queue_packet(&scratch);
                prepared_lists = u8::from(columns > 0) + u8::from(params > 0);
                complete = true;
            }
            Frame::Columns(list) if definitions_of_prepare => {
                prepared_lists -= 1;
                for def in PacketList::new(list) {
                    io.queue_packet(&def?);
                }
                if !style.deprecate_eof {
                    encode_eof(&mut scratch, status, 0);
                    io.queue_packet(&scratch);
                }
            }
            Frame::Columns(list) => {
                let defs: Vec<_> = PacketList::new(list).collect::<Result<_, _>>()?;
                if !style.field_list {
                    put_lenenc_int(&mut scratch, defs.len() as u64);
                    io.queue_packet(&scratch);
                }
                for def in &defs {
                    io.queue_packet(def);
                }
                if !style.deprecate_eof && !style.field_list {
                    scratch.clear();
                    encode_eof(&mut scratch, status, 0);
                    metadata_eof = Some(io.queue_packet_marked(&scratch));
                }
            }
            Frame::Rows(list) => {
                for row in PacketList::new(list) {
                    io.write_packet(&row?).await?;
                }
                complete |= style.statistics;
            }
            Frame::End { status: s, warnings } => {
                status = s;
                if let Some(eof) = metadata_eof.take() {
                    io.patch_queued(eof, EOF_STATUS_AT, &s.to_le_bytes());
                }
                if style.field_list {
                    encode_eof(&mut scratch, s, warnings);
                } else {
                    encode_result_end(&mut scratch, s, warnings, style.deprecate_eof);
                }
                io.queue_packet(&scratch);
                complete = s & MORE_RESULTS_EXISTS == 0;
            }
            Frame::Ok(ok) => {
                status = ok.status;
                encode_ok(&mut scratch, &ok);
                io.queue_packet(&scratch);
                complete = ok.status & MORE_RESULTS_EXISTS == 0;
            }
            Frame::Err { code, sqlstate, message } => {
                encode_err(&mut scratch, code, &sqlstate, &message);
                io.queue_packet(&scratch);
                complete = true;
            }
            Frame::Heartbeat => {}
            Frame::Infile(file_name) => infile.transfer(io, &file_name).await?,
            Frame::Packets(_) | Frame::Turn(_) => {
                return Err(Error::StreamBroken("relayed frames in a command's answer".into()));
            }
        }
    }
    if !complete || prepared_lists > 0 {
        return Err(Error::StreamBroken("the transport's answer ended early".into()));
    }
    io.flush().await?;
    Ok(status)
}
