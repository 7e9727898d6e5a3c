//! Idempotent producers, per partition: which batches each producer wrote
//! recently, so a retry is answered with the original offsets and written
//! nothing, a gap is refused, and an older epoch is fenced.
//!
//! Lives on the shard that owns the partition. Rebuilt at start from its
//! snapshot and the producer fields of the batches after it
//! (producers/snapshot.rs). A producer id that expires
//! (`--producer-id-expiry-ms`, producers/expiry.rs) is forgotten here too.

use std::collections::{HashMap, VecDeque};

use crate::error::{ApiError, ErrorCode};
use crate::limits::PRODUCER_WINDOW_BATCHES;

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
    /// When the producer last wrote to this partition (ms, `clock::now_ms`);
    /// the shard's view of the id is rebuilt from it at start.
    active_ms: i64,
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
    /// The largest producer id this partition ever held, expired ones
    /// included: the registry never issues an id at or below it again.
    largest_seen: Option<i64>,
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
                ErrorCode::ProducerFenced,
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
            return Err(ApiError::new(ErrorCode::DuplicateSequence,
                format!(
                    "sequence {} of producer {} was written before the last {PRODUCER_WINDOW_BATCHES} batches; its offsets are no longer known",
                    f.sequence, f.producer_id
                ),
            ));
        }
        Err(out_of_order(f, expected))
    }

    /// Records a batch placed at `base_offset` at `now_ms`.
    pub fn record(&mut self, f: ProducerFields, count: u32, base_offset: u64, now_ms: i64) {
        self.largest_seen = self.largest_seen.max(Some(f.producer_id));
        let state = self.producers.entry(f.producer_id).or_default();
        state.active_ms = state.active_ms.max(now_ms);
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

    /// A retry answered from the window at `now_ms`: the producer is active.
    pub fn touch(&mut self, producer_id: i64, now_ms: i64) {
        if let Some(state) = self.producers.get_mut(&producer_id) {
            state.active_ms = state.active_ms.max(now_ms);
        }
    }

    /// Forgets the producers of `ids` (expired); whether any was here.
    pub fn expire(&mut self, ids: &[i64]) -> bool {
        let before = self.producers.len();
        for id in ids {
            self.producers.remove(id);
        }
        self.producers.len() != before
    }

    /// Each producer's id, epoch and last activity.
    pub fn producers(&self) -> impl Iterator<Item = (i64, i16, i64)> + '_ {
        self.producers.iter().map(|(id, s)| (*id, s.epoch, s.active_ms))
    }

    /// Producers with state here.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// The largest producer id this partition ever held, if any.
    pub fn largest_producer_id(&self) -> Option<i64> {
        self.largest_seen
    }

    /// Feeds a batch found in the log at start-up, at `now_ms`: a batch
    /// read back has no broker time, so its producer counts as active
    /// from the start on.
    pub fn rebuild(&mut self, stamp: es_storage::ProducerStamp, count: u32, base_offset: u64, now_ms: i64) {
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
        self.record(f, count, base_offset, now_ms);
    }
}

/// One producer of a table's serialized form (a snapshot): its id, epoch,
/// recent batches as (sequence, count, base offset), and when it last
/// wrote (ms). Snapshots written before expiry existed have no time: read
/// as active from the start that loads them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum ProducerImage {
    Timed(i64, i16, Vec<(i32, u32, u64)>, i64),
    Untimed(i64, i16, Vec<(i32, u32, u64)>),
}

/// The serialized form of a table: its producers and the largest id it
/// ever held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableImage {
    pub producers: Vec<ProducerImage>,
    pub largest_seen: Option<i64>,
}

impl ProducerTable {
    pub fn image(&self) -> TableImage {
        let mut producers: Vec<ProducerImage> = self
            .producers
            .iter()
            .map(|(id, s)| {
                ProducerImage::Timed(
                    *id,
                    s.epoch,
                    s.recent
                        .iter()
                        .map(|w| (w.sequence, w.count, w.base_offset))
                        .collect(),
                    s.active_ms,
                )
            })
            .collect();
        producers.sort_by_key(|p| match p {
            ProducerImage::Timed(id, ..) | ProducerImage::Untimed(id, ..) => *id,
        });
        TableImage {
            producers,
            largest_seen: self.largest_seen,
        }
    }

    /// The table of `image`, loaded at `now_ms` (a time past it is
    /// brought back to it: a clock set back must not keep an id for ever).
    pub fn from_image(image: TableImage, now_ms: i64) -> ProducerTable {
        let mut t = ProducerTable {
            largest_seen: image.largest_seen,
            ..ProducerTable::default()
        };
        for p in image.producers {
            let (id, epoch, recent, active_ms) = match p {
                ProducerImage::Timed(id, epoch, recent, ms) => (id, epoch, recent, ms.min(now_ms)),
                ProducerImage::Untimed(id, epoch, recent) => (id, epoch, recent, now_ms),
            };
            t.largest_seen = t.largest_seen.max(Some(id));
            let state = t.producers.entry(id).or_default();
            state.epoch = epoch;
            state.active_ms = active_ms;
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
        ErrorCode::OutOfOrderSequence,
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
        t.record(f(0), 3, 100, 0);
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
            t.record(f(3 + i), 1, 200 + i as u64, 0);
        }
        // The first batch fell out of the window.
        assert_eq!(t.check(f(0), 3).unwrap_err().code, "duplicate_sequence");
        assert_eq!(t.check(f(7), 1).unwrap(), Check::Duplicate(204));
        // A new epoch fences the old one and restarts sequences.
        let new = ProducerFields { epoch: 1, ..f(0) };
        assert_eq!(t.check(new, 1).unwrap(), Check::Append);
        t.record(new, 1, 300, 0);
        assert_eq!(t.check(f(8), 1).unwrap_err().code, "producer_fenced");
        assert_eq!(
            t.check(ProducerFields { epoch: 1, ..f(1) }, 1).unwrap(),
            Check::Append
        );
    }

    #[test]
    fn an_expired_producer_is_forgotten_but_its_id_stays_counted() {
        let mut t = ProducerTable::default();
        t.record(f(0), 2, 10, 1_000);
        t.record(
            ProducerFields {
                producer_id: 3,
                ..f(0)
            },
            1,
            12,
            2_000,
        );
        assert!(t.expire(&[7]));
        assert!(!t.expire(&[7]), "nothing left to forget");
        assert_eq!(t.len(), 1);
        assert_eq!(
            t.check(f(2), 1).unwrap_err().code,
            "out_of_order_sequence",
            "unknown again"
        );
        assert_eq!(
            t.largest_producer_id(),
            Some(7),
            "expiry never lowers the largest id seen"
        );
        let image = t.image();
        let back = ProducerTable::from_image(image.clone(), 5_000);
        assert_eq!(back.image(), image);
        assert_eq!(back.largest_producer_id(), Some(7));
        assert_eq!(back.producers().collect::<Vec<_>>(), vec![(3, 0, 2_000)]);
        // A time past the clock (set back since) is brought back to it.
        let early = ProducerTable::from_image(image, 1_500);
        assert_eq!(early.producers().collect::<Vec<_>>(), vec![(3, 0, 1_500)]);
    }

    #[test]
    fn snapshot_producers_of_the_earlier_format_load_as_active_now() {
        let old: Vec<ProducerImage> = serde_json::from_str("[[7, 1, [[0, 2, 10]]]]").unwrap();
        let image = TableImage {
            producers: old,
            largest_seen: None,
        };
        let t = ProducerTable::from_image(image, 9_000);
        assert_eq!(t.producers().collect::<Vec<_>>(), vec![(7, 1, 9_000)]);
        assert_eq!(t.largest_producer_id(), Some(7));
        let retry = ProducerFields { epoch: 1, ..f(0) };
        assert_eq!(t.check(retry, 2).unwrap(), Check::Duplicate(10));
    }
}
