//! `BatchBuilder`: one batch built record by record (a producer's side of
//! ProduceBatch), in its final buffer.

use crate::encode::{header_bytes, put_record, seal};
use crate::layout::HEADER_BYTES;
use crate::{Offset, ProducerStamp};

/// Builds one batch record by record: offset deltas 0, 1, ...; `finish`
/// writes the header and checksum in front, without copying the records.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    /// `HEADER_BYTES` of room for the header, then the records.
    buf: Vec<u8>,
    count: u32,
    first_ts: i64,
    max_ts: i64,
}

impl Default for BatchBuilder {
    fn default() -> BatchBuilder {
        BatchBuilder::with_capacity(0)
    }
}

impl BatchBuilder {
    /// A builder whose buffer holds `bytes` of records before growing.
    pub fn with_capacity(bytes: usize) -> BatchBuilder {
        let mut buf = Vec::with_capacity(HEADER_BYTES + bytes);
        buf.resize(HEADER_BYTES, 0);
        BatchBuilder {
            buf,
            count: 0,
            first_ts: 0,
            max_ts: i64::MIN,
        }
    }

    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp_ms: i64) {
        if self.count == 0 {
            self.first_ts = timestamp_ms;
        }
        self.max_ts = self.max_ts.max(timestamp_ms);
        put_record(&mut self.buf, self.count, timestamp_ms, key, value);
        self.count += 1;
    }

    pub fn record_count(&self) -> u32 {
        self.count
    }

    /// Bytes of the batch so far, header included.
    pub fn len_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The batch at `base_offset`, stamped with an idempotent producer's
    /// `(producer_id, epoch, base_sequence)` or none; `None` if no record
    /// was pushed.
    pub fn finish(self, base_offset: u64, producer: Option<(i64, i16, i32)>) -> Option<Vec<u8>> {
        let last_delta = self.count.checked_sub(1)?;
        let producer = producer.map_or(ProducerStamp::NONE, |(producer_id, epoch, base_sequence)| {
            ProducerStamp {
                producer_id,
                epoch,
                base_sequence,
            }
        });
        let mut b = self.buf;
        let header = header_bytes(
            Offset(base_offset),
            b.len(),
            self.count,
            last_delta,
            producer,
            self.first_ts,
            self.max_ts,
        );
        if let Some(room) = b.get_mut(..HEADER_BYTES) {
            room.copy_from_slice(&header);
        }
        seal(&mut b);
        Some(b)
    }
}
