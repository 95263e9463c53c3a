//! zstd between the transport and the sidecar. Answer streams (`Content-Encoding: zstd`, asked
//! for with `Accept-Encoding`): each chunk is compressed and flushed at once, so no frame waits
//! for more data; the decoder gives out bounded pieces, so a small compressed input cannot fill
//! memory. Large requests: compressed whole, with their decoded length, which bounds decoding.

use std::io;

use bytes::{Bytes, BytesMut};
use zstd::stream::raw::{DParameter, Decoder, Encoder, InBuffer, Operation, OutBuffer};

/// Largest window a decoder takes (2^23 bytes, 8 MiB).
const MAX_WINDOW_LOG: u32 = 23;

/// The content coding's name.
pub const ZSTD: &str = "zstd";

/// zstd's level for answers: fast (about 1 µs per KiB), most of the gain on text rows.
const LEVEL: i32 = 1;

/// Most bytes of a chunk compressed before a flush.
const FLUSH_EVERY: usize = 16 * 1024;

/// Compresses a stream chunk by chunk.
pub struct ChunkCompressor {
    encoder: Encoder<'static>,
}

impl std::fmt::Debug for ChunkCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkCompressor")
    }
}

impl ChunkCompressor {
    /// A compressor for one stream.
    pub fn new() -> io::Result<Self> {
        Ok(Self { encoder: Encoder::new(LEVEL)? })
    }

    /// The compressed form of `chunk`, flushed every [`FLUSH_EVERY`] bytes of it: the peer
    /// decodes each piece as it arrives (a large chunk, such as the rest of an answer sent
    /// again after a cut, does not have to arrive whole before any of it can be used).
    pub fn compress(&mut self, chunk: &[u8]) -> io::Result<Bytes> {
        let mut out = Vec::with_capacity(chunk.len() / 2 + 64);
        for piece in chunk.chunks(FLUSH_EVERY) {
            let mut input = InBuffer::around(piece);
            while input.pos() < piece.len() {
                out.reserve(piece.len() - input.pos() + 64);
                let at = out.len();
                let mut output = OutBuffer::around_pos(&mut out, at);
                self.encoder.run(&mut input, &mut output)?;
            }
            self.flush_into(&mut out)?;
        }
        if chunk.is_empty() {
            self.flush_into(&mut out)?;
        }
        Ok(Bytes::from(out))
    }

    /// Flushes what the encoder holds into `out`.
    fn flush_into(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        loop {
            out.reserve(1024);
            let at = out.len();
            let mut output = OutBuffer::around_pos(out, at);
            if self.encoder.flush(&mut output)? == 0 {
                return Ok(());
            }
        }
    }

    /// The end of the stream's zstd frame.
    pub fn finish(&mut self) -> io::Result<Bytes> {
        let mut out = Vec::with_capacity(64);
        loop {
            out.reserve(1024);
            let at = out.len();
            let mut output = OutBuffer::around_pos(&mut out, at);
            if self.encoder.finish(&mut output, true)? == 0 {
                return Ok(Bytes::from(out));
            }
        }
    }
}

/// A whole request body compressed.
pub fn compress_whole(data: &[u8]) -> io::Result<Bytes> {
    let mut compressor = ChunkCompressor::new()?;
    let mut out = BytesMut::from(&compressor.compress(data)?[..]);
    out.extend_from_slice(&compressor.finish()?);
    Ok(out.freeze())
}

/// A whole request body decompressed; an error unless it decodes to exactly `len` bytes.
pub fn decompress_exact(data: &[u8], len: usize) -> io::Result<Bytes> {
    let mut decompressor = StreamDecompressor::new()?;
    decompressor.push(data);
    let mut out = BytesMut::with_capacity(len);
    loop {
        // One byte past `len` is enough to know the body is longer than announced.
        let room = (len + 1).saturating_sub(out.len()).min(1 << 20);
        if room == 0 || decompressor.pull(&mut out, room)? == 0 {
            break;
        }
    }
    if out.len() != len || !decompressor.is_drained() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the body decodes to {} bytes, not the {len} announced", out.len()),
        ));
    }
    Ok(out.freeze())
}

/// Decompresses a stream, a bounded piece at a time.
pub struct StreamDecompressor {
    decoder: Decoder<'static>,
    /// Compressed bytes not consumed yet.
    pending: BytesMut,
}

impl std::fmt::Debug for StreamDecompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDecompressor").field("pending", &self.pending.len()).finish()
    }
}

impl StreamDecompressor {
    /// A decompressor for one stream.
    pub fn new() -> io::Result<Self> {
        let mut decoder = Decoder::new()?;
        // A crafted frame may ask for a window of up to 128 MiB (zstd's default limit); the
        // tunnel's own frames need far less (its level keeps windows at most 8 MiB).
        decoder.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))?;
        Ok(Self { decoder, pending: BytesMut::new() })
    }

    /// Takes compressed bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// True when no compressed byte waits.
    pub fn is_drained(&self) -> bool {
        self.pending.is_empty()
    }

    /// Decompresses into `out` until `max` bytes were added or the input is used up;
    /// returns the bytes added.
    pub fn pull(&mut self, out: &mut BytesMut, max: usize) -> io::Result<usize> {
        let start = out.len();
        out.resize(start + max, 0);
        let mut input = InBuffer::around(&self.pending);
        let mut written = 0;
        let result = loop {
            if written >= max {
                break Ok(());
            }
            let mut output = OutBuffer::around_pos(&mut out[start..], written);
            let before = input.pos();
            if let Err(e) = self.decoder.run(&mut input, &mut output) {
                break Err(e);
            }
            let now = output.pos();
            if input.pos() == before && now == written {
                break Ok(());
            }
            written = now;
        };
        out.truncate(start + written);
        let used = input.pos();
        drop(self.pending.split_to(used));
        result.map(|()| written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_asking_for_a_large_window_is_refused() {
        use std::io::Write;
        let body = b"a small body, a large window";
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), LEVEL).expect("encoder");
        encoder.set_parameter(zstd::stream::raw::CParameter::WindowLog(26)).expect("window");
        encoder.write_all(body).expect("compress");
        let frame = encoder.finish().expect("finish");
        assert_eq!(zstd::decode_all(&frame[..]).expect("a valid frame"), body);
        assert!(decompress_exact(&frame, body.len()).is_err(), "a 64 MiB window is not taken");
    }

    fn roundtrip(chunks: &[&[u8]], piece: usize) -> Vec<u8> {
        let mut c = ChunkCompressor::new().expect("compressor");
        let mut d = StreamDecompressor::new().expect("decompressor");
        let mut out = BytesMut::new();
        for chunk in chunks {
            d.push(&c.compress(chunk).expect("compress"));
            // Each flushed chunk decodes completely, before the next arrives.
            while d.pull(&mut out, piece).expect("decompress") > 0 {}
        }
        d.push(&c.finish().expect("finish"));
        while d.pull(&mut out, piece).expect("decompress") > 0 {}
        assert!(d.is_drained());
        out.to_vec()
    }

    #[test]
    fn chunks_come_back_whole_and_in_order() {
        let text: Vec<u8> =
            (0..50_000u32).flat_map(|i| format!("row {i}\n").into_bytes()).collect();
        let chunks: Vec<&[u8]> = text.chunks(7_000).collect();
        assert_eq!(roundtrip(&chunks, 1 << 16), text);
        assert_eq!(roundtrip(&chunks, 100), text, "in small pieces too");
        assert_eq!(roundtrip(&[b"", b"x", b""], 10), b"x");
    }

    #[test]
    fn a_large_chunk_decodes_piece_by_piece() {
        let text: Vec<u8> = (0..40_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut c = ChunkCompressor::new().expect("compressor");
        let packed = c.compress(&text).expect("compress");
        // The first half of the compressed bytes already gives some of the data.
        let mut d = StreamDecompressor::new().expect("decompressor");
        d.push(&packed[..packed.len() / 2]);
        let mut out = BytesMut::new();
        while d.pull(&mut out, 1 << 16).expect("decompress") > 0 {}
        assert!(out.len() >= FLUSH_EVERY, "only {} bytes from half the stream", out.len());
        assert_eq!(&out[..], &text[..out.len()]);
    }

    #[test]
    fn pieces_stay_within_their_bound() {
        let zeros = vec![0u8; 4 << 20];
        let mut c = ChunkCompressor::new().expect("compressor");
        let compressed = c.compress(&zeros).expect("compress");
        assert!(compressed.len() < 4096, "zeros shrink: {}", compressed.len());
        let mut d = StreamDecompressor::new().expect("decompressor");
        d.push(&compressed);
        let mut out = BytesMut::new();
        assert!(d.pull(&mut out, 65_536).expect("pull") <= 65_536);
        assert!(out.len() <= 65_536);
    }

    #[test]
    fn whole_bodies_decode_to_their_announced_length_only() {
        let body: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let packed = compress_whole(&body).expect("compress");
        assert_eq!(decompress_exact(&packed, body.len()).expect("decode"), body);
        assert!(decompress_exact(&packed, body.len() - 1).is_err(), "longer than announced");
        assert!(decompress_exact(&packed, body.len() + 1).is_err(), "shorter than announced");
        assert!(decompress_exact(b"garbage", 10).is_err());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut d = StreamDecompressor::new().expect("decompressor");
        d.push(b"this is not zstd at all");
        assert!(d.pull(&mut BytesMut::new(), 1024).is_err());
    }
}
