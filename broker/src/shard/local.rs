//! What one shard owns: its partitions and their producer state, its fsync
//! batcher, the consumer groups it coordinates, its client connections and
//! request budget, and its view of the broker (config, catalog, readiness).
//! Lives on its own thread; nothing in it is shared. The router
//! (router.rs) moves operations between shards and owns none of this.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use es_storage::{FsyncBatcher, Watermark};

use crate::operate::config::Config;
use crate::producers::local::ShardProducers;
use crate::shard::mesh::Senders;
use crate::shard::message::Envelope;
use crate::shard::outbox::Outbox;
use crate::shard::placement::{self, ShardId};
use crate::shard::state::BrokerState;
use crate::topics::catalog::Catalog;

/// The shard that runs topic create, delete and config changes, one at a time.
pub const CONTROLLER_SHARD: ShardId = 0;

pub struct Shard {
    pub id: ShardId,
    pub shards: usize,
    pub config: Arc<Config>,
    pub catalog: Arc<Catalog>,
    pub state: Arc<BrokerState>,
    pub metrics: Arc<metrics_exporter_prometheus::PrometheusHandle>,
    pub batcher: FsyncBatcher,
    /// The sending side of the mesh, which the router sends through.
    pub outbox: Rc<Outbox>,
    /// Partitions this shard owns, by topic and partition.
    pub partitions: RefCell<crate::shard::owned::OwnedPartitions>,
    /// Metric handles of the request paths.
    pub hot: crate::shard::hot_metrics::HotMetrics,
    /// Serializes controller operations (shard 0 only).
    pub controller_lock: glommio::sync::Semaphore,
    /// What this shard holds of idempotent producers.
    pub producers: ShardProducers,
    /// Consumer groups this shard coordinates, and their groups log.
    pub groups: Rc<crate::groups::store::GroupStore>,
    /// Member ids: start time, shard and a counter make them unique.
    pub member_seq: Cell<u64>,
    /// The Kafka (classic protocol) groups this shard coordinates.
    pub classic_groups: crate::groups::classic::ClassicGroups,
    pub started_nanos: u128,
    /// Rotates the partition for keyless records, one step per request.
    pub spread: Cell<u64>,
    /// Client connections open on this shard, per listener.
    pub connections: crate::shard::connections::Open,
    /// Bytes of client requests and responses this shard holds at once
    /// (`--request-shard-bytes`; shard/budget.rs).
    pub request_budget: Rc<crate::shard::budget::Budget>,
    /// Reaches 1 when this shard starts shutting down.
    pub shutdown: Watermark,
    /// The schema registry, held by the shard that owns `_schemas/0`.
    pub registry: crate::registry::Registry,
    /// This shard's end of the raft transport; `None` when standalone.
    pub raft: Option<Rc<crate::cluster::transport::ShardTransport>>,
}

impl Shard {
    pub fn new(
        id: ShardId,
        config: Arc<Config>,
        catalog: Arc<Catalog>,
        state: Arc<BrokerState>,
        metrics: Arc<metrics_exporter_prometheus::PrometheusHandle>,
        senders: Option<Senders<Envelope>>,
        groups: crate::groups::load::ShardGroups,
    ) -> Shard {
        let shards = config.shard_count();
        let producers = ShardProducers::new(
            catalog.producer_start_view().known(),
            catalog.producer_start_view().owners.clone(),
        );
        let request_budget = crate::shard::budget::Budget::new(
            config.request_shard_bytes as u64,
            Some(metrics::gauge!("es_request_budget_bytes_held", "shard" => id.to_string())),
        );
        let batcher = FsyncBatcher::new();
        let raft = config
            .cluster
            .transport
            .as_ref()
            .map(|t| crate::cluster::transport::ShardTransport::new(t, id));
        let groups = Rc::new(crate::groups::store::GroupStore::new(
            &config.data_dir,
            id,
            shards,
            groups,
            batcher.clone(),
        ));
        Shard {
            id,
            shards,
            config,
            catalog,
            state,
            metrics,
            batcher,
            outbox: Outbox::new(shards, senders),
            partitions: RefCell::new(crate::shard::owned::OwnedPartitions::default()),
            hot: crate::shard::hot_metrics::HotMetrics::new(),
            producers,
            groups,
            member_seq: Cell::new(0),
            classic_groups: Default::default(),
            started_nanos: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            controller_lock: glommio::sync::Semaphore::new(1),
            spread: Cell::new(id as u64),
            connections: Default::default(),
            request_budget,
            shutdown: Watermark::new(0),
            registry: Default::default(),
            raft,
        }
    }

    pub fn data_dir(&self) -> &PathBuf {
        &self.config.data_dir
    }

    /// The shard owning `partition` of `topic`.
    pub fn owner(&self, topic: &str, partition: u32) -> ShardId {
        placement::shard_of(topic, partition, self.shards)
    }

    /// The shard coordinating consumer group `group`.
    pub fn group_owner(&self, group: &str) -> ShardId {
        placement::shard_of_group(group, self.shards)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.get() > 0
    }
}
