//! `BatchHeader`: the fixed 56 bytes in front of a batch's records, 72
//! in version 2 (`layout.rs` gives every byte). [`read`] is the one reader of those
//! bytes and [`BatchHeader::to_bytes`] the one writer;
//! [`BatchHeader::parse`] adds the checks every decoder relies on.

use crate::cursor::Cursor;
use crate::layout::{
    ATTR_CONTROL, ATTR_ENTRY_END, HEADER_BYTES, HEADER_V2_BYTES, MAGIC, MAGIC_V2, RECORD_OVERHEAD_BYTES,
};
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
    /// Version 2 only: the Raft entry the batch belongs to.
    pub raft: Option<RaftStamp>,
}

/// What a version 2 header adds: the batch's Raft entry `(term, index)`,
/// whether it is a zero-width control batch, and whether it ends its entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct RaftStamp {
    pub term: u64,
    pub index: u64,
    pub control: bool,
    pub entry_end: bool,
}

impl RaftStamp {
    /// The `attributes` byte of this stamp.
    pub fn attributes(&self) -> u8 {
        (if self.control { ATTR_CONTROL } else { 0 }) | (if self.entry_end { ATTR_ENTRY_END } else { 0 })
    }
}

impl BatchHeader {
    /// The offset after the last record of this batch; the base offset for
    /// a zero-width control batch.
    pub fn next_offset(&self) -> Offset {
        if self.is_control() {
            return self.base_offset;
        }
        self.base_offset.plus(self.last_offset_delta as u64 + 1)
    }

    /// A zero-width control batch (version 2): no records, no offset.
    pub fn is_control(&self) -> bool {
        self.raft.is_some_and(|r| r.control)
    }

    /// Bytes of the header: where the records (or a control body) start.
    pub fn header_len(&self) -> usize {
        if self.raft.is_some() {
            HEADER_V2_BYTES
        } else {
            HEADER_BYTES
        }
    }

    /// Whether the batch ends a Raft entry: a version 2 batch with
    /// `ENTRY_END`, or any version 1 batch (each is its own unit).
    pub fn ends_entry(&self) -> bool {
        self.raft.is_none_or(|r| r.entry_end)
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
        if magic != MAGIC && magic != MAGIC_V2 {
            return Err(BatchError::Malformed(format!("unknown magic {magic}")));
        }
        let len = h.batch_len as usize;
        let min = match h.raft {
            None => BATCH_BYTES_MIN,
            Some(r) if r.control => HEADER_V2_BYTES + 1,
            Some(_) => HEADER_V2_BYTES + RECORD_OVERHEAD_BYTES,
        };
        if !(min..=BATCH_BYTES_MAX).contains(&len) {
            return Err(BatchError::Malformed(format!("batch length {len} out of range")));
        }
        if let Some(attributes) = buf
            .get(crate::layout::ATTRIBUTES_AT)
            .filter(|_| magic == MAGIC_V2)
        {
            if attributes & !(ATTR_CONTROL | ATTR_ENTRY_END) != 0 {
                return Err(BatchError::Malformed(format!(
                    "unknown attributes {attributes:#04x}"
                )));
            }
        }
        if h.is_control() {
            if h.record_count != 0 || h.last_offset_delta != 0 {
                return Err(BatchError::Malformed("a control batch holds no records".into()));
            }
            return Ok(h);
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
    /// A version 2 header is 72 bytes: [`to_bytes_v2`](Self::to_bytes_v2).
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        self.write_common(&mut out);
        out
    }

    /// A version 2 header's 72 bytes (a version 1 header gets stamp 0).
    pub fn to_bytes_v2(&self) -> [u8; HEADER_V2_BYTES] {
        let r = self.raft.unwrap_or_default();
        let mut out = [0u8; HEADER_V2_BYTES];
        self.write_common(&mut out);
        out[16] = MAGIC_V2;
        out[17] = r.attributes();
        out[56..64].copy_from_slice(&r.term.to_le_bytes());
        out[64..72].copy_from_slice(&r.index.to_le_bytes());
        out
    }

    /// Writes the 56 bytes both versions share, as version 1 has them,
    /// at the start of `out` (at least that long).
    fn write_common(&self, out: &mut [u8]) {
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
        let mut at = 0;
        for field in fields {
            let end = at + field.len();
            if let Some(dst) = out.get_mut(at..end) {
                dst.copy_from_slice(field);
            }
            at = end;
        }
        debug_assert_eq!(at, HEADER_BYTES, "the fields fill the header");
    }
}

/// Reads the header fields at the start of `buf` as they are, checking
/// nothing, with the magic byte; `None` if `buf` is shorter than a header
/// (72 bytes for magic 2). Version 1's attributes are not read.
pub(crate) fn read(buf: &[u8]) -> Option<(BatchHeader, u8)> {
    let mut c = Cursor::new(buf.get(..HEADER_BYTES)?);
    let base_offset = Offset(c.u64()?);
    let batch_len = c.u32()?;
    let crc = c.u32()?;
    let magic = c.u8()?;
    let attributes = c.u8()?;
    let epoch = c.i16()?;
    let record_count = c.u32()?;
    let last_offset_delta = c.u32()?;
    let base_sequence = c.i32()?;
    let first_timestamp_ms = c.i64()?;
    let max_timestamp_ms = c.i64()?;
    let producer_id = c.i64()?;
    debug_assert_eq!(c.remaining(), 0, "the fields fill the header");
    let raft = if magic == MAGIC_V2 {
        let mut c = Cursor::new(buf.get(HEADER_BYTES..HEADER_V2_BYTES)?);
        Some(RaftStamp {
            term: c.u64()?,
            index: c.u64()?,
            control: attributes & ATTR_CONTROL != 0,
            entry_end: attributes & ATTR_ENTRY_END != 0,
        })
    } else {
        None
    };
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
        raft,
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
            raft: None,
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
        let stamp = RaftStamp {
            term: 0x8182_8384_8586_8788,
            index: 0x9192_9394_9596_9798,
            control: false,
            entry_end: true,
        };
        let v2 = BatchHeader {
            raft: Some(stamp),
            ..h
        };
        let bytes = v2.to_bytes_v2();
        assert_eq!(read(&bytes), Some((v2, MAGIC_V2)));
        assert_eq!(bytes[17], ATTR_ENTRY_END);
        assert_eq!(
            read(&bytes[..HEADER_V2_BYTES - 1]),
            None,
            "a v2 header is 72 bytes"
        );
        assert_eq!(v2.header_len(), HEADER_V2_BYTES);
    }

    #[test]
    fn a_control_batch_is_zero_width_and_unknown_attributes_are_refused() {
        let mut h = BatchHeader {
            base_offset: Offset(10),
            batch_len: (HEADER_V2_BYTES + 1) as u32,
            crc: 0,
            record_count: 0,
            last_offset_delta: 0,
            first_timestamp_ms: 0,
            max_timestamp_ms: 0,
            producer: ProducerStamp::NONE,
            raft: Some(RaftStamp {
                term: 1,
                index: 1,
                control: true,
                entry_end: true,
            }),
        };
        let parsed = BatchHeader::parse(&h.to_bytes_v2()).unwrap();
        assert_eq!(parsed.next_offset(), Offset(10), "zero width");
        assert!(parsed.is_control() && parsed.ends_entry());
        let mut bytes = h.to_bytes_v2();
        bytes[17] |= 4;
        assert!(BatchHeader::parse(&bytes).is_err(), "unknown attribute bit");
        h.record_count = 1;
        assert!(
            BatchHeader::parse(&h.to_bytes_v2()).is_err(),
            "records in a control batch"
        );
        h.record_count = 0;
        h.raft = Some(RaftStamp {
            control: false,
            ..h.raft.unwrap()
        });
        assert!(
            BatchHeader::parse(&h.to_bytes_v2()).is_err(),
            "a data batch needs a record"
        );
    }
}
