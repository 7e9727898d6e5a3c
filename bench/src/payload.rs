//! Record values: pseudo-random letters from a 16-letter alphabet (so gzip
//! shrinks them by about half, like text, rather than not at all or to
//! nothing), and for e2e the send time embedded in the first bytes.

use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of the send time embedded at the start of an e2e value.
pub const STAMP_BYTES: usize = 8;

/// `size` bytes of letters, different for each seed.
pub fn value(size: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x & 15) as u8
        })
        .collect()
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Writes `nanos` into the first `STAMP_BYTES` of `value`.
pub fn stamp(value: &mut [u8], nanos: u64) {
    if let Some(head) = value.get_mut(..STAMP_BYTES) {
        head.copy_from_slice(&nanos.to_be_bytes());
    }
}

/// The time `stamp` wrote, if the value is long enough.
pub fn read_stamp(value: &[u8]) -> Option<u64> {
    let head: [u8; STAMP_BYTES] = value.get(..STAMP_BYTES)?.try_into().ok()?;
    Some(u64::from_be_bytes(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_short_values_have_none() {
        let mut v = value(32, 7);
        assert!(v.iter().all(|b| (b'a'..b'a' + 16).contains(b)));
        stamp(&mut v, 1_700_000_000_123_456_789);
        assert_eq!(read_stamp(&v), Some(1_700_000_000_123_456_789));
        assert_eq!(read_stamp(&v[..4]), None);
        assert_ne!(value(32, 1), value(32, 2));
    }
}
