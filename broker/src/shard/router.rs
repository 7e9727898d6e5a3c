//! A shard: one glommio executor (one thread, one io_uring) that owns a set
//! of partitions outright, their fsync batcher, and its share of client
//! connections. Lives on its own thread; nothing in it is shared.
//!
//! `call` is the router: an operation for a partition another shard owns is
//! forwarded over the channel mesh and the reply comes back the same way; an
//! operation for this shard runs here (a shard cannot send to itself on the
//! mesh). Either way an operation that changes state, once called, runs to
//! its end whatever becomes of the caller; every operation runs inside
//! `ops::handle`, which contains its panics.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use es_storage::{FsyncBatcher, Watermark};
use futures::channel::oneshot;

use crate::error::ApiError;
use crate::operate::config::Config;
use crate::producers::known::KnownProducers;
use crate::producers::snapshot::PartitionProducers;
use crate::shard::mesh::Senders;
use crate::shard::message::{Envelope, Op, Reply};
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
    senders: Option<Senders<Envelope>>,
    /// Per target shard, operations that must run to completion and found
    /// its channel full: sent in order by one task (`send_in_order`), and
    /// every later one queues behind them, so that a producer's pipelined
    /// batches reach their partition in the order they were called.
    overflow: RefCell<Vec<std::collections::VecDeque<Envelope>>>,
    /// Per target shard, whether a `send_in_order` task runs for it.
    draining: Vec<Cell<bool>>,
    /// Partitions this shard owns, by topic and partition.
    pub partitions: RefCell<crate::shard::owned::OwnedPartitions>,
    /// Metric handles of the request paths.
    pub hot: crate::shard::hot_metrics::HotMetrics,
    /// Serializes controller operations (shard 0 only).
    pub controller_lock: glommio::sync::Semaphore,
    /// Idempotent producer state of the partitions this shard owns.
    pub producers: RefCell<HashMap<(String, u32), PartitionProducers>>,
    /// What this shard knows of producer ids: a produce with an id or
    /// epoch never issued, fenced or expired is refused on every partition.
    pub known_producers: RefCell<KnownProducers>,
    /// Producer id registry (controller shard only; loaded on first use).
    pub producer_registry: RefCell<Option<crate::producers::ids::Registry>>,
    /// Consumer groups this shard coordinates, and their groups log.
    pub groups: Rc<crate::groups::store::GroupStore>,
    /// Member ids: start time, shard and a counter make them unique.
    pub member_seq: Cell<u64>,
    pub started_nanos: u128,
    /// Rotates the partition for keyless records, one step per request.
    pub spread: Cell<u64>,
    /// Client connections open on this shard, per listener.
    pub connections: crate::listen::listener::Open,
    /// Bytes of client requests and responses this shard holds at once
    /// (`--request-shard-bytes`; shard/budget.rs).
    pub request_budget: Rc<crate::shard::budget::Budget>,
    /// Reaches 1 when this shard starts shutting down.
    pub shutdown: Watermark,
}

impl Shard {
    pub fn new(
        id: ShardId,
        config: Arc<Config>,
        catalog: Arc<Catalog>,
        state: Arc<BrokerState>,
        metrics: Arc<metrics_exporter_prometheus::PrometheusHandle>,
        senders: Option<Senders<Envelope>>,
        groups: crate::groups::store::ShardGroups,
    ) -> Shard {
        let shards = config.shard_count();
        let known_producers = RefCell::new(catalog.producer_start_view().known());
        let request_budget = crate::shard::budget::Budget::new(
            config.request_shard_bytes as u64,
            Some(metrics::gauge!("es_request_budget_bytes_held", "shard" => id.to_string())),
        );
        let batcher = FsyncBatcher::new();
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
            senders,
            overflow: RefCell::new((0..shards).map(|_| Default::default()).collect()),
            draining: (0..shards).map(|_| Cell::new(false)).collect(),
            partitions: RefCell::new(crate::shard::owned::OwnedPartitions::default()),
            hot: crate::shard::hot_metrics::HotMetrics::new(),
            producers: RefCell::new(HashMap::new()),
            producer_registry: RefCell::new(None),
            known_producers,
            groups,
            member_seq: Cell::new(0),
            started_nanos: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            controller_lock: glommio::sync::Semaphore::new(1),
            spread: Cell::new(id as u64),
            connections: Default::default(),
            request_budget,
            shutdown: Watermark::new(0),
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

    /// Runs `op` on shard `target`: here, or forwarded over the mesh.
    ///
    /// An operation that changes state (`runs_to_completion`) runs to its
    /// end whatever becomes of the caller: hyper drops a handler's future
    /// when its client disconnects, and an operation cut between two of its
    /// steps (a topic's `meta.json` written, its catalog entry not) would
    /// leave the broker inconsistent. Here it runs in a detached task whose
    /// reply the caller awaits; forwarded, the owning shard runs it in a
    /// detached task of its own (`serve_mesh`) once the envelope is sent,
    /// and the send is made from a detached task too when the channel is
    /// full. Reads run in the caller's future: dropping one cuts nothing.
    pub fn call(self: &Rc<Self>, target: ShardId, op: Op) -> impl Future<Output = Reply> + 'static {
        let shard = self.clone();
        let pending = if !runs_to_completion(&op) {
            Pending::Inline(op)
        } else if target == self.id {
            let (tx, rx) = oneshot::channel();
            let here = self.clone();
            glommio::spawn_local(async move {
                let _ = tx.send(crate::ops::handle(here, op).await);
            })
            .detach();
            Pending::Reply(rx)
        } else {
            let (tx, rx) = oneshot::channel();
            self.send_whole(target, Envelope { op, reply: tx });
            Pending::Reply(rx)
        };
        async move {
            match pending {
                Pending::Inline(op) => shard.route(target, op).await,
                Pending::Reply(rx) => rx.await.unwrap_or_else(|_| dropped(target)),
            }
        }
    }

    /// Sends `env` to shard `target` now if its channel has room and no
    /// earlier operation waits to go there; else queues it for
    /// `send_in_order`, a task of its own that a dropped caller does not
    /// cut. Unsent (the target is gone), the envelope's reply is dropped
    /// with it: the caller hears `unavailable`.
    fn send_whole(self: &Rc<Self>, target: ShardId, env: Envelope) {
        if self.draining[target].get() {
            self.overflow.borrow_mut()[target].push_back(env);
            return;
        }
        if let Err(Some(env)) = self.senders().try_send_to(target, env) {
            self.overflow.borrow_mut()[target].push_back(env);
            self.draining[target].set(true);
            glommio::spawn_local(self.clone().send_in_order(target)).detach();
        }
    }

    /// Sends the operations queued for `target` one after the other, in
    /// order, until none is left.
    async fn send_in_order(self: Rc<Self>, target: ShardId) {
        loop {
            let next = self.overflow.borrow_mut()[target].pop_front();
            let Some(env) = next else {
                self.draining[target].set(false);
                return;
            };
            let _ = self.senders().send_to(target, env).await;
        }
    }

    fn senders(&self) -> &Senders<Envelope> {
        self.senders.as_ref().expect("more than one shard has a mesh")
    }

    /// Runs `op` on `target` in the caller's future: here, or forwarded.
    async fn route(self: &Rc<Self>, target: ShardId, op: Op) -> Reply {
        if target == self.id {
            // Boxed: the operation's state is not part of every call future.
            return Box::pin(crate::ops::handle(self.clone(), op)).await;
        }
        let (tx, rx) = oneshot::channel();
        if self
            .senders()
            .send_to(target, Envelope { op, reply: tx })
            .await
            .is_err()
        {
            return Reply::Done(Err(ApiError::unavailable(format!(
                "shard {target} is not reachable"
            ))));
        }
        rx.await.unwrap_or_else(|_| dropped(target))
    }
}

/// What `Shard::call` has left to do when its future is polled.
enum Pending {
    /// A read, run in the caller's future.
    Inline(Op),
    /// An operation already under way in a detached task, here or on its
    /// shard: its reply.
    Reply(oneshot::Receiver<Reply>),
}

/// The reply to an operation whose reply never came: its shard stopped
/// (shutdown) or it could not be sent there.
fn dropped(target: ShardId) -> Reply {
    Reply::Done(Err(ApiError::unavailable(format!(
        "shard {target} did not answer (stopping, or not reachable)"
    ))))
}

/// Whether `op` changes state, and so must run to its end once started
/// whatever becomes of its caller (`Shard::call`). Reads (a fetch, a
/// describe, a scrape) may be dropped midway.
fn runs_to_completion(op: &Op) -> bool {
    use crate::groups::coordinator::GroupOp;
    match op {
        Op::Fetch(_) | Op::Describe { .. } | Op::Series | Op::ListGroups | Op::OffsetForTime { .. } => false,
        Op::Group { op, .. } => !matches!(op, GroupOp::Commits | GroupOp::Describe),
        Op::Produce { .. }
        | Op::Open { .. }
        | Op::Remove { .. }
        | Op::Configure { .. }
        | Op::CreateTopic(_)
        | Op::DeleteTopic(_)
        | Op::PatchTopic { .. }
        | Op::InitProducer(_)
        | Op::Producers(_)
        | Op::AdoptConnection { .. } => true,
    }
}

/// Serves operations other shards forward to this one, each in its own
/// detached task so a slow one (a long-poll fetch) never holds up the rest,
/// and each runs to its end whether or not its caller still waits
/// (`ops::handle` turns a panic into an `internal` reply).
pub fn serve_mesh(
    shard: Rc<Shard>,
    receivers: Vec<(
        ShardId,
        glommio::channels::shared_channel::ConnectedReceiver<Envelope>,
    )>,
) {
    for (_peer, rx) in receivers {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(env) = rx.recv().await {
                let shard = shard.clone();
                glommio::spawn_local(async move {
                    let reply = crate::ops::handle(shard, env.op).await;
                    let _ = env.reply.send(reply);
                })
                .detach();
            }
        })
        .detach();
    }
}
