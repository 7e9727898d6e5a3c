//! The controller group started again after a storage error: as a
//! partition replica's (`crate::restart`), but over the same store and
//! state machine. openraft stops the group when its log store fails (a
//! write that found the disk full); the supervisor closes that instance
//! (frames for group 0 answer `not_ready` meanwhile), waits with backoff
//! until a probe write in the log's directory succeeds, makes the store
//! say again what the log holds (`LogStore::resync`: an entry whose end
//! was never written is cut once every write placed has landed, the
//! entries refused leave the table) and starts a new openraft instance
//! over it. The state machine is kept: what it applied is committed and
//! written, and openraft applies from there. Callers reach the instance
//! of the moment through `Controller::raft`.

use std::rc::{Rc, Weak};
use std::time::Duration;

use super::handle::{start_raft, Controller, Inner};
use crate::group::MetricsWatch;
use crate::limits::{STORAGE_RESTART_BACKOFF_MAX_MS, STORAGE_RESTART_BACKOFF_MIN_MS};
use crate::replica_stats::bump;
use crate::transport::registry::Receiver;
use crate::types::CONTROLLER_GROUP;

/// Starts the supervisor of the controller's instance now.
pub(super) fn supervise(c: &Controller) {
    let rx = c.raft().metrics();
    glommio::spawn_local(watch(Rc::downgrade(&c.0), rx)).detach();
}

async fn watch(controller: Weak<Inner>, rx: MetricsWatch) {
    let Some(failed) = crate::restart::stopped_by_storage(rx).await else {
        return;
    };
    let Some(inner) = controller.upgrade() else { return };
    let c = Controller(inner);
    if c.0.stopped.get() {
        return;
    }
    tracing::warn!(error = %failed, "the controller group stopped on a storage error; it starts again once its disk takes writes");
    bump(&c.0.stats.storage_failures);
    c.0.registry.opening(CONTROLLER_GROUP);
    // Nor does it campaign: its election clock goes with the instance.
    c.0.registry.elections().remove(CONTROLLER_GROUP);
    if let Err(e) = c.raft().shutdown().await {
        tracing::debug!(error = %e, "the stopped controller instance ended with an error");
    }
    drop(c);
    let mut backoff = Duration::from_millis(STORAGE_RESTART_BACKOFF_MIN_MS);
    loop {
        glommio::timer::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(STORAGE_RESTART_BACKOFF_MAX_MS));
        let Some(inner) = controller.upgrade() else { return };
        let c = Controller(inner);
        if c.0.stopped.get() {
            return;
        }
        match restart(&c).await {
            Ok(()) => return,
            Err(e) => tracing::debug!(error = %e, "the controller group cannot start again yet"),
        }
    }
}

async fn restart(c: &Controller) -> Result<(), String> {
    let i = &c.0;
    let store = i.store.log_store();
    store
        .log()
        .probe_room()
        .await
        .map_err(|e| format!("no room yet: {e}"))?;
    store
        .resync()
        .await
        .map_err(|e| format!("the log is not whole yet: {e}"))?;
    let raft_config = i
        .config
        .raft_config()
        .map_err(|e| format!("controller config: {e}"))?;
    let (raft, receiver) = start_raft(i.node_id, raft_config, &i.network, &i.store, &i.sm, &i.stats).await?;
    if i.stopped.get() {
        let _ = raft.shutdown().await;
        return Ok(());
    }
    i.registry
        .insert_with_receiver(CONTROLLER_GROUP, raft.clone(), Receiver::Image(receiver));
    i.registry.elect_by_pre_vote(
        CONTROLLER_GROUP,
        raft.clone(),
        crate::election_timer::last_log_of(i.store.clone()),
        i.network.clone(),
    );
    *i.raft.borrow_mut() = raft;
    bump(&i.stats.storage_restarts);
    tracing::info!("the controller group started again after a storage error");
    supervise(c);
    Ok(())
}
