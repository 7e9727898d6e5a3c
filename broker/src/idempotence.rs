//! Idempotent producers, per partition: which batches each producer wrote
//! recently, so a retry is answered with the original offsets and written
//! nothing, a gap is refused, and an older epoch is fenced.
//!
//! Lives on the shard that owns the partition. Rebuilt at start from the
//! producer fields of the partition's batches (see `rebuild`).

use std::collections::{HashMap, VecDeque};

use crate::error::ApiError;

/// Batches remembered per producer and partition. Kafka keeps 5; a client
/// with up to this many batches in flight gets every retry deduplicated
/// (Redpanda learned that refusing an old retry instead makes clients write
/// twice).
pub const PRODUCER_WINDOW_BATCHES: usize = 5;

/// What a producer sends with a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub epoch: i16,
    /// Sequence of the batch's first record in this partition.
    pub sequence: i32,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Written {
    sequence: i32,
    count: u32,
    base_offset: u64,
}

#[derive(Debug, Default)]
struct ProducerState {
    epoch: i16,
    recent: VecDeque<Written>,
}

/// The decision for a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// New: append it.
    Append,
    /// A retry of a batch already written at this base offset.
    Duplicate(u64),
}

/// Producer state of one partition.
#[derive(Debug, Default)]
pub struct ProducerTable {
    producers: HashMap<i64, ProducerState>,
}

impl ProducerTable {
    /// Decides what to do with a batch of `count` records.
    pub fn check(&self, f: ProducerFields, count: u32) -> Result<Check, ApiError> {
        if f.producer_id < 0 || f.epoch < 0 || f.sequence < 0 {
            return Err(ApiError::invalid(
                "producer_id, epoch and sequence must be non-negative",
            ));
        }
        let Some(state) = self.producers.get(&f.producer_id) else {
            return if f.sequence == 0 {
                Ok(Check::Append)
            } else {
                Err(out_of_order(f, 0))
            };
        };
        if f.epoch < state.epoch {
            return Err(ApiError::new(
                hyper::StatusCode::CONFLICT,
                "producer_fenced",
                format!(
                    "producer {} epoch {} is fenced by epoch {}: a newer instance of this producer exists",
                    f.producer_id, f.epoch, state.epoch
                ),
            ));
        }
        if f.epoch > state.epoch {
            // A new epoch starts its sequences again.
            return if f.sequence == 0 {
                Ok(Check::Append)
            } else {
                Err(out_of_order(f, 0))
            };
        }
        if let Some(w) = state.recent.iter().find(|w| w.sequence == f.sequence) {
            if w.count != count {
                return Err(ApiError::invalid(format!(
                    "sequence {} was written with {} records, this retry has {count}",
                    f.sequence, w.count
                )));
            }
            return Ok(Check::Duplicate(w.base_offset));
        }
        if let Some(w) = state
            .recent
            .iter()
            .find(|w| f.sequence > w.sequence && (f.sequence as i64) < w.sequence as i64 + w.count as i64)
        {
            return Err(ApiError::invalid(format!(
                "sequence {} falls inside the batch written with sequence {} ({} records): retry that batch whole",
                f.sequence, w.sequence, w.count
            )));
        }
        let expected = state
            .recent
            .back()
            .map_or(0, |w| w.sequence.wrapping_add(w.count as i32));
        if f.sequence == expected {
            return Ok(Check::Append);
        }
        if f.sequence < expected {
            return Err(ApiError::new(
                hyper::StatusCode::CONFLICT,
                "duplicate_sequence",
                format!(
                    "sequence {} of producer {} was written before the last {PRODUCER_WINDOW_BATCHES} batches; its offsets are no longer known",
                    f.sequence, f.producer_id
                ),
            ));
        }
        Err(out_of_order(f, expected))
    }

    /// Records a batch placed at `base_offset`.
    pub fn record(&mut self, f: ProducerFields, count: u32, base_offset: u64) {
        let state = self.producers.entry(f.producer_id).or_default();
        if f.epoch > state.epoch {
            state.epoch = f.epoch;
            state.recent.clear();
        }
        state.recent.push_back(Written {
            sequence: f.sequence,
            count,
            base_offset,
        });
        while state.recent.len() > PRODUCER_WINDOW_BATCHES {
            state.recent.pop_front();
        }
    }

    /// Forgets a batch that was placed but then failed (the partition is
    /// poisoned; the client will retry after a restart).
    pub fn forget(&mut self, f: ProducerFields, base_offset: u64) {
        if let Some(state) = self.producers.get_mut(&f.producer_id) {
            state.recent.retain(|w| w.base_offset != base_offset);
        }
    }

    /// The largest producer id this table knows, if any.
    pub fn largest_producer_id(&self) -> Option<i64> {
        self.producers.keys().copied().max()
    }

    /// Feeds a batch found in the log at start-up.
    pub fn rebuild(&mut self, stamp: es_storage::ProducerStamp, count: u32, base_offset: u64) {
        if stamp.producer_id < 0 {
            return;
        }
        let f = ProducerFields {
            producer_id: stamp.producer_id,
            epoch: stamp.epoch,
            sequence: stamp.base_sequence,
        };
        let state = self.producers.entry(f.producer_id).or_default();
        if f.epoch < state.epoch {
            return;
        }
        self.record(f, count, base_offset);
    }
}

/// The serialized form of a table (a snapshot): per producer, its epoch and
/// recent batches as (sequence, count, base offset).
pub type TableImage = Vec<(i64, i16, Vec<(i32, u32, u64)>)>;

impl ProducerTable {
    pub fn image(&self) -> TableImage {
        let mut out: TableImage = self
            .producers
            .iter()
            .map(|(id, s)| {
                (
                    *id,
                    s.epoch,
                    s.recent
                        .iter()
                        .map(|w| (w.sequence, w.count, w.base_offset))
                        .collect(),
                )
            })
            .collect();
        out.sort_by_key(|(id, _, _)| *id);
        out
    }

    pub fn from_image(image: TableImage) -> ProducerTable {
        let mut t = ProducerTable::default();
        for (id, epoch, recent) in image {
            let state = t.producers.entry(id).or_default();
            state.epoch = epoch;
            for (sequence, count, base_offset) in recent.into_iter().rev().take(PRODUCER_WINDOW_BATCHES).rev()
            {
                state.recent.push_back(Written {
                    sequence,
                    count,
                    base_offset,
                });
            }
        }
        t
    }
}

fn out_of_order(f: ProducerFields, expected: i32) -> ApiError {
    ApiError::new(
        hyper::StatusCode::CONFLICT,
        "out_of_order_sequence",
        format!(
            "producer {} sent sequence {} but the partition expects {expected}: a batch before it is missing",
            f.producer_id, f.sequence
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(seq: i32) -> ProducerFields {
        ProducerFields {
            producer_id: 7,
            epoch: 0,
            sequence: seq,
        }
    }

    #[test]
    fn sequences_duplicates_gaps_and_fencing() {
        let mut t = ProducerTable::default();
        assert_eq!(t.check(f(1), 1).unwrap_err().code, "out_of_order_sequence");
        assert_eq!(t.check(f(0), 3).unwrap(), Check::Append);
        t.record(f(0), 3, 100);
        assert_eq!(t.check(f(0), 3).unwrap(), Check::Duplicate(100));
        assert_eq!(t.check(f(0), 2).unwrap_err().code, "invalid_request");
        assert_eq!(t.check(f(4), 1).unwrap_err().code, "out_of_order_sequence");
        assert_eq!(
            t.check(f(1), 2).unwrap_err().code,
            "invalid_request",
            "inside a written batch"
        );
        assert_eq!(t.check(f(3), 1).unwrap(), Check::Append);
        for i in 0..PRODUCER_WINDOW_BATCHES as i32 {
            t.record(f(3 + i), 1, 200 + i as u64);
        }
        // The first batch fell out of the window.
        assert_eq!(t.check(f(0), 3).unwrap_err().code, "duplicate_sequence");
        assert_eq!(t.check(f(7), 1).unwrap(), Check::Duplicate(204));
        // A new epoch fences the old one and restarts sequences.
        let new = ProducerFields { epoch: 1, ..f(0) };
        assert_eq!(t.check(new, 1).unwrap(), Check::Append);
        t.record(new, 1, 300);
        assert_eq!(t.check(f(8), 1).unwrap_err().code, "producer_fenced");
        assert_eq!(
            t.check(ProducerFields { epoch: 1, ..f(1) }, 1).unwrap(),
            Check::Append
        );
    }
}
