//! Where a compressing client's answer is cut into compressed packets (sans-IO), close to the
//! server's own shape (MariaDB's `net_write_buff`), because clients read it with assumptions.
//!
//! mysql-connector-python's pure reader reads at most one more compressed packet when a
//! packet is incomplete and reads a packet's header from the bytes it has: a packet must end
//! in the compressed packet where it starts or in the next one, and its 4-byte header must not
//! be split. mysql_async takes a compressed packet that ends exactly at a result set's end for
//! the server's flush and renumbers what follows, while relayed packets keep the upstream's
//! sequence ids: mid-answer, a compressed packet must not end at a packet boundary.
//!
//! The rule, with the server's net buffer of [`GROUP`] bytes: whole packets gather while they
//! fit in it; a packet that does not fit is cut so that the compressed packet ends inside it,
//! at [`GROUP`] bytes but never before its whole header; the rest of the packet goes out alone
//! as one compressed packet when it is larger than [`GROUP`] (held until it is whole, as the
//! server sends it), else it starts the next group. An empty packet (a 16 MiB trailer) is never
//! cut: it joins its group, which may so exceed [`GROUP`] by 4 bytes. A group that went past
//! the buffer's end makes the next one that much shorter, so that the compressed packets end
//! where the server's do but where it would split a header. What follows the last decided cut
//! waits for more of the answer, or for its end, when everything goes.

use common::mysql::packets::PacketHead;

/// The server's net buffer (`net_buffer_length`'s default): whole packets gather in one
/// compressed packet while they fit.
pub const GROUP: usize = 16 * 1024;

/// The compressed packets' cuts, from the front of the bytes not sent yet.
#[derive(Debug, Default)]
pub struct Framing {
    /// Bytes at the front that are the rest of a packet the last compressed packet cut.
    rest: usize,
    /// How far the last group went past the server's buffer end (a header is not split, an
    /// empty packet not cut): the next group ends that much sooner, where the server's does.
    over: usize,
}

impl Framing {
    /// The length of the next compressed packet to send from the front of `queue` (the bytes
    /// not sent yet, whole packets from a boundary or the rest of a cut one), when it is
    /// decided; `None` while it waits for more of the answer. Once an answer is `Some`, the
    /// caller sends those bytes and passes what follows them next.
    pub fn next(&mut self, queue: &[u8]) -> Option<usize> {
        if self.rest > GROUP {
            // The rest of a large packet, alone and whole.
            if queue.len() < self.rest {
                return None;
            }
            self.over = 0;
            return Some(std::mem::take(&mut self.rest));
        }
        let limit = GROUP - self.over;
        let mut at = self.rest;
        loop {
            let head = PacketHead::parse(queue.get(at..)?)?;
            let end = at + PacketHead::LEN + head.len;
            if end <= limit || (head.len == 0 && at <= limit) {
                at = end;
                continue;
            }
            if head.len == 0 {
                // Empty packets one after another, which no server sends: the group is bounded
                // all the same, and ends before them.
                (self.rest, self.over) = (0, 0);
                return Some(at);
            }
            let cut = limit.max(at + PacketHead::LEN);
            if cut > queue.len() {
                return None;
            }
            self.rest = end - cut;
            // At most a header's worth: more only when the group began with a rest that
            // nearly filled it, which the server would have sent alone.
            self.over = (cut - limit).min(PacketHead::LEN);
            return Some(cut);
        }
    }

    /// Starts again at a packet boundary: the end of a turn sent everything queued.
    pub fn reset(&mut self) {
        *self = Framing::default();
    }
}

#[cfg(test)]
#[path = "compressed_framing_tests.rs"]
mod tests;
