//! What shards say to each other over the channel mesh: an operation for the
//! shard that owns its partition (or, for topic changes, for the controller
//! on shard 0), and the reply. Owned data only: it crosses threads.

use es_storage::{Record, StoredRecord};
use futures::channel::oneshot;

use crate::error::ApiError;
use crate::producers::idempotence::ProducerFields;
use crate::topics::topic::{TopicConfig, TopicMeta};

#[derive(Debug)]
pub enum Op {
    /// Append one batch to a partition; replies `Produced` once fsynced.
    Produce {
        topic: String,
        partition: u32,
        payload: Payload,
        /// Idempotent producer fields, when the client sent them.
        producer: Option<ProducerFields>,
    },
    /// Read a partition; replies `Fetched`.
    Fetch(FetchArgs),
    /// Open (creating) partitions of a topic on their owning shard.
    Open {
        meta: TopicMeta,
        partitions: Vec<u32>,
    },
    /// Cluster mode, from the reconciler: open this node's replica of a
    /// partition on its owning shard (its log, then its Raft group;
    /// `initialize`: start the group with `replicas` as voters if it never
    /// was). A replica open already is left as it is. Replies `Done`.
    OpenReplica {
        meta: TopicMeta,
        partition: u32,
        group: u64,
        replicas: Vec<u64>,
        initialize: bool,
    },
    /// Cluster mode, on shard 0: returns once this node applied every
    /// controller entry committed when it was asked (bounded), and the
    /// catalog shows it. Replies `Done`.
    ReadBarrier,
    /// Cluster mode: who leads a partition, as its replica here knows.
    /// Replies `Json({"hosted": bool, "leader": id|null})`.
    Leader {
        topic: String,
        partition: u32,
    },
    /// Close partitions and delete their directories.
    Remove {
        topic: String,
        partitions: Vec<u32>,
    },
    /// Apply a new topic config to open partitions.
    Configure {
        topic: String,
        config: TopicConfig,
        partitions: Vec<u32>,
    },
    /// Offsets of partitions; replies `Described`.
    Describe {
        topic: String,
        partitions: Vec<u32>,
    },
    /// Cluster mode: the leaders of partitions as this shard knows them
    /// (cluster/leaders.rs); replies `LeaderViews`.
    LeaderViews {
        topic: String,
        partitions: Vec<u32>,
    },
    /// Cluster mode: this shard's partitions counted (total, without a
    /// leader, under-replicated); replies `PartitionCounts`.
    PartitionCounts,
    /// Controller operations, for shard 0 only.
    CreateTopic(TopicMeta),
    DeleteTopic(String),
    /// Allocate a producer id, or the next epoch of one (controller).
    /// A new producer id, or the next epoch of an existing one, for the
    /// caller (the key that will own the id, or may use it).
    InitProducer(Option<i64>, crate::auth::Principal),
    /// Cluster mode, on shard 0: refuses a producer id or epoch the
    /// controller group never issued, or fenced (after a read barrier
    /// when it looks unknown). Replies `Done`.
    CheckProducer {
        producer_id: i64,
        epoch: i16,
    },
    /// A consumer group operation, on the group's coordinator shard.
    Group {
        group: String,
        op: crate::groups::coordinator::GroupOp,
        /// Who asks: ownership is checked on the coordinator.
        caller: crate::auth::Principal,
    },
    /// A Kafka classic-protocol group operation on the group's shard;
    /// replies `Classic`.
    Classic {
        group: String,
        op: crate::groups::classic::ClassicOp,
        caller: crate::auth::Principal,
    },
    /// The groups a shard coordinates; replies `Json({"groups": [...]})`.
    ListGroups,
    /// Cluster mode, on shard 0: a change of a group's offsets proposed
    /// to the controller group (groups/offset_store.rs); replies `Offsets`.
    GroupOffsets(GroupOffsetsOp),
    /// Cluster mode, from shard 0 to a group's shard: the offsets of
    /// groups as the controller applied them at `index` (`None`: the group
    /// has none, deleted); replies `Done`.
    AdoptOffsets {
        index: u64,
        groups: Vec<crate::groups::offset_store::Adopted>,
    },
    /// This shard's part of a `/metrics` scrape (operate/metrics_live.rs); replies
    /// `Series`.
    Series,
    /// The first offset at or after a timestamp (the high watermark if
    /// none); replies `Json({"offset": n, "timestamp": t})`, `t` the found
    /// record's timestamp (null when none is).
    OffsetForTime {
        topic: String,
        partition: u32,
        timestamp_ms: i64,
    },
    /// The first record with the partition's largest timestamp (Kafka's
    /// ListOffsets -3, KIP-734); replies `Json({"offset": n, "timestamp":
    /// t})`, both null when the partition holds no record.
    MaxTimestamp {
        topic: String,
        partition: u32,
    },
    /// From the controller to every shard: what it must know of producer
    /// ids (issued ids and epochs, the registry's floors, expiry).
    Producers(ProducerOp),
    /// A change to the API-key table (auth/admin.rs), on the controller.
    /// Replies `Json`.
    Keys(crate::auth::admin::KeyOp),
    PatchTopic {
        topic: String,
        changes: serde_json::Map<String, serde_json::Value>,
    },
    /// A schema registry request, on the shard that owns `_schemas/0`.
    /// Replies `Json`.
    Registry {
        op: crate::registry::request::RegistryOp,
        caller: crate::auth::Principal,
    },
    /// A binary connection moving to this shard (listen/binary/affinity.rs): its
    /// socket, and the bytes read from it but not yet handled. Replies
    /// `Done` once it is served here; dropped, the socket closes.
    /// Everything the connection knows of its client travels here too:
    /// that its Hello was answered, and the identity it authenticated as.
    AdoptConnection {
        socket: std::os::fd::OwnedFd,
        unhandled: Vec<u8>,
        principal: crate::auth::Principal,
        /// How the listener that hands the connection over serves it on
        /// this shard: named by that listener, so the core never names one.
        adopt: Adopt,
    },
    /// The cluster as the controller knows it (cluster/view.rs), on
    /// shard 0. Replies `Json`.
    Cluster,
    /// A raft connection (cluster/listener.rs) whose preamble, read on the
    /// shard that accepted it, names this shard. Replies `Done` once it is
    /// served here; dropped, the socket closes.
    AdoptRaft {
        socket: std::os::fd::OwnedFd,
        preamble: es_raft::transport::Preamble,
    },
}

/// Serves a connection another shard handed over (`Op::AdoptConnection`):
/// its socket and the bytes read from it but not yet handled.
pub type Adopt = fn(
    &std::rc::Rc<crate::shard::Shard>,
    std::os::fd::OwnedFd,
    Vec<u8>,
    crate::auth::Principal,
) -> Result<(), ApiError>;

/// The controller's word to each shard about producer ids
/// (producers/known.rs, producers/expiry.rs).
#[derive(Debug, Clone)]
pub enum ProducerOp {
    /// `producer_id` was issued at `epoch` (0: a new id) at `at_ms`: older
    /// epochs are fenced from now on. Replies `Done`.
    Issued {
        producer_id: i64,
        epoch: i16,
        at_ms: i64,
        /// The key id that owns it (docs/security.md), if any.
        owner: Option<std::sync::Arc<str>>,
    },
    /// The registry's floors, after it loaded. Replies `Done`.
    Floors(crate::producers::known::Floors),
    /// Cluster mode: the controller group's producer registry, as this
    /// node applied it (producers/cluster.rs). Replies `Done`.
    Registry(crate::producers::cluster::Published),
    /// From a shard to the others: these ids (id, epoch, active_ms) wrote
    /// on it (first seen there, or found in a partition it opened).
    /// Replies `Done`.
    Live(Vec<(i64, i16, i64)>),
    /// The newest epoch this shard knows for a live id. Replies `Epoch`.
    Epoch(i64),
    /// Ids with state here, last active before `cutoff_ms`. Replies `Ids`.
    Stale { cutoff_ms: i64 },
    /// Of `ids`, those active here since `cutoff_ms`. Replies `Ids`.
    Fresh { ids: Vec<i64>, cutoff_ms: i64 },
    /// Forget `ids` (each unless active here since `cutoff_ms`), in this
    /// shard's view and every partition table; raise the expired floor.
    /// Replies `Live`: the ids kept because they were active since.
    Expire {
        ids: Vec<i64>,
        cutoff_ms: i64,
        expired_below: i64,
    },
}

/// What a produce appends: records the broker encodes, or a batch the
/// producer built (appended as it came), with the ticket of the early write
/// that wrote its pages while it arrived, if one did (listen/binary/early.rs).
#[derive(Debug)]
pub enum Payload {
    Records(Vec<Record>),
    Batch(es_storage::BatchBuf, Option<es_storage::EarlyTicket>),
}

impl Payload {
    /// Records it holds.
    pub fn count(&self) -> u64 {
        match self {
            Payload::Records(r) => r.len() as u64,
            Payload::Batch(b, _) => es_protocol::batch::record_count_of(b) as u64,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FetchArgs {
    pub topic: String,
    pub partition: u32,
    pub offset: Option<u64>,
    pub max_records: usize,
    /// About this many bytes of batches (a soft limit).
    pub max_bytes: usize,
    /// Never more than this many bytes of batches (a hard limit: the bytes
    /// the caller charged for the answer before asking; ops/fetch.rs).
    pub limit_bytes: usize,
    pub wait_ms: u64,
    pub form: FetchForm,
    /// Only wait (up to `wait_ms`, at the high watermark) and read
    /// nothing: a long-poll that holds no charge while it waits.
    pub wait_only: bool,
}

/// How a fetch wants its records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FetchForm {
    /// Decoded, trimmed to exactly `[offset, next_offset)` and `max_records`.
    #[default]
    Records,
    /// Whole batches as stored (the binary protocol's FetchOk).
    Batches,
}

#[derive(Debug)]
pub struct Fetched {
    pub data: FetchedData,
    /// The offset the fetch began at (the log start when none was given).
    pub start_offset: u64,
    pub next_offset: u64,
    pub high_watermark: u64,
    /// The partition's log start offset when it was read.
    pub log_start_offset: u64,
    /// Set when nothing was read because the first batch is larger than
    /// `FetchArgs::limit_bytes`: its length.
    pub first_batch_bytes: Option<usize>,
}

#[derive(Debug)]
pub enum FetchedData {
    Records(Vec<StoredRecord>),
    /// `count` batches, one buffer each: slices of what storage read, to
    /// be sent back to back without being copied into one.
    Batches {
        parts: Vec<bytes::Bytes>,
        count: u32,
    },
}

#[derive(Debug, Clone)]
pub struct PartitionState {
    pub partition: u32,
    pub log_start_offset: u64,
    pub high_watermark: u64,
    /// First offset of the local (hot) segments.
    pub hot_start_offset: u64,
    /// First offset of the cold tier, when it holds offsets below the hot.
    pub cold_start_offset: Option<u64>,
    /// Cluster mode: the replica's view of its group; `None` standalone.
    pub replica: Option<ReplicaState>,
}

/// A partition replica's Raft state (cluster mode), for describe.
#[derive(Debug, Clone)]
pub struct ReplicaState {
    /// The offset after the last record written here (committed or not).
    pub log_end_offset: u64,
    pub leader: Option<u64>,
    pub term: u64,
    pub replicas: Vec<u64>,
    /// Why the replica's group is stopped, waiting for its disk to take
    /// writes again (es-raft's `restart.rs`); `None` while it runs.
    pub storage_failure: Option<String>,
}

/// A change of a group's offsets for the controller group (cluster mode).
#[derive(Debug)]
pub enum GroupOffsetsOp {
    Commit {
        group: String,
        offsets: Vec<(crate::groups::assignor::TopicPartition, u64)>,
    },
    Delete {
        group: String,
    },
}

#[derive(Debug)]
pub enum Reply {
    Produced(Result<u64, ApiError>),
    Fetched(Result<Fetched, ApiError>),
    Done(Result<(), ApiError>),
    Described(Result<Vec<PartitionState>, ApiError>),
    Topic(Result<TopicMeta, ApiError>),
    Producer(Result<(i64, i16), ApiError>),
    /// Producer ids (`ProducerOp::Stale`, `Fresh`, `Expire`).
    Ids(Vec<i64>),
    /// A producer id's epoch on a shard (`ProducerOp::Epoch`).
    Epoch(Option<i16>),
    /// Producer ids with their epoch and last activity
    /// (`ProducerOp::Expire`: those kept).
    Live(Vec<(i64, i16, i64)>),
    Json(Result<serde_json::Value, ApiError>),
    Classic(Result<crate::groups::classic::ClassicReply, ApiError>),
    /// `Op::GroupOffsets`: the controller index applied by the answer, and
    /// the group's offsets `(topic, partition, offset)`.
    Offsets(Result<(u64, crate::groups::offset_store::Offsets), ApiError>),
    Series(Box<crate::operate::metrics_live::ShardSeries>),
    /// Each partition asked, with its leader if this shard knows one.
    LeaderViews(Vec<(u32, Option<crate::cluster::leaders::LeaderView>)>),
    PartitionCounts(crate::cluster::leaders::PartitionCounts),
}

/// A forwarded operation and where to send its reply.
pub struct Envelope {
    pub op: Op,
    pub reply: oneshot::Sender<Reply>,
}
