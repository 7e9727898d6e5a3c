//! What one shard holds of idempotent producers: the producer state of
//! each partition it owns, what it knows of producer ids, and (on the
//! controller shard) the id registry. Lives on its shard; never behind a
//! lock.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::producers::ids::Registry;
use crate::producers::known::KnownProducers;
use crate::producers::snapshot::PartitionProducers;

pub struct ShardProducers {
    /// Producer state of the partitions this shard owns, by topic and
    /// partition: inserted and removed with the partition's log, with no
    /// await between.
    pub partitions: RefCell<HashMap<(String, u32), PartitionProducers>>,
    /// What this shard knows of producer ids: a produce with an id or
    /// epoch never issued, fenced or expired is refused on every partition.
    pub known: RefCell<KnownProducers>,
    /// Producer id registry (controller shard only; loaded on first use).
    pub registry: RefCell<Option<Registry>>,
    /// The key that owns each owned producer id (docs/security.md): an
    /// idempotent produce with an id of another key is `not_owner`.
    pub owners: RefCell<HashMap<i64, std::sync::Arc<str>>>,
    /// Cluster mode: the controller group's producer registry as shard 0
    /// last published it (producers/cluster.rs); `None` before the first.
    pub cluster: RefCell<Option<crate::producers::cluster::Published>>,
}

impl ShardProducers {
    /// A shard's, knowing the ids `known` at start.
    pub fn new(known: KnownProducers, owners: HashMap<i64, std::sync::Arc<str>>) -> ShardProducers {
        ShardProducers {
            partitions: RefCell::new(HashMap::new()),
            known: RefCell::new(known),
            registry: RefCell::new(None),
            owners: RefCell::new(owners),
            cluster: RefCell::new(None),
        }
    }

    /// `not_owner` if `producer_id` belongs to a key other than `caller`'s
    /// (admins and auth-disabled callers may use any; an id without owner
    /// is anyone's).
    pub fn check_owner(
        &self,
        producer_id: i64,
        caller: &crate::auth::Principal,
    ) -> Result<(), crate::error::ApiError> {
        if caller.is_admin() {
            return Ok(());
        }
        match self.owners.borrow().get(&producer_id) {
            Some(owner) if Some(&**owner) != caller.id() => {
                Err(crate::producers::ids::not_owner(producer_id, caller))
            }
            _ => Ok(()),
        }
    }
}
