//! Producer ids on a cluster node. The controller group (raft0) issues
//! them (`Controller::init_producer`, from any node: forwarded to its
//! leader) and holds them in its `ProducerRegistry`, applied on every
//! node; the partitions' Raft groups hold each producer's window of
//! sequences (raft/src/producer_window.rs), on every replica.
//!
//! What a node checks before it proposes an idempotent batch is the
//! registry's part: the id was issued, the epoch is the current one (an
//! older one is fenced), the key may use the id. The registry lives with
//! raft0 on shard 0, and a produce runs on the partition's shard, so
//! shard 0 publishes it to every shard of the node after each applied
//! change ([`follow`]) and before an init answers ([`init`]): the check is
//! then made on the partition's shard with no hop, with the standalone
//! broker's owner check unchanged (`ShardProducers::check_owner`, from the
//! published owners). An id or epoch the published registry does not know
//! yet (issued through another node a moment ago) is asked of shard 0,
//! which runs the controller's read barrier first ([`check_on_controller`]);
//! only a fenced epoch is refused without asking (the registry only moves
//! forward). The sequence itself is the partition group's to check: its
//! window is replicated state, so a retry reaching a new leader after a
//! failover is answered from it and written once.

use std::rc::Rc;
use std::sync::Arc;

use es_raft::controller::{refusal, Controller, ProducerRegistry};
use futures::FutureExt;

use crate::error::ApiError;
use crate::producers::idempotence::ProducerFields;
use crate::shard::message::{Op, ProducerOp, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::controller::{controller_error, on_every_shard, refused};

/// The registry as of a controller index, as one shard holds it.
#[derive(Debug, Clone)]
pub struct Published {
    /// The controller's applied index it was taken at: a shard keeps the
    /// newest it was sent.
    pub index: u64,
    pub registry: Arc<ProducerRegistry>,
}

/// A new producer id (`existing` none) or the next epoch of `existing`,
/// issued by the controller group for `caller` (its owner; an admin may
/// re-initialize any id). Answered once this node applied it and every
/// shard here knows it, so an older epoch is fenced here from the
/// answer on (on other nodes once they apply it, within a heartbeat).
pub async fn init(
    shard: &Rc<Shard>,
    existing: Option<i64>,
    caller: &crate::auth::Principal,
) -> Result<(i64, i16), ApiError> {
    debug_assert_eq!(shard.id, CONTROLLER_SHARD);
    let c = crate::cluster::reconciler::controller(shard)?;
    let owner = caller.id().map(str::to_string);
    let issued = c
        .init_producer(existing, owner, caller.is_admin())
        .await
        .map_err(controller_error)?
        .map_err(refused)?;
    let (id, epoch) = (issued.producer_id, issued.epoch);
    // Applied on the controller's leader; here once this node caught up.
    if let Err(e) = c.read_barrier().await {
        return Err(ApiError::unavailable(format!(
            "producer id {id} epoch {epoch} was issued, but this node has not applied it yet ({e}): \
             ask for it again"
        )));
    }
    publish(shard, &c, true).await?;
    Ok((id, epoch))
}

/// Shard 0 of a cluster node: publishes the registry to every shard after
/// each applied run of controller entries that changed it, until the
/// broker stops.
pub fn follow(shard: Rc<Shard>, controller: Controller) {
    glommio::spawn_local(async move {
        let mut rx = controller.applied();
        loop {
            rx.borrow_and_update();
            if let Err(e) = publish(&shard, &controller, false).await {
                tracing::warn!(error = %e, "producer ids not published to every shard; again at the next change");
            }
            let changed = rx.changed().fuse();
            let stopping = shard.shutdown.wait_for(1).fuse();
            futures::pin_mut!(changed, stopping);
            futures::select! {
                r = changed => if r.is_err() { return },
                _ = stopping => return,
            }
            if shard.is_shutting_down() {
                return;
            }
        }
    })
    .detach();
}

/// Sends the registry this node applied to every shard: if it differs
/// from what shard 0 holds, or always (`force`: shard 0 may hold it while
/// another publication is still on its way to the other shards).
async fn publish(shard: &Rc<Shard>, c: &Controller, force: bool) -> Result<(), ApiError> {
    let index = c.applied_index();
    let state = c.state();
    let same = !force
        && shard
            .producers
            .cluster
            .borrow()
            .as_ref()
            .is_some_and(|p| p.index >= index || *p.registry == state.producers);
    if same {
        return Ok(());
    }
    let published = Published {
        index,
        registry: Arc::new(state.producers.clone()),
    };
    on_every_shard(shard, ProducerOp::Registry(published)).await
}

/// `ProducerOp::Registry`, on every shard: keeps the newest registry, and
/// its owners for `ShardProducers::check_owner`.
pub fn adopt(shard: &Shard, published: Published) {
    let mut held = shard.producers.cluster.borrow_mut();
    if held.as_ref().is_some_and(|p| p.index > published.index) {
        return;
    }
    *shard.producers.owners.borrow_mut() = published
        .registry
        .owners
        .iter()
        .map(|(id, key)| (*id, Arc::from(key.as_str())))
        .collect();
    *held = Some(published);
}

/// On the partition's shard, before an idempotent batch is proposed:
/// refuses an id the controller never issued (`unknown_producer_id`), a
/// fenced epoch (`producer_fenced`) or an epoch never issued
/// (`invalid_request`). Asks shard 0 when the published registry does
/// not know the id or epoch.
pub async fn check(shard: &Rc<Shard>, f: ProducerFields) -> Result<(), ApiError> {
    let local = shard
        .producers
        .cluster
        .borrow()
        .as_ref()
        .map(|p| p.registry.check(f.producer_id, f.epoch));
    match local {
        Some(Ok(())) => Ok(()),
        Some(Err(r)) if r.code == refusal::PRODUCER_FENCED => Err(refused(r)),
        _ => {
            let op = Op::CheckProducer {
                producer_id: f.producer_id,
                epoch: f.epoch,
            };
            match shard.call(CONTROLLER_SHARD, op).await {
                Reply::Done(r) => r,
                other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
            }
        }
    }
}

/// `Op::CheckProducer`, on shard 0: the controller's answer, after a read
/// barrier when the id or epoch looks unknown.
pub async fn check_on_controller(shard: &Rc<Shard>, producer_id: i64, epoch: i16) -> Result<(), ApiError> {
    let c = crate::cluster::reconciler::controller(shard)?;
    c.check_producer(producer_id, epoch)
        .await
        .map_err(controller_error)?
        .map_err(refused)
}
