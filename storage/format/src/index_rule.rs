//! When a batch gets a sparse-index entry: the rule, once, for the log's
//! appends, its recovery scans and offline rebuilds (es-tools restore).
//!
//! - the first batch of a segment always gets an entry (position 0);
//! - a later batch gets one when at least `interval` bytes of log lie
//!   between the start of the last indexed batch and the start of this one;
//! - sealing the segment adds an entry for its last batch if it is not the
//!   last entry already, so the entries' running maximum timestamp reaches
//!   the footer's.

use crate::header::BatchHeader;
use crate::index::{IndexEntry, SparseIndex};
use crate::Offset;

/// The state the rule keeps between batches of one segment.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexRule {
    bytes_since_entry: u64,
    last_batch: Option<IndexEntry>,
}

impl IndexRule {
    /// The rule resumed after a sealed index whose last entry, `last`, is
    /// the segment's last batch, in a log of `log_bytes`.
    pub fn resume(last: Option<IndexEntry>, log_bytes: u64) -> IndexRule {
        IndexRule {
            bytes_since_entry: last.map_or(0, |e| log_bytes.saturating_sub(e.position as u64)),
            last_batch: last,
        }
    }

    /// Accounts for the batch `entry` describes (`batch_len` bytes, placed
    /// right after the previous one), adding it to `index` when due.
    pub fn note(&mut self, index: &mut SparseIndex, entry: IndexEntry, batch_len: u32, interval: u32) {
        if index.last().is_none() || self.bytes_since_entry >= interval as u64 {
            index.push(entry);
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += batch_len as u64;
        self.last_batch = Some(entry);
    }

    /// Adds the entry for the segment's last batch when it is not the last
    /// entry already (a seal: roll, clean close, rebuilt index).
    pub fn seal(&self, index: &mut SparseIndex) {
        if let Some(last) = self.last_batch {
            if index.last() != Some(last) {
                index.push(last);
            }
        }
    }
}

/// Builds a segment's `.index` file from its batches, as the log would
/// have written it when sealing the segment.
#[derive(Clone, Debug)]
pub struct IndexBuilder {
    base: Offset,
    interval: u32,
    index: SparseIndex,
    rule: IndexRule,
    log_bytes: u64,
    next_offset: Offset,
    max_timestamp_ms: i64,
}

impl IndexBuilder {
    /// An empty segment starting at `base`, indexed every `interval` bytes.
    pub fn new(base: Offset, interval: u32) -> IndexBuilder {
        IndexBuilder {
            base,
            interval,
            index: SparseIndex::default(),
            rule: IndexRule::default(),
            log_bytes: 0,
            next_offset: base,
            max_timestamp_ms: i64::MIN,
        }
    }

    /// Accounts for the checked batch `h` at `position`. Batches must come
    /// back to back, their offsets growing and within u32 of the base.
    pub fn note(&mut self, h: &BatchHeader, position: u64) -> Result<(), String> {
        if position != self.log_bytes {
            return Err(format!("batch at {position}, expected at {}", self.log_bytes));
        }
        if h.base_offset < self.next_offset {
            return Err(format!(
                "batch base offset {} is below the expected {}",
                h.base_offset, self.next_offset
            ));
        }
        let relative = h.base_offset.0 - self.base.0;
        if h.next_offset().0 - self.base.0 > u32::MAX as u64 || position > u32::MAX as u64 {
            return Err("batch offsets do not fit the segment".into());
        }
        self.max_timestamp_ms = self.max_timestamp_ms.max(h.max_timestamp_ms);
        let entry = IndexEntry {
            relative_offset: relative as u32,
            position: position as u32,
            max_timestamp_ms: self.max_timestamp_ms,
        };
        self.rule.note(&mut self.index, entry, h.batch_len, self.interval);
        self.next_offset = h.next_offset();
        self.log_bytes += h.batch_len as u64;
        Ok(())
    }

    /// Bytes of log noted so far.
    pub fn log_bytes(&self) -> u64 {
        self.log_bytes
    }

    /// The offset after the last batch noted.
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// The largest timestamp noted (`i64::MIN` if none).
    pub fn max_timestamp_ms(&self) -> i64 {
        self.max_timestamp_ms
    }

    /// The sealed `.index` file; the segment's offsets end at `next_offset`
    /// or later (`end`: compaction may have dropped its last records).
    pub fn finish(mut self, end: Option<Offset>) -> Vec<u8> {
        self.rule.seal(&mut self.index);
        let next = end.map_or(self.next_offset, |e| e.max(self.next_offset));
        self.index
            .encode_file(self.log_bytes, next, self.max_timestamp_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{check, encode, ProducerStamp, Record};
    use crate::index::Footer;

    #[test]
    fn entries_every_interval_and_the_last_batch_on_seal() {
        let mut log = Vec::new();
        let mut b = IndexBuilder::new(Offset(100), 200);
        for i in 0..10u64 {
            let at = log.len();
            let rec = Record {
                key: None,
                value: vec![b'x'; 50],
                timestamp_ms: 10 - i as i64,
            };
            encode(Offset(100 + i), &[rec], ProducerStamp::NONE, &mut log);
            let h = check(&log[at..]).unwrap();
            b.note(&h, at as u64).unwrap();
        }
        // Batches of 126 bytes: an entry at 0, then whenever 200 bytes passed.
        let bytes = b.finish(None);
        let footer = Footer::decode(&bytes).unwrap();
        let ix = SparseIndex::decode_entries(&bytes, &footer).unwrap();
        let pos: Vec<u32> = ix.entries().iter().map(|e| e.position).collect();
        assert_eq!(pos, vec![0, 252, 504, 756, 1008, 1134]);
        assert_eq!(footer.log_bytes, log.len() as u64);
        assert_eq!(footer.next_offset, Offset(110));
        assert_eq!(footer.max_timestamp_ms, 10);
    }

    #[test]
    fn batches_out_of_place_are_refused() {
        let mut log = Vec::new();
        let rec = Record {
            key: None,
            value: b"v".to_vec(),
            timestamp_ms: 1,
        };
        encode(Offset(5), &[rec], ProducerStamp::NONE, &mut log);
        let h = check(&log).unwrap();
        let mut b = IndexBuilder::new(Offset(5), 4096);
        assert!(b.note(&h, 3).is_err());
        b.note(&h, 0).unwrap();
        assert!(b.note(&h, log.len() as u64).is_err(), "offsets go back");
        assert!(IndexBuilder::new(Offset(6), 1).note(&h, 0).is_err());
    }
}
