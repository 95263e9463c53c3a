//! Writing to the client: logical packets split at 16 MiB, relayed packets as they are (their
//! headers followed so that a packet of the sidecar's own takes the next sequence id), small
//! packets patched until they are sent, and the one place bytes leave for the socket, through
//! the compressed protocol when it is on.

use bytes::{BufMut, Bytes};
use common::mysql::packets::PacketHead;
use common::mysql::{compressed, packet};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::{FLUSH_AT, MAX_PAYLOAD, PacketIo, QueuedPacket};
use crate::Error;

/// The longest LOCAL INFILE request payload held back until the turn's end (a file name is
/// far shorter); a longer packet starting with 0xFB is written as it comes.
const FILE_REQUEST_MAX: usize = 64 * 1024;

/// The longest relayed packet whose start is held back from a flush until it is whole: an
/// answer broken there, and not resumed, still ends with an error at a packet boundary, where
/// a client reads it (a longer packet goes out as it comes, as the server sends it).
const PARTIAL_HOLD_MAX: usize = 1 << 20;

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    /// Queues one logical packet (split at 16 MiB, with an empty trailer when the length is
    /// an exact multiple). Flushes when enough is buffered.
    pub async fn write_packet(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.queue_packet(payload);
        if self.queued() >= FLUSH_AT {
            self.flush_part().await?;
        }
        Ok(())
    }

    /// Queues one logical packet without flushing.
    pub fn queue_packet(&mut self, payload: &[u8]) {
        self.spill();
        let mut chunks = payload.chunks(MAX_PAYLOAD);
        let mut last_len = 0;
        for chunk in chunks.by_ref() {
            self.put_header(chunk.len());
            self.wbuf.put_slice(chunk);
            last_len = chunk.len();
        }
        if last_len == MAX_PAYLOAD || payload.is_empty() {
            self.put_header(0);
        }
    }

    /// Queues bytes that already are MySQL packets (a relayed answer); flushes when enough is
    /// buffered.
    pub async fn write_raw(&mut self, packets: Bytes) -> Result<(), Error> {
        self.track_relayed(&packets);
        if self.wbuf.is_empty() && self.held.is_empty() {
            self.held = packets;
        } else {
            self.spill();
            self.wbuf.extend_from_slice(&packets);
        }
        if self.queued() >= FLUSH_AT {
            self.flush_part().await?;
        }
        Ok(())
    }

    /// Bytes queued to write.
    fn queued(&self) -> usize {
        self.wbuf.len() + self.held.len()
    }

    /// Moves the relayed bytes held without a copy into the write buffer, before anything is
    /// queued behind them.
    fn spill(&mut self) {
        if !self.held.is_empty() {
            self.wbuf.extend_from_slice(&std::mem::take(&mut self.held));
        }
    }

    /// Follows the packet headers of relayed bytes, so that a packet of the sidecar's own
    /// (an error ending a broken answer) takes the next sequence id, at a packet boundary.
    fn track_relayed(&mut self, data: &[u8]) {
        self.relayed.feed(data, &mut self.seq);
    }

    /// True unless a relayed packet was written in part: a packet of the sidecar's own may
    /// follow.
    pub fn at_packet_boundary(&self) -> bool {
        self.relayed.at_boundary()
    }

    /// Takes back the relayed packet a broken answer left half-written, when none of it was
    /// sent yet (an answer is sent whole at its end, or in parts once [`FLUSH_AT`] bytes are
    /// queued, a packet not whole held back), so that a packet of the sidecar's own may follow
    /// with that packet's sequence id. True when the writer is at a packet boundary.
    pub fn take_back_partial(&mut self) -> bool {
        if self.relayed.at_boundary() {
            return true;
        }
        let partial = self.relayed.tail().bytes;
        if partial > self.queued() {
            return false;
        }
        self.drop_queued_end(partial);
        if let Some(seq) = self.relayed.take_back_tail() {
            self.seq = seq;
        }
        true
    }

    /// Drops the last `n` bytes queued (not sent yet).
    fn drop_queued_end(&mut self, n: usize) {
        if self.held.is_empty() {
            self.wbuf.truncate(self.wbuf.len() - n);
        } else {
            self.held.truncate(self.held.len() - n);
        }
    }

    /// Queues a packet shorter than 16 MiB and remembers where it is.
    pub fn queue_packet_marked(&mut self, payload: &[u8]) -> QueuedPacket {
        self.spill();
        let at = self.wbuf.len() + 4;
        self.queue_packet(payload);
        QueuedPacket { flushes: self.flushes, at, len: payload.len().min(MAX_PAYLOAD - 1) }
    }

    /// Overwrites bytes of a queued packet's payload from `offset`; false (nothing changed)
    /// once the packet has been sent or when the bytes do not fit in it.
    pub fn patch_queued(&mut self, packet: QueuedPacket, offset: usize, bytes: &[u8]) -> bool {
        let fits = offset + bytes.len() <= packet.len;
        if packet.flushes != self.flushes || !fits {
            return false;
        }
        let start = packet.at + offset;
        self.wbuf[start..start + bytes.len()].copy_from_slice(bytes);
        true
    }

    fn put_header(&mut self, len: usize) {
        PacketHead::write(&mut self.wbuf, len, self.seq);
        self.seq = self.seq.wrapping_add(1);
    }

    /// Writes everything queued (the end of a turn).
    pub async fn flush(&mut self) -> Result<(), Error> {
        if self.compressed.is_some() {
            return self.send_compressed(true).await;
        }
        self.send(0).await
    }

    /// Writes what is queued while more of the answer follows. A relayed packet that may be a
    /// LOCAL INFILE request stays queued. In the compressed protocol, only the compressed
    /// packets the framing (`compressed_framing.rs`) has decided go: whole packets gathered up
    /// to the server's buffer size, a packet cut inside (never in its header), the rest of a
    /// large one alone once it is whole. So a client finds each packet within two compressed
    /// packets, and none ends exactly between two packets but after such a rest (a client that
    /// finds one ending at a result set's end takes it for the server's flush and expects the
    /// next packet to be numbered after the compressed packet, as a server renumbers them,
    /// MariaDB's `net_flush`, while relayed packets keep the upstream's numbers).
    async fn flush_part(&mut self) -> Result<(), Error> {
        if self.compressed.is_some() {
            return self.send_compressed(false).await;
        }
        self.send(self.possible_file_request().max(self.partial_relayed())).await
    }

    /// How many bytes at the end of the queue are a relayed packet not whole yet, when it is
    /// at most [`PARTIAL_HOLD_MAX`] bytes and none of it was sent: what a flush holds back.
    fn partial_relayed(&self) -> usize {
        let tail = self.relayed.tail();
        let held_whole = tail.len.is_none_or(|len| len <= PARTIAL_HOLD_MAX);
        if !tail.whole && held_whole && tail.bytes <= self.queued() { tail.bytes } else { 0 }
    }

    /// How many bytes at the end of the queue are a relayed packet that may be a LOCAL INFILE
    /// request (whole or in part): the last relayed packet, when its payload starts with 0xFB
    /// or has not begun yet, and is at most [`FILE_REQUEST_MAX`] bytes; 0 when there is none,
    /// or when some of it was sent already. (A text row whose first column is NULL starts
    /// with 0xFB too: only the turn's end tells them apart.)
    fn possible_file_request(&self) -> usize {
        let tail = self.relayed.tail();
        let may_be = match (tail.len, tail.first) {
            // A header in part.
            (None, _) => true,
            (Some(len), Some(first)) => first == packet::LOCAL_INFILE && len <= FILE_REQUEST_MAX,
            // Its payload not begun yet.
            (Some(len), None) => len > 0 && len <= FILE_REQUEST_MAX && !tail.whole,
        };
        if may_be && tail.bytes <= self.queued() { tail.bytes } else { 0 }
    }

    /// The payload of the LOCAL INFILE request that ends the queue, whole and not sent yet:
    /// the last relayed packet, when its payload starts with 0xFB. `None` otherwise.
    pub fn queued_file_request(&self) -> Option<&[u8]> {
        let tail = self.relayed.tail();
        let len = tail.len?;
        let whole = tail.whole && tail.first == Some(packet::LOCAL_INFILE);
        if !whole || self.possible_file_request() != tail.bytes {
            return None;
        }
        let queue = if self.held.is_empty() { &self.wbuf[..] } else { &self.held[..] };
        queue.get(queue.len() - len..)
    }

    /// Takes back the LOCAL INFILE request [`Self::queued_file_request`] finds (refused): a
    /// packet of the sidecar's own then takes its sequence id. Nothing if there is none.
    pub fn take_back_file_request(&mut self) {
        let Some(len) = self.queued_file_request().map(<[u8]>::len) else { return };
        self.drop_queued_end(PacketHead::LEN + len);
        self.relayed.take_back_tail();
        // The request's own id (the writer is past it, at a packet boundary).
        self.seq = self.seq.wrapping_sub(1);
    }

    /// Writes what is queued but its last `hold` bytes (not in the compressed protocol).
    async fn send(&mut self, hold: usize) -> Result<(), Error> {
        if !self.held.is_empty() {
            // A relayed answer in one piece, as it came (its held-back end stays, uncopied).
            let upto = self.held.len() - hold;
            if upto > 0 {
                self.flushes += 1;
                self.stream.write_all(&self.held[..upto]).await?;
                self.stream.flush().await?;
                self.held = self.held.slice(upto..);
            }
            return Ok(());
        }
        if self.wbuf.len() > hold {
            self.flushes += 1;
            let upto = self.wbuf.len() - hold;
            self.stream.write_all(&self.wbuf[..upto]).await?;
            // With TLS, `write_all` may leave the last records inside rustls when the socket
            // is full: only a flush sends them (else the client waits forever for its answer).
            self.stream.flush().await?;
            if hold == 0 {
                self.wbuf.clear();
            } else {
                drop(self.wbuf.split_to(upto));
            }
        }
        Ok(())
    }

    /// Writes the compressed packets decided so far, and at the turn's `end` the rest too.
    async fn send_compressed(&mut self, end: bool) -> Result<(), Error> {
        self.spill();
        let visible = match end {
            true => self.wbuf.len(),
            false => self.wbuf.len() - self.possible_file_request(),
        };
        let Some(z) = self.compressed.as_mut() else { return Ok(()) };
        let mut sent = 0;
        while let Some(n) = z.framing.next(&self.wbuf[sent..visible]) {
            z.seq = compressed::encode(&self.wbuf[sent..sent + n], z.seq, &mut z.zout);
            sent += n;
        }
        if end {
            z.framing.reset();
            if sent < self.wbuf.len() {
                z.seq = compressed::encode(&self.wbuf[sent..], z.seq, &mut z.zout);
                sent = self.wbuf.len();
            }
        }
        if sent == 0 {
            return Ok(());
        }
        self.flushes += 1;
        self.stream.write_all(&z.zout).await?;
        z.zout.clear();
        drop(self.wbuf.split_to(sent));
        self.stream.flush().await?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "packet_write_tests.rs"]
mod tests;
