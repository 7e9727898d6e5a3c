//! `BatchHeader`: the fixed 56 bytes in front of a batch's records
//! (`layout.rs` gives every byte). [`read`] is the one reader of those
//! bytes and [`BatchHeader::to_bytes`] the one writer;
//! [`BatchHeader::parse`] adds the checks every decoder relies on.

use crate::cursor::Cursor;
use crate::layout::{HEADER_BYTES, MAGIC};
use crate::limits::{BATCH_BYTES_MAX, BATCH_BYTES_MIN};
use crate::{BatchError, Offset, ProducerStamp};

/// The parsed fixed header of a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: Offset,
    pub batch_len: u32,
    pub crc: u32,
    pub record_count: u32,
    pub last_offset_delta: u32,
    pub first_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
    pub producer: ProducerStamp,
}

impl BatchHeader {
    /// The offset after the last record of this batch.
    pub fn next_offset(&self) -> Offset {
        self.base_offset.plus(self.last_offset_delta as u64 + 1)
    }

    /// The offset of the last record in this batch.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(self.last_offset_delta as u64)
    }

    /// Parses and sanity-checks a header from the start of `buf`: the magic,
    /// a length within the format's bounds, at least one record and no more
    /// than its offset deltas allow, offsets that do not overflow. Does not
    /// verify the checksum (that needs the whole batch: see
    /// [`check`](crate::batch::check)). A header that passes keeps
    /// [`next_offset`](Self::next_offset) from overflowing.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        let incomplete = BatchError::Incomplete {
            needed: HEADER_BYTES,
            have: buf.len(),
        };
        let (h, magic) = read(buf).ok_or(incomplete)?;
        if magic != MAGIC {
            return Err(BatchError::Malformed(format!("unknown magic {magic}")));
        }
        let len = h.batch_len as usize;
        if !(BATCH_BYTES_MIN..=BATCH_BYTES_MAX).contains(&len) {
            return Err(BatchError::Malformed(format!("batch length {len} out of range")));
        }
        if h.record_count == 0 || h.record_count as u64 > h.last_offset_delta as u64 + 1 {
            return Err(BatchError::Malformed(format!(
                "record count {} does not fit last offset delta {}",
                h.record_count, h.last_offset_delta
            )));
        }
        if h.base_offset
            .0
            .checked_add(h.last_offset_delta as u64 + 1)
            .is_none()
        {
            return Err(BatchError::Malformed("offset overflow".into()));
        }
        Ok(h)
    }

    /// The header's bytes in the layout of `layout.rs`: the fields as they
    /// are (the checksum too), magic and attributes as the format has them.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let p = self.producer;
        let fields: [&[u8]; 11] = [
            &self.base_offset.0.to_le_bytes(),
            &self.batch_len.to_le_bytes(),
            &self.crc.to_le_bytes(),
            &[MAGIC, 0], // magic, attributes
            &p.epoch.to_le_bytes(),
            &self.record_count.to_le_bytes(),
            &self.last_offset_delta.to_le_bytes(),
            &p.base_sequence.to_le_bytes(),
            &self.first_timestamp_ms.to_le_bytes(),
            &self.max_timestamp_ms.to_le_bytes(),
            &p.producer_id.to_le_bytes(),
        ];
        let mut out = [0u8; HEADER_BYTES];
        let mut at = 0;
        for field in fields {
            let end = at + field.len();
            if let Some(dst) = out.get_mut(at..end) {
                dst.copy_from_slice(field);
            }
            at = end;
        }
        debug_assert_eq!(at, HEADER_BYTES, "the fields fill the header");
        out
    }
}

/// Reads the header fields at the start of `buf` as they are, checking
/// nothing, with the magic byte; `None` if `buf` is shorter than a header.
pub(crate) fn read(buf: &[u8]) -> Option<(BatchHeader, u8)> {
    let mut c = Cursor::new(buf.get(..HEADER_BYTES)?);
    let base_offset = Offset(c.u64()?);
    let batch_len = c.u32()?;
    let crc = c.u32()?;
    let magic = c.u8()?;
    let _attributes = c.u8()?;
    let epoch = c.i16()?;
    let record_count = c.u32()?;
    let last_offset_delta = c.u32()?;
    let base_sequence = c.i32()?;
    let first_timestamp_ms = c.i64()?;
    let max_timestamp_ms = c.i64()?;
    let producer_id = c.i64()?;
    debug_assert_eq!(c.remaining(), 0, "the fields fill the header");
    let header = BatchHeader {
        base_offset,
        batch_len,
        crc,
        record_count,
        last_offset_delta,
        first_timestamp_ms,
        max_timestamp_ms,
        producer: ProducerStamp {
            producer_id,
            epoch,
            base_sequence,
        },
    };
    Some((header, magic))
}

/// The producer stamp of a batch header: `(producer_id, epoch,
/// base_sequence)`, or `None` for -1 (or fewer bytes than a header).
pub fn producer_of(batch: &[u8]) -> Option<(i64, i16, i32)> {
    let (h, _) = read(batch)?;
    let p = h.producer;
    (p.producer_id != -1).then_some((p.producer_id, p.epoch, p.base_sequence))
}

/// Records in a batch header; 0 for fewer bytes than a header.
pub fn record_count_of(batch: &[u8]) -> u32 {
    read(batch).map_or(0, |(h, _)| h.record_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_bytes_and_read_agree_on_every_field() {
        let h = BatchHeader {
            base_offset: Offset(0x0102_0304_0506_0708),
            batch_len: 0x1112_1314,
            crc: 0x2122_2324,
            record_count: 0x3132_3334,
            last_offset_delta: 0x4142_4344,
            first_timestamp_ms: -5,
            max_timestamp_ms: 0x5152_5354_5556_5758,
            producer: ProducerStamp {
                producer_id: 0x6162_6364_6566_6768,
                epoch: -2,
                base_sequence: 0x7172_7374,
            },
        };
        let bytes = h.to_bytes();
        assert_eq!(read(&bytes), Some((h, MAGIC)));
        assert_eq!(bytes[17], 0, "attributes");
        assert_eq!(
            &bytes[0..8],
            &0x0102_0304_0506_0708u64.to_le_bytes(),
            "little-endian"
        );
        assert_eq!(read(&bytes[..HEADER_BYTES - 1]), None);
        assert_eq!(
            producer_of(&bytes),
            Some((0x6162_6364_6566_6768, -2, 0x7172_7374))
        );
        assert_eq!(record_count_of(&bytes), 0x3132_3334);
        assert_eq!(record_count_of(&bytes[..10]), 0);
        assert_eq!(producer_of(&bytes[..10]), None);
    }
}
