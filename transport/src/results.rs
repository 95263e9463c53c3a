//! Encoding upstream answers as frames: result sets streamed in ~64 KiB chunks (column
//! definitions written by us, text rows as the upstream's bytes, binary rows re-encoded), OK and
//! ERR verbatim, and LOAD DATA LOCAL requests answered in order with the rest of the output.

use std::future::Future;
use std::task::{Context, Poll};

use bytes::BufMut;
use common::mysql::{error_code, put_lenenc_int, status};
use common::wire::{
    ListMark, OkInfo, encode_end, encode_err, encode_infile, encode_ok, list_begin, list_finish,
    list_item_begin, list_item_finish,
};
use futures_util::StreamExt;
use mysql_async::QueryResult;
use mysql_async::prelude::Protocol;
use mysql_async::{Conn, Row, Value};
use mysql_common::packets::{Column, OkPacket};

use crate::command::Outcome;
use crate::infile::{CAPABILITY_DISABLED, CAPABILITY_DISABLED_CODE, InfileEvent, InfileEvents};
use crate::sink::{ClientGone, FrameSink};

/// Polls `next` (a read from the upstream) to its end while answering the upstream's file
/// requests, which it makes only while `next` waits: what is open is closed first (a rows
/// frame, then the row set: another result, the load's, follows), then the `Infile` frame goes
/// out with everything before it — the sidecar relays all of that before it asks its client.
pub async fn serving_infile<T>(
    mut next: impl FnMut(&mut Context<'_>) -> Poll<T>,
    events: Option<&mut InfileEvents<'_>>,
    sink: &mut FrameSink,
    pending: &mut Pending,
    last_status: u16,
) -> Result<T, ClientGone> {
    let Some(events) = events else { return Ok(std::future::poll_fn(next).await) };
    loop {
        let step = std::future::poll_fn(|cx| match next(cx) {
            Poll::Ready(output) => Poll::Ready(Ok(output)),
            Poll::Pending => match events.rx.poll_recv(cx) {
                Poll::Ready(Some(event)) => Poll::Ready(Err(event)),
                _ => Poll::Pending,
            },
        })
        .await;
        match step {
            Ok(output) => return Ok(output),
            Err(event) => answer_infile(event, events, sink, pending, last_status).await?,
        }
    }
}

/// Acts on one infile event: a file request closes what is open and sends the `Infile` frame
/// with everything before it; a refusal is remembered for the load's OK.
async fn answer_infile(
    event: InfileEvent,
    events: &mut InfileEvents<'_>,
    sink: &mut FrameSink,
    pending: &mut Pending,
    last_status: u16,
) -> Result<(), ClientGone> {
    match event {
        InfileEvent::File(name) => {
            let open = pending.take();
            if let Pending::Rows(mark) = open {
                list_finish(sink.buf(), mark);
            }
            if !matches!(open, Pending::Nothing) {
                encode_end(sink.buf(), last_status | status::MORE_RESULTS_EXISTS, 0);
            }
            encode_infile(sink.buf(), &name);
            sink.flush().await
        }
        InfileEvent::Refused => {
            events.refused = true;
            Ok(())
        }
    }
}

/// The load's OK after a refusal becomes the server's error (the upstream got an empty file).
pub fn refuse_infile(sink: &mut FrameSink) -> Outcome {
    let msg = CAPABILITY_DISABLED.as_bytes();
    encode_err(sink.buf(), CAPABILITY_DISABLED_CODE, error_code::STATE_GENERAL, msg);
    Outcome::Healthy
}

/// How the rows of a result are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// Text protocol (COM_QUERY): the upstream's bytes.
    Text,
    /// Binary protocol (COM_STMT_EXECUTE).
    Binary,
}

/// Where streaming a result stopped.
#[derive(Debug)]
pub enum Streamed {
    /// Every set was read; the last one was a row set whose terminator is still to write.
    Done {
        /// A row set awaits its `End`.
        open_row_set: bool,
        /// Last status flags seen.
        last_status: u16,
    },
    /// An error ended the answer.
    Failed(Outcome),
}

/// Streams every result set of `result` as frames.
pub async fn stream_sets<P: Protocol + Unpin>(
    mut result: QueryResult<'_, 'static, P>,
    sink: &mut FrameSink,
    format: RowFormat,
    mut infile: Option<&mut InfileEvents<'_>>,
) -> Result<Streamed, ClientGone> {
    // A row set's terminator status is known only once the next set (or the end) is read.
    let mut pending = Pending::Nothing;
    let mut last_status = status::AUTOCOMMIT;
    loop {
        let next = result.stream::<Row>();
        tokio::pin!(next);
        let next = serving_infile(
            |cx| next.as_mut().poll(cx),
            infile.as_deref_mut(),
            sink,
            &mut pending,
            last_status,
        )
        .await?;
        let refused = infile.as_mut().is_some_and(|e| std::mem::take(&mut e.refused));
        let mut set = match next {
            Ok(Some(set)) if !refused => set,
            Ok(None) if !refused => break,
            failed => {
                if pending.take().is_row_set_end() {
                    encode_end(sink.buf(), last_status | status::MORE_RESULTS_EXISTS, 0);
                }
                let outcome = match failed {
                    Err(e) => encode_mysql_error(sink, e),
                    Ok(_) => refuse_infile(sink),
                };
                return Ok(Streamed::Failed(outcome));
            }
        };
        let ok = ok_info(set.ok_packet(), last_status);
        last_status = ok.status;
        if pending.take().is_row_set_end() {
            let warnings = if set.columns_ref().is_empty() { 0 } else { ok.warnings };
            encode_end(sink.buf(), ok.status | status::MORE_RESULTS_EXISTS, warnings);
        }
        if set.columns_ref().is_empty() {
            encode_ok(sink.buf(), &ok);
            continue;
        }
        let columns = set.columns();
        encode_columns(sink, &columns, false);
        pending = Pending::Rows(list_begin(sink.buf(), true));
        loop {
            // mysql_async reads the next result's header right after the last row: the
            // upstream may ask for a file here.
            let row = serving_infile(
                |cx| set.poll_next_unpin(cx),
                infile.as_deref_mut(),
                sink,
                &mut pending,
                last_status,
            )
            .await?;
            let Some(row) = row else { break };
            let row = match row {
                Ok(row) => row,
                Err(e) => {
                    if let Pending::Rows(mark) = pending.take() {
                        list_finish(sink.buf(), mark);
                    }
                    return Ok(Streamed::Failed(encode_mysql_error(sink, e)));
                }
            };
            if !matches!(pending, Pending::Rows(_)) {
                pending = Pending::Rows(list_begin(sink.buf(), true));
            }
            match format {
                RowFormat::Text => encode_text_row(sink, row),
                RowFormat::Binary => crate::binary::encode_row(sink.buf(), row, &columns),
            }
            if sink.buf().len() >= crate::sink::FLUSH_AT {
                if let Pending::Rows(mark) = pending.take() {
                    list_finish(sink.buf(), mark);
                }
                sink.flush().await?;
                pending = Pending::Rows(list_begin(sink.buf(), true));
            }
        }
        if let Pending::Rows(mark) = pending.take() {
            list_finish(sink.buf(), mark);
            pending = Pending::RowSetEnd;
        }
    }
    Ok(Streamed::Done { open_row_set: pending.is_row_set_end(), last_status })
}

/// Output still open while the next upstream packet is read.
#[derive(Debug, Clone, Copy)]
pub enum Pending {
    /// Nothing.
    Nothing,
    /// A rows frame is being filled.
    Rows(ListMark),
    /// A row set awaits its terminator.
    RowSetEnd,
}

impl Pending {
    /// Takes what is open, leaving nothing.
    pub fn take(&mut self) -> Pending {
        std::mem::replace(self, Pending::Nothing)
    }

    /// True when a row set awaits its terminator.
    pub fn is_row_set_end(self) -> bool {
        matches!(self, Pending::RowSetEnd)
    }
}

/// Ends an answer: the last row set's terminator comes from the connection's last OK.
pub fn finish(conn: &Conn, sink: &mut FrameSink, streamed: Streamed) -> Outcome {
    match streamed {
        Streamed::Failed(outcome) => outcome,
        Streamed::Done { open_row_set, last_status } => {
            if open_row_set {
                let ok = ok_info(conn.last_ok_packet(), last_status);
                encode_end(sink.buf(), ok.status, ok.warnings);
            }
            Outcome::Healthy
        }
    }
}

/// Appends a `Columns` frame; field-list definitions carry an empty default value.
pub fn encode_columns(sink: &mut FrameSink, columns: &[Column], field_list: bool) {
    let buf = sink.buf();
    let mark = list_begin(buf, false);
    for column in columns {
        let item = list_item_begin(buf);
        put_column_definition(buf, column);
        if field_list {
            buf.put_u8(0xfb);
        }
        list_item_finish(buf, item);
    }
    list_finish(buf, mark);
}

/// Writes a ColumnDefinition41 payload, every field as the upstream sent it. (Written here
/// because `mysql_common`'s own serializer puts the length before the character set.)
fn put_column_definition(buf: &mut bytes::BytesMut, c: &Column) {
    for text in [
        &b"def"[..],
        c.schema_ref(),
        c.table_ref(),
        c.org_table_ref(),
        c.name_ref(),
        c.org_name_ref(),
    ] {
        put_lenenc_int(buf, text.len() as u64);
        buf.put_slice(text);
    }
    buf.put_u8(0x0c);
    buf.put_u16_le(c.character_set());
    buf.put_u32_le(c.column_length());
    buf.put_u8(c.column_type() as u8);
    buf.put_u16_le(c.flags().bits());
    buf.put_u8(c.decimals());
    buf.put_u16_le(0);
}

/// Appends one text-protocol row: each value as a length-encoded string, NULL as 0xFB.
fn encode_text_row(sink: &mut FrameSink, row: Row) {
    let buf = sink.buf();
    let item = list_item_begin(buf);
    for value in row.unwrap_raw() {
        match value {
            Some(Value::Bytes(bytes)) => {
                put_lenenc_int(buf, bytes.len() as u64);
                buf.put_slice(&bytes);
            }
            Some(Value::NULL) | None => buf.put_u8(0xfb),
            Some(other) => {
                let text = other.as_sql(false);
                let text = text.trim_matches('\'');
                put_lenenc_int(buf, text.len() as u64);
                buf.put_slice(text.as_bytes());
            }
        }
    }
    list_item_finish(buf, item);
}

/// The OK fields of an upstream OK packet (`fallback_status` when there is none).
pub fn ok_info(ok: Option<&OkPacket<'static>>, fallback_status: u16) -> OkInfo {
    match ok {
        Some(ok) => OkInfo {
            affected_rows: ok.affected_rows(),
            last_insert_id: ok.last_insert_id().unwrap_or(0),
            status: ok.status_flags().bits(),
            warnings: ok.warnings(),
            info: bytes::Bytes::copy_from_slice(ok.info_ref().unwrap_or_default()),
        },
        None => OkInfo { status: fallback_status, ..OkInfo::default() },
    }
}

/// Encodes an upstream error; a non-server error means the connection is broken.
pub fn encode_mysql_error(sink: &mut FrameSink, err: mysql_async::Error) -> Outcome {
    match err {
        mysql_async::Error::Server(e) => {
            let mut state = *error_code::STATE_GENERAL;
            if e.state.len() == 5 {
                state.copy_from_slice(e.state.as_bytes());
            }
            encode_err(sink.buf(), e.code, &state, e.message.as_bytes());
            Outcome::Healthy
        }
        other => {
            tracing::warn!(error = %other, "upstream connection failed during a command");
            let msg = format!("Lost connection to the upstream server during query ({other})");
            encode_err(
                sink.buf(),
                error_code::CONNECTION_LOST,
                error_code::STATE_COMM,
                msg.as_bytes(),
            );
            Outcome::Broken
        }
    }
}
