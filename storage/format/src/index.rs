//! The sparse index of one segment: relative offset -> file position, with
//! the largest timestamp seen so far, so it also serves seek-by-time.
//!
//! The index is derived data. It is kept in memory for the active segment and
//! written to `<base>.index` when the segment is rolled or the partition is
//! closed cleanly. A file whose footer does not match its log exactly is
//! rebuilt from the log, never trusted over it.
//!
//! File layout (little-endian): `entry_count` entries of `ENTRY_BYTES`, then a
//! `FOOTER_BYTES` footer.
//!
//! ```text
//! entry:  0 u32 relative_offset   base offset of an indexed batch - segment base
//!         4 u32 position          byte position of that batch in the .log
//!         8 i64 max_timestamp_ms  largest timestamp in the segment up to and
//!                                 including that batch (monotonic)
//! footer: 0 u32 magic "ESIX" (0x58495345)
//!         4 u32 version = 1
//!         8 u32 entry_count
//!        12 u32 entries_crc       CRC-32 of all entry bytes
//!        16 u64 log_bytes         exact length of the .log this index describes
//!        24 u64 next_offset       offset after the last record of the segment
//!        32 i64 max_timestamp_ms  largest timestamp in the segment (i64::MIN if empty)
//!        40 u32 reserved = 0
//!        44 u32 footer_crc        CRC-32 of footer bytes [0,44)
//! ```

use crate::cursor::Cursor;
use crate::Offset;

/// Bytes per index entry.
pub const ENTRY_BYTES: usize = 16;
/// Bytes of the index footer.
pub const FOOTER_BYTES: usize = 48;
const MAGIC: u32 = 0x5849_5345;
const VERSION: u32 = 1;

/// One index entry: where the batch with this relative base offset starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub relative_offset: u32,
    pub position: u32,
    pub max_timestamp_ms: i64,
}

/// What the footer of an index file says about its segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Footer {
    pub entry_count: u32,
    pub entries_crc: u32,
    pub log_bytes: u64,
    pub next_offset: Offset,
    pub max_timestamp_ms: i64,
}

/// The in-memory sparse index of a segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseIndex {
    entries: Vec<IndexEntry>,
}

impl SparseIndex {
    /// Adds an entry; entries must grow in both offset and position.
    pub fn push(&mut self, entry: IndexEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.relative_offset > last.relative_offset && entry.position > last.position,
                "index entries must increase: {last:?} then {entry:?}"
            );
            assert!(
                entry.max_timestamp_ms >= last.max_timestamp_ms,
                "max timestamp is monotonic"
            );
        }
        self.entries.push(entry);
    }

    /// Keeps the first `len` entries (the batches after them were dropped
    /// before they were written).
    pub fn truncate(&mut self, len: usize) {
        self.entries.truncate(len);
    }

    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    pub fn last(&self) -> Option<IndexEntry> {
        self.entries.last().copied()
    }

    /// The last entry at or before `relative_offset`: the place to start
    /// scanning for it. `None` means start at byte 0.
    pub fn floor(&self, relative_offset: u32) -> Option<IndexEntry> {
        let i = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        i.checked_sub(1).and_then(|i| self.entries.get(i)).copied()
    }

    /// Where to start scanning for the first record with a timestamp at or
    /// after `timestamp_ms`: just before the first entry whose running max
    /// reaches it, since the batch that first reaches it lies between the two.
    pub fn time_floor(&self, timestamp_ms: i64) -> u32 {
        let i = self
            .entries
            .partition_point(|e| e.max_timestamp_ms < timestamp_ms);
        i.checked_sub(1)
            .and_then(|prev| self.entries.get(prev))
            .map_or(0, |e| e.position)
    }

    /// Serializes entries and footer as the `.index` file.
    pub fn encode_file(&self, log_bytes: u64, next_offset: Offset, max_timestamp_ms: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * ENTRY_BYTES + FOOTER_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&e.relative_offset.to_le_bytes());
            out.extend_from_slice(&e.position.to_le_bytes());
            out.extend_from_slice(&e.max_timestamp_ms.to_le_bytes());
        }
        let entries_crc = crc32fast::hash(&out);
        let start = out.len();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        out.extend_from_slice(&entries_crc.to_le_bytes());
        out.extend_from_slice(&log_bytes.to_le_bytes());
        out.extend_from_slice(&next_offset.0.to_le_bytes());
        out.extend_from_slice(&max_timestamp_ms.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        let crc = crc32fast::hash(out.get(start..).unwrap_or_default());
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses the entries of an index file whose footer was already parsed.
    /// `None` if they do not match the footer or are out of order.
    pub fn decode_entries(bytes: &[u8], footer: &Footer) -> Option<SparseIndex> {
        let n = footer.entry_count as usize;
        if bytes.len() != n.checked_mul(ENTRY_BYTES)?.checked_add(FOOTER_BYTES)? {
            return None;
        }
        let body = bytes.get(..n * ENTRY_BYTES)?;
        if crc32fast::hash(body) != footer.entries_crc {
            return None;
        }
        let mut index = SparseIndex::default();
        let mut c = Cursor::new(body);
        for _ in 0..n {
            let e = IndexEntry {
                relative_offset: c.u32()?,
                position: c.u32()?,
                max_timestamp_ms: c.i64()?,
            };
            if let Some(last) = index.last() {
                if e.relative_offset <= last.relative_offset
                    || e.position <= last.position
                    || e.max_timestamp_ms < last.max_timestamp_ms
                {
                    return None;
                }
            }
            if e.position as u64 >= footer.log_bytes {
                return None;
            }
            index.entries.push(e);
        }
        Some(index)
    }
}

impl Footer {
    /// Parses the footer at the end of an index file; `None` when absent or
    /// damaged.
    pub fn decode(file_tail: &[u8]) -> Option<Footer> {
        let f = file_tail.get(file_tail.len().checked_sub(FOOTER_BYTES)?..)?;
        let mut c = Cursor::new(f);
        let (magic, version) = (c.u32()?, c.u32()?);
        let (entry_count, entries_crc) = (c.u32()?, c.u32()?);
        let (log_bytes, next_offset, max_timestamp_ms) = (c.u64()?, c.u64()?, c.i64()?);
        let _reserved = c.u32()?;
        let footer_crc = c.u32()?;
        if magic != MAGIC || version != VERSION || crc32fast::hash(f.get(..44)?) != footer_crc {
            return None;
        }
        Some(Footer {
            entry_count,
            entries_crc,
            log_bytes,
            next_offset: Offset(next_offset),
            max_timestamp_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(rel: u32, pos: u32, ts: i64) -> IndexEntry {
        IndexEntry {
            relative_offset: rel,
            position: pos,
            max_timestamp_ms: ts,
        }
    }

    #[test]
    fn floor_and_time_floor() {
        let mut ix = SparseIndex::default();
        ix.push(entry(0, 0, 10));
        ix.push(entry(50, 4096, 20));
        ix.push(entry(90, 8200, 20));
        ix.push(entry(130, 12300, 35));
        assert_eq!(ix.floor(0).unwrap().position, 0);
        assert_eq!(ix.floor(49).unwrap().position, 0);
        assert_eq!(ix.floor(50).unwrap().position, 4096);
        assert_eq!(ix.floor(1000).unwrap().position, 12300);
        assert_eq!(ix.time_floor(5), 0);
        assert_eq!(ix.time_floor(10), 0);
        assert_eq!(ix.time_floor(15), 0);
        assert_eq!(ix.time_floor(20), 0);
        assert_eq!(ix.time_floor(21), 8200);
        assert_eq!(ix.time_floor(99), 12300);
        assert!(SparseIndex::default().floor(3).is_none());
    }

    #[test]
    fn file_round_trip_and_damage() {
        let mut ix = SparseIndex::default();
        ix.push(entry(0, 0, 1));
        ix.push(entry(7, 5000, 3));
        let bytes = ix.encode_file(9000, Offset(120), 4);
        let footer = Footer::decode(&bytes).unwrap();
        assert_eq!(footer.log_bytes, 9000);
        assert_eq!(footer.next_offset, Offset(120));
        assert_eq!(SparseIndex::decode_entries(&bytes, &footer).unwrap(), ix);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            let ok = Footer::decode(&bad).and_then(|f| SparseIndex::decode_entries(&bad, &f));
            assert!(ok.is_none(), "flip at {i} not caught");
        }
        assert!(Footer::decode(&bytes[..bytes.len() - 1]).is_none());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Some(f) = Footer::decode(&bytes) {
                let _ = SparseIndex::decode_entries(&bytes, &f);
            }
        }
    }
}
