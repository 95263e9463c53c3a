//! COM_STMT_SEND_LONG_DATA carried with the execute that uses it: the command body starts
//! with `[count u16][param u16, length u32, bytes]…` when `X-Tunnel-Long-Data` is present.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::Error;

/// Header marking a command body that starts with long data.
pub const LONG_DATA_HEADER: &str = "x-tunnel-long-data";

/// Appends the long-data prefix for `(parameter index, data)` pairs.
pub fn encode_long_data<'a>(
    buf: &mut BytesMut,
    params: impl ExactSizeIterator<Item = (u16, &'a [u8])>,
) {
    buf.put_u16_le(u16::try_from(params.len()).unwrap_or(u16::MAX));
    for (param, data) in params {
        buf.put_u16_le(param);
        buf.put_u32_le(u32::try_from(data.len()).unwrap_or(u32::MAX));
        buf.put_slice(data);
    }
}

/// Splits a body into its long-data entries and the command payload after them.
pub fn decode_long_data(mut body: Bytes) -> Result<(Vec<(u16, Bytes)>, Bytes), Error> {
    let short = || Error::Wire("long data prefix truncated");
    if body.len() < 2 {
        return Err(short());
    }
    let count = body.get_u16_le();
    let mut params = Vec::with_capacity(usize::from(count).min(64));
    for _ in 0..count {
        if body.len() < 6 {
            return Err(short());
        }
        let param = body.get_u16_le();
        let len = body.get_u32_le() as usize;
        if body.len() < len {
            return Err(short());
        }
        params.push((param, body.split_to(len)));
    }
    Ok((params, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_truncation() {
        let mut buf = BytesMut::new();
        let entries: Vec<(u16, &[u8])> = vec![(0, b"abc"), (2, b"")];
        encode_long_data(&mut buf, entries.into_iter());
        buf.put_slice(b"\x17rest");
        let (params, rest) = decode_long_data(buf.freeze()).expect("decodes");
        assert_eq!(params, vec![(0, Bytes::from_static(b"abc")), (2, Bytes::new())]);
        assert_eq!(&rest[..], b"\x17rest");
        assert!(decode_long_data(Bytes::from_static(&[1, 0, 0, 0, 9, 0, 0, 0, 1])).is_err());
        assert!(decode_long_data(Bytes::from_static(&[1])).is_err());
    }
}
