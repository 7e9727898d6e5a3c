//! `BatchBuilder`: one batch built record by record (a producer's side of
//! ProduceBatch), in its final buffer.

use crate::encode::Draft;
use crate::layout::HEADER_BYTES;
use crate::{Offset, ProducerStamp};

/// Builds one batch record by record: offset deltas 0, 1, ...; `finish`
/// writes the header and checksum in front, without copying the records.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    /// `HEADER_BYTES` of room for the header, then the records.
    buf: Vec<u8>,
    draft: Draft,
}

impl Default for BatchBuilder {
    fn default() -> BatchBuilder {
        BatchBuilder::with_capacity(0)
    }
}

impl BatchBuilder {
    /// A builder whose buffer holds `bytes` of records before growing.
    pub fn with_capacity(bytes: usize) -> BatchBuilder {
        let mut buf = Vec::new();
        let draft = Draft::begin(&mut buf, HEADER_BYTES + bytes);
        BatchBuilder { buf, draft }
    }

    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp_ms: i64) {
        let delta = self.draft.count;
        self.draft.push(&mut self.buf, delta, timestamp_ms, key, value);
    }

    pub fn record_count(&self) -> u32 {
        self.draft.count
    }

    /// Bytes of the batch so far, header included.
    pub fn len_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The batch at `base_offset`, stamped with an idempotent producer's
    /// `(producer_id, epoch, base_sequence)` or none; `None` if no record
    /// was pushed.
    pub fn finish(mut self, base_offset: u64, producer: Option<(i64, i16, i32)>) -> Option<Vec<u8>> {
        if self.draft.count == 0 {
            return None;
        }
        let producer = producer.map_or(ProducerStamp::NONE, |(producer_id, epoch, base_sequence)| {
            ProducerStamp {
                producer_id,
                epoch,
                base_sequence,
            }
        });
        self.draft.finish(&mut self.buf, Offset(base_offset), producer);
        Some(self.buf)
    }
}
