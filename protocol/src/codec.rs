//! Bounds-checked big-endian readers and writers for payloads.
//!
//! Strings are a u16 (or u32 for long text) byte length then UTF-8 bytes;
//! optional bytes are an i32 length, -1 for none.

use crate::DecodeError;

/// Writes payload fields.
#[derive(Default, Debug)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// u16 length + UTF-8. Panics above 65535 bytes: callers bound names.
    pub fn str16(&mut self, s: &str) -> &mut Self {
        let len = u16::try_from(s.len()).expect("short strings fit u16");
        self.u16(len);
        self.buf.extend_from_slice(s.as_bytes());
        self
    }
    /// u32 length + UTF-8.
    pub fn str32(&mut self, s: &str) -> &mut Self {
        self.bytes32(s.as_bytes())
    }
    /// u32 length + bytes.
    pub fn bytes32(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
        self
    }
    /// i32 length (-1 for none) + bytes.
    pub fn opt_bytes(&mut self, b: Option<&[u8]>) -> &mut Self {
        match b {
            Some(b) => {
                self.i32(b.len() as i32);
                self.buf.extend_from_slice(b);
            }
            None => {
                self.i32(-1);
            }
        }
        self
    }
}

/// Reads payload fields, never past the end.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// The next `n` bytes; `pos` stays within `buf`.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        let s = self
            .buf
            .get(self.pos..)
            .and_then(|rest| rest.get(..n))
            .ok_or_else(|| DecodeError::malformed(format!("payload ends inside {what}")))?;
        self.pos += n;
        Ok(s)
    }

    /// The next `N` bytes, as an array.
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, what)?;
        s.try_into()
            .map_err(|_| DecodeError::malformed(format!("payload ends inside {what}")))
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(u8::from_be_bytes(self.array(what)?))
    }
    pub fn u16(&mut self, what: &str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }
    pub fn i64(&mut self, what: &str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
    pub fn str16(&mut self, what: &str) -> Result<String, DecodeError> {
        let n = self.u16(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::malformed(format!("{what} is not UTF-8")))
    }
    pub fn str32(&mut self, what: &str) -> Result<String, DecodeError> {
        let b = self.bytes32(what)?;
        String::from_utf8(b).map_err(|_| DecodeError::malformed(format!("{what} is not UTF-8")))
    }
    pub fn bytes32(&mut self, what: &str) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32(what)? as usize;
        Ok(self.take(n, what)?.to_vec())
    }
    pub fn opt_bytes(&mut self, what: &str) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.i32(what)? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::malformed(format!("{what} has negative length {n}"))),
            n => Ok(Some(self.take(n as usize, what)?.to_vec())),
        }
    }
    /// Everything left, consumed.
    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let s = self.buf.get(self.pos..).unwrap_or_default();
        self.pos = self.buf.len();
        s
    }
    /// Bytes left; a count field claiming more items than could fit is
    /// refused before anything is allocated for them.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Checks a count against the smallest encoding of one item.
    pub fn count(&mut self, what: &str, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(item_bytes_min) > self.remaining() {
            return Err(DecodeError::malformed(format!(
                "{what} {n} does not fit the payload"
            )));
        }
        Ok(n)
    }
    /// The payload must end here.
    pub fn finish(&self, what: &str) -> Result<(), DecodeError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(DecodeError::malformed(format!(
                "{} trailing bytes after {what}",
                self.buf.len() - self.pos
            )))
        }
    }
}
