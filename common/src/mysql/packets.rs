//! MySQL packet headers and the few payload fields both halves read (sans-IO): the one place
//! a packet's 3-byte length is decoded, the one reader of length-encoded integers.

pub use super::packet::MAX_PAYLOAD;

/// A packet header: payload length and sequence id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketHead {
    /// Payload length.
    pub len: usize,
    /// Sequence id.
    pub seq: u8,
}

impl PacketHead {
    /// Header length.
    pub const LEN: usize = 4;

    /// The header at the start of `buf`, if four bytes are there.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        let h = buf.get(..Self::LEN)?;
        Some(Self {
            len: usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16,
            seq: h[3],
        })
    }

    /// Writes a header for a payload of `len` (< 16 MiB) bytes.
    pub fn write(buf: &mut impl bytes::BufMut, len: usize, seq: u8) {
        buf.put_uint_le(len as u64, 3);
        buf.put_u8(seq);
    }
}

/// A length-encoded integer at the start of `p`, and its width.
pub fn lenenc_int(p: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| {
        p.get(1..=n).map(|b| b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x)))
    };
    match *p.first()? {
        n @ 0..=0xfa => Some((u64::from(n), 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}

/// Status flags of an OK payload (header byte 0x00 or 0xFE, affected rows, insert id, status).
pub fn ok_status(p: &[u8]) -> Option<u16> {
    let (_, a) = lenenc_int(p.get(1..)?)?;
    let (_, b) = lenenc_int(p.get(1 + a..)?)?;
    let at = 1 + a + b;
    p.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

/// Splits a buffer of whole packets into (header, payload) pairs; `None` if one is cut short.
pub fn split_packets(mut buf: &[u8]) -> Option<Vec<(PacketHead, &[u8])>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let head = PacketHead::parse(buf)?;
        let payload = buf.get(PacketHead::LEN..PacketHead::LEN + head.len)?;
        out.push((head, payload));
        buf = &buf[PacketHead::LEN + head.len..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lenenc_ints_of_every_width() {
        assert_eq!(lenenc_int(&[0xfa]), Some((250, 1)));
        assert_eq!(lenenc_int(&[0xfc, 0x01, 0x02]), Some((0x0201, 3)));
        assert_eq!(lenenc_int(&[0xfd, 1, 2, 3]), Some((0x03_0201, 4)));
        assert_eq!(
            lenenc_int(&[0xfe, 1, 0, 0, 0, 0, 0, 0, 0x10]),
            Some((0x1000_0000_0000_0001, 9))
        );
        assert_eq!(lenenc_int(&[0xfc, 0x01]), None);
        assert_eq!(lenenc_int(&[0xfb]), None);
    }

    #[test]
    fn reads_ok_status_after_two_lenencs() {
        assert_eq!(ok_status(&[0, 0xfc, 1, 0, 5, 0x0a, 0, 0, 0]), Some(0x000a));
        assert_eq!(ok_status(&[0xfe, 0, 0, 0x22, 0]), Some(0x0022));
        assert_eq!(ok_status(&[0, 0, 0, 2]), None);
    }

    #[test]
    fn splits_whole_packets_only() {
        let buf = [1, 0, 0, 0, 9, 0, 0, 0, 1];
        let packets = split_packets(&buf).unwrap_or_default();
        assert_eq!(packets.len(), 2);
        assert_eq!(packets[0].1, &[9]);
        assert_eq!(packets[1].0, PacketHead { len: 0, seq: 1 });
        assert!(split_packets(&[2, 0, 0, 0, 9]).is_none());
    }
}
