//! `Cursor`: reads the format's little-endian fields front to back. A read
//! past the end is `None`, never a panic; it is the only way this crate
//! reads bytes it did not write.

/// A read position in a byte slice; every read moves it forward.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { rest: bytes }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>()?;
        self.rest = rest;
        Some(*head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(u8::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.array().map(i16::from_le_bytes)
    }

    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.array().map(i32::from_le_bytes)
    }

    pub(crate) fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_stops_at_the_end() {
        let bytes = [1, 0, 0, 0, 0xff, 0xff, 7];
        let mut c = Cursor::new(&bytes);
        assert_eq!(c.u32(), Some(1));
        assert_eq!(c.i16(), Some(-1));
        assert_eq!(c.remaining(), 1);
        assert_eq!(c.u32(), None, "a short read fails");
        assert_eq!(c.remaining(), 1, "and moves nothing");
        assert_eq!(c.take(2), None);
        assert_eq!(c.u8(), Some(7));
        assert_eq!(c.take(0), Some(&[][..]));
        assert_eq!(c.u8(), None);
    }
}
