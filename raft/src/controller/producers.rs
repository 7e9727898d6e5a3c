//! `ProducerRegistry`: the producer ids and epochs the controller group
//! issued (the spec's §3.4). `InitProducer` is applied here on every node,
//! in log order, so every node issues the same id and the same epoch: the
//! standalone broker's registry (`broker/src/producers/ids.rs`) with the
//! same rules and refusals, and none of its file handling (the controller
//! log is durable before an outcome is answered, so ids need no blocks and
//! no high-water mark).
//!
//! - A new producer gets the next id, at epoch 0; the caller's key (if
//!   any) owns it.
//! - Re-initializing an id gives its next epoch, which fences the older
//!   instances: an id never issued is `unknown_producer_id`, one owned by
//!   another key `not_owner` (an admin may use any; an id without owner is
//!   claimed by the first key that re-initializes it), one that used every
//!   epoch `invalid_request`.
//!
//! A node refuses a produce whose id or epoch the registry never issued,
//! or fenced, with [`check`](ProducerRegistry::check) (the broker calls it
//! before a partition sees the batch; the partition's window,
//! `producer_window.rs`, then checks its sequence).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::controller::command::{refusal, Refusal};

/// Most epochs a producer id can go through (epochs are i16 in a batch).
pub const EPOCH_MAX: i16 = i16::MAX;

/// Producer ids and epochs, as of an applied controller entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerRegistry {
    /// The id the next new producer gets; every id below it was issued.
    pub next_id: i64,
    /// Ids re-initialized at least once: their current epoch (an id not
    /// here is at epoch 0).
    #[serde(default)]
    pub epochs: BTreeMap<i64, i16>,
    /// The key id that owns each owned producer id.
    #[serde(default)]
    pub owners: BTreeMap<i64, String>,
}

fn unknown(message: String) -> Refusal {
    Refusal::new(refusal::UNKNOWN_PRODUCER_ID, message)
}

impl ProducerRegistry {
    /// Applies `InitProducer`: a new id (`existing` none) owned by `owner`,
    /// or the next epoch of `existing`. `admin` may re-initialize any id.
    /// Answers `{"producer_id", "epoch"}`; a refusal changes nothing.
    pub fn init(
        &mut self,
        existing: Option<i64>,
        owner: Option<&str>,
        admin: bool,
    ) -> Result<Value, Refusal> {
        let Some(id) = existing else {
            let id = self.next_id;
            if id == i64::MAX {
                return Err(Refusal::new(
                    refusal::INVALID_REQUEST,
                    "every producer id was issued",
                ));
            }
            self.next_id = id + 1;
            if let Some(o) = owner {
                self.owners.insert(id, o.to_string());
            }
            return Ok(json!({"producer_id": id, "epoch": 0}));
        };
        if id < 0 {
            return Err(Refusal::new(
                refusal::INVALID_REQUEST,
                "producer_id must be non-negative",
            ));
        }
        if id >= self.next_id {
            return Err(unknown(format!(
                "producer id {id} was never issued by this cluster"
            )));
        }
        let owned_by = self.owners.get(&id);
        if !admin && owned_by.is_some_and(|o| Some(o.as_str()) != owner) {
            return Err(Refusal::new(
                refusal::NOT_OWNER,
                format!(
                    "producer id {id} belongs to another key than {}: use that key, or ask for a new id",
                    owner.unwrap_or("-")
                ),
            ));
        }
        let current = self.epoch_of(id);
        if current == EPOCH_MAX {
            return Err(Refusal::new(
                refusal::INVALID_REQUEST,
                format!("producer {id} used every epoch; ask for a new id"),
            ));
        }
        let epoch = current + 1;
        self.epochs.insert(id, epoch);
        if let (None, Some(o)) = (owned_by, owner) {
            self.owners.insert(id, o.to_string());
        }
        Ok(json!({"producer_id": id, "epoch": epoch}))
    }

    /// The current epoch of an issued id.
    pub fn epoch_of(&self, id: i64) -> i16 {
        self.epochs.get(&id).copied().unwrap_or(0)
    }

    /// The key that owns `id`, if any.
    pub fn owner(&self, id: i64) -> Option<&str> {
        self.owners.get(&id).map(String::as_str)
    }

    /// Refuses a produce by `producer_id` at `epoch` that this registry
    /// never issued (`unknown_producer_id`; `invalid_request` for an epoch
    /// past the current one) or that a newer epoch fenced
    /// (`producer_fenced`). A node that finds an id unknown runs the
    /// controller's read barrier and asks again before it refuses (the id
    /// may have been issued through another node a moment ago).
    pub fn check(&self, producer_id: i64, epoch: i16) -> Result<(), Refusal> {
        if producer_id < 0 || producer_id >= self.next_id {
            return Err(unknown(format!(
                "producer id {producer_id} was never issued by this cluster: POST /v1/producers first"
            )));
        }
        let current = self.epoch_of(producer_id);
        if epoch < current {
            return Err(Refusal::new(
                refusal::PRODUCER_FENCED,
                format!(
                    "producer {producer_id} epoch {epoch} is fenced by epoch {current}: a newer instance of this producer exists"
                ),
            ));
        }
        if epoch > current {
            return Err(Refusal::new(
                refusal::INVALID_REQUEST,
                format!(
                    "producer {producer_id} epoch {epoch} was never issued (the current epoch is {current})"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code<T: std::fmt::Debug>(r: Result<T, Refusal>) -> String {
        r.err().map_or("ok".into(), |e| e.code)
    }

    #[test]
    fn ids_in_order_epochs_fence_and_owners_hold() {
        let mut r = ProducerRegistry::default();
        assert_eq!(
            r.init(None, None, false).unwrap(),
            json!({"producer_id": 0, "epoch": 0})
        );
        assert_eq!(
            r.init(None, Some("k1"), false).unwrap(),
            json!({"producer_id": 1, "epoch": 0})
        );
        assert_eq!(code(r.check(0, 0)), "ok");
        assert_eq!(code(r.check(2, 0)), refusal::UNKNOWN_PRODUCER_ID, "never issued");
        assert_eq!(code(r.check(-1, 0)), refusal::UNKNOWN_PRODUCER_ID);
        assert_eq!(
            code(r.check(0, 1)),
            refusal::INVALID_REQUEST,
            "an epoch never issued"
        );
        assert_eq!(
            r.init(Some(0), None, false).unwrap(),
            json!({"producer_id": 0, "epoch": 1})
        );
        assert_eq!(code(r.check(0, 0)), refusal::PRODUCER_FENCED);
        assert_eq!(code(r.check(0, 1)), "ok");
        let before = r.clone();
        assert_eq!(code(r.init(Some(5), None, false)), refusal::UNKNOWN_PRODUCER_ID);
        assert_eq!(code(r.init(Some(-3), None, false)), refusal::INVALID_REQUEST);
        assert_eq!(code(r.init(Some(1), Some("k2"), false)), refusal::NOT_OWNER);
        assert_eq!(
            code(r.init(Some(1), None, false)),
            refusal::NOT_OWNER,
            "no key is not the owner"
        );
        assert_eq!(r, before, "refusals change nothing");
        assert_eq!(
            r.init(Some(1), Some("k2"), true).unwrap(),
            json!({"producer_id": 1, "epoch": 1}),
            "an admin may"
        );
        assert_eq!(r.owner(1), Some("k1"), "and the owner stays");
        // An id without owner is claimed by the first key that re-inits it.
        r.init(Some(0), Some("k3"), false).unwrap();
        assert_eq!(r.owner(0), Some("k3"));
        assert_eq!(code(r.init(Some(0), Some("k1"), false)), refusal::NOT_OWNER);
        // Every epoch used.
        r.epochs.insert(0, EPOCH_MAX);
        assert_eq!(code(r.init(Some(0), Some("k3"), false)), refusal::INVALID_REQUEST);
        let back: ProducerRegistry = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}

/// What `InitProducer` issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    pub producer_id: i64,
    pub epoch: i16,
}

impl crate::controller::Controller {
    /// Issues a new producer id (`existing` none) owned by `owner`, or the
    /// next epoch of `existing` (its owner's, or an `admin`'s): proposed
    /// through the controller leader wherever it is, answered once applied.
    /// `Ok(Err(refusal))`: `unknown_producer_id`, `not_owner`,
    /// `invalid_request`, the same on every node.
    pub async fn init_producer(
        &self,
        existing: Option<i64>,
        owner: Option<String>,
        admin: bool,
    ) -> Result<Result<Issued, Refusal>, crate::controller::ControllerError> {
        let outcome = self
            .propose(crate::controller::ControllerCommand::InitProducer {
                existing,
                owner,
                admin,
            })
            .await?;
        Ok(outcome.and_then(|v| {
            let id = v.get("producer_id").and_then(Value::as_i64);
            let epoch = v
                .get("epoch")
                .and_then(Value::as_i64)
                .and_then(|e| i16::try_from(e).ok());
            match (id, epoch) {
                (Some(producer_id), Some(epoch)) => Ok(Issued { producer_id, epoch }),
                _ => Err(Refusal::new(
                    refusal::INVALID_REQUEST,
                    format!("InitProducer answered {v}"),
                )),
            }
        }))
    }

    /// Checks a produce's producer id and epoch against this node's
    /// registry ([`ProducerRegistry::check`]); when it finds the id unknown
    /// or the epoch ahead (issued through another node a moment ago, not
    /// applied here yet), runs the read barrier and checks again. A fenced
    /// epoch needs no barrier: epochs only grow.
    pub async fn check_producer(
        &self,
        producer_id: i64,
        epoch: i16,
    ) -> Result<Result<(), Refusal>, crate::controller::ControllerError> {
        match self.state().producers.check(producer_id, epoch) {
            Err(r) if r.code != refusal::PRODUCER_FENCED => {
                self.read_barrier().await?;
                Ok(self.state().producers.check(producer_id, epoch))
            }
            other => Ok(other),
        }
    }
}
