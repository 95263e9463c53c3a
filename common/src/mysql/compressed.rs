//! The MySQL compressed protocol (CLIENT_COMPRESS), sans-IO: the byte stream of ordinary
//! packets travels inside compressed packets, each a 7-byte header (compressed length, its own
//! sequence id, uncompressed length or 0 when sent as it is) and a zlib stream. A logical
//! packet may span compressed packets, and one compressed packet may hold several.

use std::io::Write;

use bytes::{Buf, BufMut, BytesMut};
use flate2::write::ZlibEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};

use crate::Error;

/// Bytes of a compressed packet's header.
pub const HEADER_LEN: usize = 7;
/// Most bytes one compressed packet carries (either length field is 3 bytes).
const MAX_CHUNK: usize = 0xff_ffff;
/// Shorter data is sent as it is, as servers do (MIN_COMPRESS_LENGTH).
const MIN_COMPRESS: usize = 50;

/// Takes one whole compressed packet from the front of `input`, appending what it carries to
/// `out`; answers its sequence id, or `None` when it has not fully arrived. An inflated size
/// over `max` is refused before anything is inflated.
pub fn decode(input: &mut BytesMut, out: &mut BytesMut, max: usize) -> Result<Option<u8>, Error> {
    if input.len() < HEADER_LEN {
        return Ok(None);
    }
    let stored = usize::from(input[0]) | usize::from(input[1]) << 8 | usize::from(input[2]) << 16;
    let seq = input[3];
    let inflated = usize::from(input[4]) | usize::from(input[5]) << 8 | usize::from(input[6]) << 16;
    if input.len() < HEADER_LEN + stored {
        input.reserve(HEADER_LEN + stored - input.len());
        return Ok(None);
    }
    if inflated > max {
        return Err(Error::CompressedTooLarge(inflated));
    }
    input.advance(HEADER_LEN);
    let body = input.split_to(stored);
    if inflated == 0 {
        out.extend_from_slice(&body);
        return Ok(Some(seq));
    }
    let start = out.len();
    // One byte more than announced is room enough to see a lie.
    out.resize(start + inflated + 1, 0);
    let mut zlib = Decompress::new(true);
    let status = zlib.decompress(&body, &mut out[start..], FlushDecompress::Finish);
    let (read, written) = (zlib.total_in() as usize, zlib.total_out() as usize);
    match status {
        Ok(Status::StreamEnd) if written == inflated => {}
        // All of it read and all the data it announced there, but for the zlib stream's end
        // (its Adler-32, or the final block's end): mysql_common 0.37 leaves the checksum off
        // at times (its `compress` stops when its buffer is full to the byte). A server
        // refuses such a packet; the data is whole, so the tunnel takes it.
        Ok(_) if written == inflated && read == body.len() => {}
        _ => {
            out.truncate(start);
            return Err(Error::CompressedCorrupt(inflated));
        }
    }
    out.truncate(start + inflated);
    Ok(Some(seq))
}

/// Appends `data` to `out` as compressed packets numbered from `seq` (each at most 16 MiB of
/// data; what is short is sent as it is); answers the next sequence id.
pub fn encode(data: &[u8], mut seq: u8, out: &mut BytesMut) -> u8 {
    for chunk in data.chunks(MAX_CHUNK) {
        let packed = (chunk.len() >= MIN_COMPRESS).then(|| deflate(chunk)).flatten();
        let (body, inflated) = match &packed {
            Some(packed) if packed.len() < chunk.len() => (&packed[..], chunk.len()),
            _ => (chunk, 0),
        };
        out.reserve(HEADER_LEN + body.len());
        out.put_uint_le(body.len() as u64, 3);
        out.put_u8(seq);
        out.put_uint_le(inflated as u64, 3);
        out.put_slice(body);
        seq = seq.wrapping_add(1);
    }
    seq
}

fn deflate(data: &[u8]) -> Option<Vec<u8>> {
    let mut encoder = ZlibEncoder::new(Vec::with_capacity(data.len() / 2), Compression::fast());
    encoder.write_all(data).ok()?;
    encoder.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(wire: &[u8], step: usize) -> Result<(Vec<u8>, Vec<u8>), String> {
        let (mut input, mut out, mut seqs) = (BytesMut::new(), BytesMut::new(), Vec::new());
        for piece in wire.chunks(step.max(1)) {
            input.extend_from_slice(piece);
            while let Some(seq) =
                decode(&mut input, &mut out, 1 << 24).map_err(|e| e.to_string())?
            {
                seqs.push(seq);
            }
        }
        assert!(input.is_empty(), "every packet was taken");
        Ok((out.to_vec(), seqs))
    }

    #[test]
    fn data_comes_back_whatever_the_split() {
        let text: Vec<u8> = (0..3_000u32).flat_map(|i| format!("row {i};").into_bytes()).collect();
        let mut wire = BytesMut::new();
        let next = encode(b"short", 7, &mut wire);
        let next = encode(&text, next, &mut wire);
        assert_eq!(next, 9);
        assert_eq!(&wire[4..7], &[0, 0, 0], "short data is sent as it is");
        assert!(wire.len() < text.len() / 2, "the rest is compressed: {}", wire.len());
        let want = [&b"short"[..], &text].concat();
        for step in [1, 2, 6, 7, 8, 100, 4096, wire.len()] {
            assert_eq!(decode_all(&wire, step), Ok((want.clone(), vec![7, 8])), "step {step}");
        }
    }

    #[test]
    fn a_command_round_trips_with_its_sequence() {
        // COM_QUERY "SELECT REPEAT('a', 100)" in its packet, as a client compresses it.
        let payload = b"\x18\x00\x00\x00\x03SELECT REPEAT('a', 100)";
        let mut wire = BytesMut::new();
        assert_eq!(encode(payload, 0, &mut wire), 1);
        assert_eq!(wire[3], 0);
        assert_eq!(decode_all(&wire, 1), Ok((payload.to_vec(), vec![0])));
    }

    #[test]
    fn a_stream_whose_data_is_whole_is_read_without_its_checksum() {
        // As mysql_common 0.37 sends at times: the zlib stream without its 4-byte Adler-32.
        let command = [&b"\x3e\x00\x00\x00\x16INSERT INTO t VALUES "[..], &[b'?'; 45]].concat();
        let mut whole = BytesMut::new();
        encode(&command, 0, &mut whole);
        for missing in 1..=4 {
            let mut cut = whole.clone();
            cut.truncate(cut.len() - missing);
            cut[0] -= missing as u8;
            assert_eq!(decode_all(&cut, 5), Ok((command.clone(), vec![0])), "{missing} missing");
        }
        // Data cut short is still refused, however the lengths are made to agree.
        let mut short = whole.clone();
        short.truncate(short.len() - 6);
        short[0] -= 6;
        assert!(decode_all(&short, 5).is_err());
    }

    #[test]
    fn lies_and_garbage_are_errors() {
        let mut wire = BytesMut::new();
        encode(&[b'x'; 1000], 0, &mut wire);
        let mut lying = wire.clone();
        lying[4] = 0xe7; // announces 999 bytes
        assert!(decode_all(&lying, 64).is_err_and(|e| e.contains("999")));
        let mut garbage = wire.clone();
        for b in &mut garbage[HEADER_LEN..] {
            *b = 0x55;
        }
        assert!(decode_all(&garbage, 64).is_err());
        let mut bad_sum = wire.clone();
        let last = bad_sum.len() - 1;
        bad_sum[last] ^= 1;
        assert!(decode_all(&bad_sum, 64).is_err(), "a wrong checksum is refused");
        let mut input = wire.clone();
        let refused = decode(&mut input, &mut BytesMut::new(), 999);
        assert!(matches!(refused, Err(Error::CompressedTooLarge(1000))), "{refused:?}");
    }
}
