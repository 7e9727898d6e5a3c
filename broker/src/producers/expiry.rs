//! Producer id expiry (`--producer-id-expiry-ms`, Kafka's
//! `producer.id.expiration.ms`): an id that wrote nothing, on any
//! partition, for that long (and got no new epoch) is forgotten by every
//! partition's producer table, every shard's view and the registry; a
//! later produce with it is 404 `unknown_producer_id`, and the producer
//! asks for a new id. This bounds producer state by the ids active within
//! one expiry, however many were ever issued.
//!
//! The controller sweeps on its cleanup tick (`--cleanup-interval-ms`):
//! 1. every shard names the ids it holds state for that were last active
//!    before the cut-off (now minus the expiry);
//! 2. of those, every shard names the ones active since the cut-off: an
//!    id active anywhere stays everywhere;
//! 3. every shard forgets the rest, snapshots each partition that lost
//!    producers, and raises its expired floor: ids issued before the
//!    cut-off (producers/ids.rs, issue marks) that have no state anywhere,
//!    such as ids that never wrote. An id that wrote since step 2 is kept
//!    where it wrote, and given back to the shards that forgot it.
//!
//! Then the registry forgets their epochs and records the floor, durably.
//! Every shard holds state for every id that wrote anywhere (the shard
//! that first sees it tells the others, producers/known.rs), so a shard
//! that has none for an id below its floor can refuse it on its own.
//! Nothing here waits on the wall clock: the sweep reads `clock::now_ms`,
//! which a debug-build test moves (operate/clock.rs).

use std::collections::BTreeSet;
use std::rc::Rc;

use futures::future::join_all;

use crate::error::ApiError;
use crate::limits::SWEEP_IDS_PER_SHARD_MAX;
use crate::shard::message::{Op, ProducerOp, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::controller;

/// One sweep, on the controller's cleanup tick. Does nothing until the
/// broker is ready (the registry is read once every partition opened).
pub async fn sweep(shard: &Rc<Shard>) {
    debug_assert_eq!(shard.id, CONTROLLER_SHARD, "the registry lives on the controller");
    if !shard.state.is_ready(shard.shards) || shard.is_shutting_down() {
        return;
    }
    crate::operate::clock::refresh_test_offset(shard.data_dir()).await;
    let _guard = shard.controller_lock.acquire_permit(1).await;
    let registry = match controller::take_registry(shard).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "producer id expiry skipped: the registry is not readable");
            return;
        }
    };
    let mut registry = registry;
    let result = sweep_with(shard, &mut registry).await;
    *shard.producers.registry.borrow_mut() = Some(registry);
    match result {
        Ok(0) => {}
        Ok(n) => tracing::info!(producer_ids = n, "producer ids expired"),
        Err(e) => tracing::warn!(error = %e, "producer id expiry stopped; the next tick tries again"),
    }
}

/// The sweep's three steps and the registry's update; the ids forgotten.
async fn sweep_with(
    shard: &Rc<Shard>,
    registry: &mut crate::producers::ids::Registry,
) -> Result<usize, ApiError> {
    let expiry_ms = shard.config.producer_id_expiry_ms;
    let now_ms = crate::operate::clock::now_ms();
    let cutoff_ms = now_ms.saturating_sub(expiry_ms as i64);
    registry.mark_issued(now_ms, expiry_ms);
    let floor = registry.expired_floor(cutoff_ms);
    let stale = ids_on_every_shard(shard, &ProducerOp::Stale { cutoff_ms }).await?;
    let expired: Vec<i64> = if stale.is_empty() {
        Vec::new()
    } else {
        let ids: Vec<i64> = stale.iter().copied().collect();
        let fresh = ids_on_every_shard(
            shard,
            &ProducerOp::Fresh {
                ids: ids.clone(),
                cutoff_ms,
            },
        )
        .await?;
        ids.into_iter().filter(|id| !fresh.contains(id)).collect()
    };
    if expired.is_empty() && floor <= registry.floors().expired_below {
        return Ok(0);
    }
    let op = ProducerOp::Expire {
        ids: expired.clone(),
        cutoff_ms,
        expired_below: floor,
    };
    let calls = (0..shard.shards).map(|s| shard.call(s, Op::Producers(op.clone())));
    let mut kept = Vec::new();
    for reply in join_all(calls).await {
        match reply {
            Reply::Live(ids) => kept.extend(ids),
            Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    if !kept.is_empty() {
        // Written to since step 2: live again on every shard.
        controller::on_every_shard(shard, ProducerOp::Live(kept.clone())).await?;
    }
    let forgotten: Vec<i64> = expired
        .into_iter()
        .filter(|id| !kept.iter().any(|(k, _, _)| k == id))
        .collect();
    registry.expire(shard.data_dir(), &forgotten, floor).await?;
    metrics::counter!("es_producer_ids_expired_total").increment(forgotten.len() as u64);
    Ok(forgotten.len())
}

/// The union of the ids every shard answers `op` with.
async fn ids_on_every_shard(shard: &Rc<Shard>, op: &ProducerOp) -> Result<BTreeSet<i64>, ApiError> {
    let calls = (0..shard.shards).map(|s| shard.call(s, Op::Producers(op.clone())));
    let mut out = BTreeSet::new();
    for reply in join_all(calls).await {
        match reply {
            Reply::Ids(ids) => out.extend(ids),
            Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        }
    }
    Ok(out)
}

/// This shard's part of `op` (run by `ops::handle`).
pub fn on_shard(shard: &Shard, op: ProducerOp) -> Reply {
    match op {
        ProducerOp::Issued {
            producer_id,
            epoch,
            at_ms,
            owner,
        } => {
            shard
                .producers
                .known
                .borrow_mut()
                .issued(producer_id, epoch, at_ms);
            if let Some(owner) = owner {
                shard.producers.owners.borrow_mut().insert(producer_id, owner);
            }
            Reply::Done(Ok(()))
        }
        ProducerOp::Registry(published) => {
            crate::producers::cluster::adopt(shard, published);
            Reply::Done(Ok(()))
        }
        ProducerOp::Floors(floors) => {
            shard.producers.known.borrow_mut().raise(floors);
            Reply::Done(Ok(()))
        }
        ProducerOp::Live(ids) => {
            let mut known = shard.producers.known.borrow_mut();
            for (id, epoch, active_ms) in ids {
                known.note(id, epoch, active_ms);
            }
            Reply::Done(Ok(()))
        }
        ProducerOp::Epoch(id) => Reply::Epoch(shard.producers.known.borrow().epoch_of(id)),
        ProducerOp::Stale { cutoff_ms } => Reply::Ids(
            shard
                .producers
                .known
                .borrow()
                .stale(cutoff_ms, SWEEP_IDS_PER_SHARD_MAX),
        ),
        ProducerOp::Fresh { ids, cutoff_ms } => {
            Reply::Ids(shard.producers.known.borrow().fresh(&ids, cutoff_ms))
        }
        ProducerOp::Expire {
            ids,
            cutoff_ms,
            expired_below,
        } => {
            let done = shard
                .producers
                .known
                .borrow_mut()
                .expire(&ids, cutoff_ms, expired_below);
            if !done.gone.is_empty() {
                forget_in_partitions(shard, &done.gone);
                let mut owners = shard.producers.owners.borrow_mut();
                for id in &done.gone {
                    owners.remove(id);
                }
            }
            Reply::Live(done.kept)
        }
    }
}

/// Tells every other shard that `ids` (id, epoch, active_ms) are live:
/// they wrote here. Sent now, whatever becomes of the caller.
pub fn tell_others(shard: &Rc<Shard>, ids: Vec<(i64, i16, i64)>) {
    if ids.is_empty() {
        return;
    }
    for s in (0..shard.shards).filter(|&s| s != shard.id) {
        // An operation that runs to completion is sent by `call` itself.
        drop(shard.call(s, Op::Producers(ProducerOp::Live(ids.clone()))));
    }
}

/// Like [`tell_others`], returning once every other shard has taken them
/// in: a shard opening its partitions counts as ready only once the
/// others know every id its partitions hold.
pub async fn tell_others_and_wait(shard: &Rc<Shard>, ids: Vec<(i64, i16, i64)>) -> Result<(), ApiError> {
    if ids.is_empty() {
        return Ok(());
    }
    let calls = (0..shard.shards)
        .filter(|&s| s != shard.id)
        .map(|s| shard.call(s, Op::Producers(ProducerOp::Live(ids.clone()))));
    for reply in join_all(calls).await {
        if let Reply::Done(Err(e)) = reply {
            return Err(e);
        }
    }
    Ok(())
}

/// Removes `ids` from the producer table of every partition this shard
/// owns, and snapshots each table that changed, so that a restart does not
/// bring them back from the batches behind its last snapshot.
fn forget_in_partitions(shard: &Shard, ids: &[i64]) {
    let partitions = shard.partitions.borrow();
    let mut producers = shard.producers.partitions.borrow_mut();
    for ((topic, p), state) in producers.iter_mut() {
        if !state.table.expire(ids) {
            continue;
        }
        if let Some(owned) = partitions.get(topic, *p) {
            state.snapshots.take(&state.table, &owned.log, "expiry");
        }
    }
}
