//! What one shard knows of producer ids, to refuse a produce whose id or
//! epoch the registry (producers/ids.rs) never issued, or fenced, or whose
//! id expired; and when each id last wrote here, for the expiry sweep
//! (producers/expiry.rs). Every shard has one.
//!
//! Per-id state exists only for ids that wrote (to a partition of any
//! shard: a shard that first sees an id write, or finds it in a partition
//! it opens, tells every other shard) or got a new epoch: an id issued and
//! never used costs nothing here. Each shard keeps when the id was last
//! active on it; the expiry sweep forgets an id only when it is stale on
//! every shard. The rest is three floors, each a single id:
//! - `issued_below`: no id at or above it was issued;
//! - `retired_below`: ids below it belonged to a registry that was lost
//!   and are refused, whatever a partition still knows of them;
//! - `expired_below`: ids below it were issued longer than the expiry ago,
//!   so one without state here wrote nothing (and got no epoch) for that
//!   long, or was forgotten by the sweep: it expired.

use std::collections::HashMap;

use crate::error::{ApiError, ErrorCode};

/// State of one producer id on this shard.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Known {
    /// The newest epoch issued (or seen in a partition) for the id.
    epoch: i16,
    /// When the id last wrote to a partition of this shard, or got its
    /// epoch (ms, `clock::now_ms`).
    active_ms: i64,
}

/// A shard's view of producer ids (see the module comment).
#[derive(Debug, Default)]
pub struct KnownProducers {
    issued_below: i64,
    retired_below: i64,
    expired_below: i64,
    known: HashMap<i64, Known>,
}

/// The registry's floors, as every shard learns them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Floors {
    pub issued_below: i64,
    pub retired_below: i64,
    pub expired_below: i64,
}

impl KnownProducers {
    pub fn new(floors: Floors) -> KnownProducers {
        let mut k = KnownProducers::default();
        k.raise(floors);
        k
    }

    /// Raises the floors (each only moves up).
    pub fn raise(&mut self, floors: Floors) {
        self.issued_below = self.issued_below.max(floors.issued_below);
        self.retired_below = self.retired_below.max(floors.retired_below);
        self.expired_below = self.expired_below.max(floors.expired_below);
        let retired = self.retired_below;
        self.known.retain(|id, _| *id >= retired);
    }

    /// An id was issued at `epoch` (0: a new id) at `now_ms`: older epochs
    /// are fenced from now on.
    pub fn issued(&mut self, producer_id: i64, epoch: i16, now_ms: i64) {
        self.issued_below = self.issued_below.max(producer_id.saturating_add(1));
        if epoch > 0 {
            self.note(producer_id, epoch, now_ms);
        }
    }

    /// The id was active at `epoch` at `active_ms` (it wrote here, a
    /// partition that opened knows it, or another shard says it wrote): its
    /// state is kept, newest epoch and activity. Whether the id is new
    /// here (then the other shards are to be told).
    pub fn note(&mut self, producer_id: i64, epoch: i16, active_ms: i64) -> bool {
        if producer_id < self.retired_below {
            return false;
        }
        let mut new = false;
        let k = self.known.entry(producer_id).or_insert_with(|| {
            new = true;
            Known { epoch, active_ms }
        });
        k.epoch = k.epoch.max(epoch);
        k.active_ms = k.active_ms.max(active_ms);
        new
    }

    /// Refuses a produce by `producer_id` at `epoch` that the registry
    /// never issued, that a newer epoch fenced, or whose id expired.
    pub fn check(&self, producer_id: i64, epoch: i16) -> Result<(), ApiError> {
        if producer_id >= self.issued_below {
            return Err(unknown(format!(
                "producer id {producer_id} was never issued by this broker: POST /v1/producers first"
            )));
        }
        if producer_id < self.retired_below {
            return Err(unknown(format!(
                "producer id {producer_id} was issued before the producer id registry was lost: \
                 POST /v1/producers for a new id"
            )));
        }
        let current = match self.known.get(&producer_id) {
            Some(k) => k.epoch,
            None if producer_id < self.expired_below => {
                return Err(unknown(format!(
                    "producer id {producer_id} expired: it wrote nothing for longer than \
                     --producer-id-expiry-ms (or it was handed out just before the broker \
                     crashed, and not used); POST /v1/producers for a new id"
                )))
            }
            // Issued lately, never written here, never given a new epoch.
            None => 0,
        };
        if epoch < current {
            return Err(ApiError::new(ErrorCode::ProducerFenced,
                format!(
                    "producer {producer_id} epoch {epoch} is fenced by epoch {current}: a newer instance of this producer exists"
                ),
            ));
        }
        if epoch > current {
            return Err(ApiError::invalid(format!(
                "producer {producer_id} epoch {epoch} was never issued (the current epoch is {current})"
            )));
        }
        Ok(())
    }

    /// The epoch this shard knows for a live id (`None`: no state here).
    pub fn epoch_of(&self, producer_id: i64) -> Option<i16> {
        self.known.get(&producer_id).map(|k| k.epoch)
    }

    /// Ids with state here that were last active before `cutoff_ms`, at
    /// most `max` of them (the rest wait for a later sweep).
    pub fn stale(&self, cutoff_ms: i64, max: usize) -> Vec<i64> {
        self.known
            .iter()
            .filter(|(_, k)| k.active_ms < cutoff_ms)
            .map(|(id, _)| *id)
            .take(max)
            .collect()
    }

    /// Of `ids`, those active here at or after `cutoff_ms`.
    pub fn fresh(&self, ids: &[i64], cutoff_ms: i64) -> Vec<i64> {
        ids.iter()
            .copied()
            .filter(|id| self.known.get(id).is_some_and(|k| k.active_ms >= cutoff_ms))
            .collect()
    }

    /// Forgets those of `ids` still inactive since before `cutoff_ms`, and
    /// raises the expired floor. Returns the ids forgotten, and those kept
    /// because they were active since the sweep looked (with their state,
    /// for the shards that forgot them).
    pub fn expire(&mut self, ids: &[i64], cutoff_ms: i64, expired_below: i64) -> Expired {
        self.expired_below = self.expired_below.max(expired_below.min(self.issued_below));
        let mut out = Expired::default();
        for id in ids {
            match self.known.get(id) {
                Some(k) if k.active_ms < cutoff_ms => {
                    self.known.remove(id);
                    out.gone.push(*id);
                }
                Some(k) => out.kept.push((*id, k.epoch, k.active_ms)),
                None => {}
            }
        }
        out
    }

    /// Ids with state on this shard.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.known.len()
    }
}

/// What an expiry did on one shard.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expired {
    pub gone: Vec<i64>,
    /// (id, epoch, active_ms) of ids kept: active since the sweep looked.
    pub kept: Vec<(i64, i16, i64)>,
}

fn unknown(message: String) -> ApiError {
    ApiError::new(ErrorCode::UnknownProducerId, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<(), ApiError>) -> &'static str {
        r.err().map_or("ok", |e| e.code.as_str())
    }

    #[test]
    fn ids_are_refused_unless_issued_live_and_at_their_epoch() {
        let mut k = KnownProducers::new(Floors {
            issued_below: 10,
            retired_below: 2,
            expired_below: 5,
        });
        assert_eq!(code(k.check(10, 0)), "unknown_producer_id", "never issued");
        assert_eq!(code(k.check(1, 0)), "unknown_producer_id", "retired");
        assert_eq!(code(k.check(4, 0)), "unknown_producer_id", "expired");
        assert_eq!(code(k.check(7, 0)), "ok", "issued lately, epoch 0");
        assert_eq!(code(k.check(7, 1)), "invalid_request", "an epoch never issued");
        assert!(k.note(4, 0, 100), "new here");
        assert!(!k.note(4, 0, 150), "known already");
        assert_eq!(code(k.check(4, 0)), "ok", "below the expired floor, but it wrote");
        k.issued(12, 0, 100);
        assert_eq!(code(k.check(12, 0)), "ok", "a new id");
        assert_eq!(k.len(), 1, "a new id costs no state");
        k.issued(7, 1, 100);
        assert_eq!(code(k.check(7, 0)), "producer_fenced");
        assert_eq!(code(k.check(7, 1)), "ok");
        assert!(!k.note(1, 0, 100));
        assert_eq!(
            code(k.check(1, 0)),
            "unknown_producer_id",
            "a retired id stays retired"
        );
    }

    #[test]
    fn expiry_forgets_only_ids_idle_since_the_cutoff() {
        let mut k = KnownProducers::new(Floors {
            issued_below: 10,
            ..Floors::default()
        });
        k.note(1, 0, 100);
        k.note(2, 0, 500);
        k.issued(3, 2, 100);
        let mut stale = k.stale(300, 10);
        stale.sort();
        assert_eq!(stale, vec![1, 3]);
        assert_eq!(k.stale(300, 1).len(), 1, "at most as many as asked");
        assert_eq!(k.fresh(&[1, 2, 3], 300), vec![2]);
        // Id 1 writes between the sweep's look and its expiry: kept.
        k.note(1, 0, 400);
        let done = k.expire(&[1, 3], 300, 8);
        assert_eq!(done.gone, vec![3]);
        assert_eq!(done.kept, vec![(1, 0, 400)]);
        assert_eq!(code(k.check(1, 0)), "ok");
        assert_eq!(code(k.check(2, 0)), "ok");
        assert_eq!(
            code(k.check(3, 2)),
            "unknown_producer_id",
            "expired with its epoch"
        );
        assert_eq!(code(k.check(9, 0)), "ok", "issued after the floor");
        // The floor never passes what was issued.
        k.expire(&[], 300, 50);
        assert_eq!(code(k.check(9, 0)), "unknown_producer_id");
        k.issued(10, 0, 600);
        assert_eq!(code(k.check(10, 0)), "ok", "issued after the floor moved");
    }
}
