//! A partition replica's Raft group started again after a storage error.
//!
//! openraft stops a group for good when its log store fails (a write that
//! found the disk full: `ENOSPC`). The partition log itself goes on: a
//! write that found no room is refused and the log goes back to its last
//! complete write (es-storage's `rewind.rs`). So a supervisor on the
//! replica's shard watches each instance's metrics; when one stops with a
//! storage error, it
//!
//! 1. closes that instance (its Proposer refuses what is queued; peers'
//!    frames for the group answer `not_ready` meanwhile, and their
//!    openraft retries);
//! 2. waits, with backoff, until a probe write in the log's directory
//!    succeeds (`PartitionLog::probe_room`);
//! 3. cuts the batches of an entry whose end was never written
//!    (`PartitionLog::cut_unfinished_entry`: it first waits until every
//!    write placed has landed and is fsynced, and cuts only what no one
//!    was told is flushed);
//! 4. starts a new openraft instance over the same log and directory:
//!    node id, vote, membership and entries come from disk, as at a
//!    broker's start, and the leader (another replica, if this one led)
//!    sends what it lacks.
//!
//! Everything that reaches the group through `PartitionRaft` uses the
//! instance of the moment: produce, the broker's describe and metrics, the
//! transport's server side (the registry is given the new handle).

use std::rc::{Rc, Weak};
use std::time::Duration;

use openraft::error::Fatal;
use openraft::{EmptyNode, RaftMetrics};

use crate::group::{Inner, MetricsWatch, PartitionRaft};
use crate::group_instance::start_instance;
use crate::limits::{STORAGE_RESTART_BACKOFF_MAX_MS, STORAGE_RESTART_BACKOFF_MIN_MS};
use crate::replica_stats::bump;
use crate::transport::registry::Receiver;
use crate::types::NodeId;

/// Starts the supervisor of `raft`'s instance now: it waits for that
/// instance to stop on a storage error, then starts another (module doc).
pub(crate) fn supervise(raft: &PartitionRaft) {
    let rx = raft.now().raft.metrics();
    glommio::spawn_local(watch(Rc::downgrade(&raft.0), rx)).detach();
}

/// The storage error the instance stopped with, if it did.
fn storage_failure(m: &RaftMetrics<NodeId, EmptyNode>) -> Option<String> {
    match &m.running_state {
        Err(Fatal::StorageError(e)) => Some(e.to_string()),
        _ => None,
    }
}

/// Waits until the instance behind `rx` stops on a storage error, and
/// returns it; `None` if it stopped otherwise (on purpose).
pub(crate) async fn stopped_by_storage(mut rx: MetricsWatch) -> Option<String> {
    loop {
        if let Some(e) = storage_failure(&rx.borrow_and_update()) {
            return Some(e);
        }
        if rx.changed().await.is_err() {
            // The core's task ended: stopped on purpose, or on the error
            // its last metrics carry.
            return storage_failure(&rx.borrow());
        }
    }
}

async fn watch(replica: Weak<Inner>, rx: MetricsWatch) {
    let Some(failure) = stopped_by_storage(rx).await else {
        return;
    };
    let Some(inner) = replica.upgrade() else { return };
    let this = PartitionRaft(inner);
    if this.0.stopped.get() {
        return;
    }
    tracing::warn!(
        group = this.0.group,
        error = %failure,
        "the replica's raft group stopped on a storage error; it starts again once its disk takes writes"
    );
    bump(&this.0.stats.storage_failures);
    *this.0.storage_failure.borrow_mut() = Some(failure);
    let old = this.now();
    old.proposer.close();
    // Frames for the group answer `not_ready` until the new instance is
    // in: the stopped one would answer them with its fatal error.
    this.0.registry.opening(this.0.group);
    // Nor does it campaign: its election clock goes with the instance.
    this.0.registry.elections().remove(this.0.group);
    if let Err(e) = old.raft.shutdown().await {
        tracing::debug!(group = this.0.group, error = %e, "the stopped raft instance ended with an error");
    }
    old.store.close_meta().await;
    drop(old);
    drop(this);
    let mut backoff = Duration::from_millis(STORAGE_RESTART_BACKOFF_MIN_MS);
    loop {
        glommio::timer::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(STORAGE_RESTART_BACKOFF_MAX_MS));
        let Some(inner) = replica.upgrade() else { return };
        let this = PartitionRaft(inner);
        if this.0.stopped.get() {
            return;
        }
        match restart(&this).await {
            Ok(()) => return,
            Err(e) => {
                tracing::debug!(group = this.0.group, error = %e, "the raft group cannot start again yet");
                *this.0.storage_failure.borrow_mut() = Some(e);
            }
        }
    }
}

/// Steps 2-4 of the module doc; `Err` when one fails (tried again later).
async fn restart(this: &PartitionRaft) -> Result<(), String> {
    let i = &this.0;
    let log = &i.log;
    log.probe_room().await.map_err(|e| format!("no room yet: {e}"))?;
    log.cut_unfinished_entry()
        .await
        .map_err(|e| format!("the log is not whole yet: {e}"))?;
    let instance = start_instance(
        i.node_id,
        i.group,
        log,
        &i.raft_dir,
        &i.network,
        &i.config,
        &i.stats,
        &i.tracking,
    )
    .await?;
    if i.stopped.get() {
        // Shut down meanwhile: the new instance goes too.
        instance.proposer.close();
        let _ = instance.raft.shutdown().await;
        instance.store.close_meta().await;
        return Ok(());
    }
    i.registry.insert_with_receiver(
        i.group,
        instance.raft.clone(),
        Receiver::Log(instance.receiver.clone()),
    );
    i.registry.elect_by_pre_vote(
        i.group,
        instance.raft.clone(),
        crate::election_timer::last_log_of(instance.store.clone()),
        i.network.clone(),
    );
    *i.current.borrow_mut() = Rc::new(instance);
    *i.storage_failure.borrow_mut() = None;
    bump(&i.stats.storage_restarts);
    tracing::info!(
        group = i.group,
        "the replica's raft group started again after a storage error"
    );
    supervise(this);
    Ok(())
}
