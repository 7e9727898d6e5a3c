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
}

impl ShardProducers {
    /// A shard's, knowing the ids `known` at start.
    pub fn new(known: KnownProducers) -> ShardProducers {
        ShardProducers {
            partitions: RefCell::new(HashMap::new()),
            known: RefCell::new(known),
            registry: RefCell::new(None),
        }
    }
}
