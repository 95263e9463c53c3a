//! Proof that a resumed answer continues the bytes the sidecar already has: both sides keep a
//! CRC-32 of the answer, and the transport's resumed answer states the offset it resumes from
//! and the CRC of everything before it. A sidecar whose own figures differ refuses the answer
//! (a clean lost connection) before any byte of it reaches a client.

/// Header of a resumed answer: the byte of the answer it starts at.
pub const RESUMED_FROM_HEADER: &str = "x-tunnel-resumed-from";
/// Header of a resumed answer: the CRC-32 (8 hex digits) of the answer's bytes before it.
pub const ANSWER_CRC_HEADER: &str = "x-tunnel-answer-crc";

/// A running CRC-32 of an answer and its length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AnswerDigest {
    crc: u32,
    len: u64,
}

impl AnswerDigest {
    /// Takes the next bytes of the answer.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut hasher = crc32fast::Hasher::new_with_initial_len(self.crc, self.len);
        hasher.update(bytes);
        self.crc = hasher.finalize();
        self.len += bytes.len() as u64;
    }

    /// This digest followed by `bytes`.
    pub fn then(mut self, bytes: &[u8]) -> Self {
        self.update(bytes);
        self
    }

    /// Bytes taken.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before the first byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CRC as its header value.
    pub fn crc_header(&self) -> String {
        self.proof().crc_header()
    }

    /// What a resumed answer starting after these bytes states: their length and CRC.
    pub fn proof(&self) -> ResumeProof {
        ResumeProof { from: self.len, crc: self.crc }
    }

    /// Checks the proof a resumed answer stated (`None`: it stated none, or not readably)
    /// against what was received.
    pub fn check_resumed(&self, stated: Option<ResumeProof>) -> Result<(), crate::Error> {
        let Some(stated) = stated else { return Err(crate::Error::ResumeUnstated) };
        if stated.from != self.len {
            return Err(crate::Error::ResumedElsewhere { from: stated.from, broke_at: self.len });
        }
        if stated.crc != self.crc {
            let (from, stated, kept) = (stated.from, stated.crc, self.crc);
            return Err(crate::Error::ResumeDiffers { from, stated, kept });
        }
        Ok(())
    }
}

/// Where a resumed answer starts and the CRC-32 of the bytes before it: what the transport
/// states ([`RESUMED_FROM_HEADER`], [`ANSWER_CRC_HEADER`]) and the sidecar checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeProof {
    /// The answer's byte it resumes from.
    pub from: u64,
    /// The CRC-32 of the bytes before it.
    pub crc: u32,
}

impl ResumeProof {
    /// The proof the two headers' values state, if both are there and readable.
    pub fn parse(from: Option<&str>, crc: Option<&str>) -> Option<Self> {
        let from = from?.trim().parse().ok()?;
        let crc = u32::from_str_radix(crc?.trim(), 16).ok()?;
        Some(Self { from, crc })
    }

    /// The CRC as its header's value: 8 hex digits.
    pub fn crc_header(&self) -> String {
        format!("{:08x}", self.crc)
    }
}

/// Bytes of an answer held unhashed, at most: a larger piece is hashed as it arrives.
const HOLD_AT_MOST: usize = 64 * 1024;

/// An [`AnswerDigest`] that hashes the pieces it holds only when it is asked for (a resume)
/// or when they would exceed [`HOLD_AT_MOST`]: an answer of a few pieces, as most are, is
/// never hashed, and the bytes reach their client without waiting for the CRC. The held
/// pieces are shared, not copied.
#[derive(Debug, Clone, Default)]
pub struct HeldDigest {
    hashed: AnswerDigest,
    /// The first piece held (most answers have one).
    first: Option<bytes::Bytes>,
    /// The pieces held after it.
    more: Vec<bytes::Bytes>,
    /// Bytes held.
    held: usize,
}

impl HeldDigest {
    /// Takes the next piece of the answer.
    pub fn push(&mut self, piece: bytes::Bytes) {
        if self.held + piece.len() > HOLD_AT_MOST {
            self.settle();
        }
        if piece.len() > HOLD_AT_MOST {
            self.hashed.update(&piece);
            return;
        }
        self.held += piece.len();
        if self.first.is_none() {
            self.first = Some(piece);
        } else {
            self.more.push(piece);
        }
    }

    /// Takes the next bytes of the answer, hashed now.
    pub fn update(&mut self, bytes: &[u8]) {
        self.settle();
        self.hashed.update(bytes);
    }

    /// Bytes taken.
    pub fn len(&self) -> u64 {
        self.hashed.len() + self.held as u64
    }

    /// True before the first byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The digest of every byte taken.
    pub fn settle(&mut self) -> &AnswerDigest {
        if let Some(first) = self.first.take() {
            self.hashed.update(&first);
            for piece in self.more.drain(..) {
                self.hashed.update(&piece);
            }
            self.held = 0;
        }
        &self.hashed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_digest_is_the_digest_of_every_byte_pushed() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13 % 251) as u8).collect();
        let whole = AnswerDigest::default().then(&data);
        // Pieces small and large (over what is held), pushed or updated.
        let many: Vec<usize> = (1..60).map(|i| i * 3_000).collect();
        for cuts in [vec![], vec![1], vec![10, 70_000], vec![100_000, 100_001, 199_999], many] {
            let mut held = HeldDigest::default();
            let mut at = 0;
            for (i, cut) in cuts.iter().copied().chain([data.len()]).enumerate() {
                let piece = bytes::Bytes::copy_from_slice(&data[at..cut]);
                if i % 2 == 0 || cuts.len() > 10 {
                    held.push(piece)
                } else {
                    held.update(&piece)
                }
                assert_eq!(held.len(), cut as u64);
                at = cut;
            }
            assert_eq!(*held.settle(), whole, "cut at {cuts:?}");
            assert_eq!(*held.settle(), whole, "settled twice");
        }
        assert!(HeldDigest::default().is_empty());
    }

    #[test]
    fn a_digest_is_the_same_however_the_bytes_are_split() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = AnswerDigest::default().then(&data);
        assert_eq!(whole.crc, crc32fast::hash(&data));
        for split in [0, 1, 4_999, 9_999, 10_000] {
            let parts = AnswerDigest::default().then(&data[..split]).then(&data[split..]);
            assert_eq!(parts, whole, "split at {split}");
        }
    }

    #[test]
    fn resumed_answers_are_checked_for_offset_and_content() {
        let got = AnswerDigest::default().then(b"hello ");
        let header = got.crc_header();
        let stated = |from, crc: &str| ResumeProof::parse(from, Some(crc));
        assert_eq!(stated(Some("6"), &header), Some(got.proof()), "the headers read back");
        assert!(got.check_resumed(stated(Some("6"), &header)).is_ok());
        let other = AnswerDigest::default().then(b"hellO ").crc_header();
        let differs = got.check_resumed(stated(Some("6"), &other));
        assert!(matches!(differs, Err(crate::Error::ResumeDiffers { from: 6, .. })), "{differs:?}");
        let elsewhere = got.check_resumed(stated(Some("5"), &header));
        let at_5 = crate::Error::ResumedElsewhere { from: 5, broke_at: 6 };
        assert_eq!(elsewhere.map_err(|e| e.to_string()), Err(at_5.to_string()));
        for unstated in [stated(None, &header), stated(Some("6"), "zz"), stated(Some("x"), &header)]
        {
            assert!(matches!(got.check_resumed(unstated), Err(crate::Error::ResumeUnstated)));
        }
    }
}
