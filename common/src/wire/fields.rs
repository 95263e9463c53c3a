//! The fields of a message head, as both typed heads (`step.rs`, `answer.rs`) write and read
//! them: bytes taken within the message, and unsigned LEB128 numbers of at most 10 bytes.

use crate::Error;

/// A message that ends inside its head.
const TRUNCATED: Error = Error::Wire("a message ends inside its head");

/// Appends `n` as an unsigned LEB128.
pub fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a message head from its start.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the message's first byte.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Where the next field begins.
    pub fn at(&self) -> usize {
        self.at
    }

    /// A big-endian `u32`.
    pub fn u32_be(&mut self) -> Result<u32, Error> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        // (No error is made, nor dropped, on the way that succeeds.)
        let Some(taken) = self.bytes.get(self.at..self.at + n) else { return Err(TRUNCATED) };
        self.at += n;
        Ok(taken)
    }

    /// An unsigned LEB128 of at most 10 bytes that fits in a `u64`.
    pub fn varint(&mut self) -> Result<u64, Error> {
        let mut n = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(Error::Wire("a number over 64 bits"));
            }
            n |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Error::Wire("a number over 64 bits"))
    }
}
