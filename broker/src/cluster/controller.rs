//! The controller group (raft0) on shard 0 of a cluster node: opened at
//! start over `<data-dir>/raft/__controller` (every node of `--peers` a
//! voter; a new cluster is initialized by each node alike, which openraft
//! allows), its control frames passed on by the shard's `NodeControl`, and
//! this node's addresses registered in it (`RegisterNode`) whenever the
//! registry holds other ones. Closed at shutdown before the transport.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use es_raft::controller::{Controller, ControllerCommand, ControllerConfig, NodeInfo};

use crate::shard::{Shard, CONTROLLER_SHARD};

/// How often registration looks again while the registry differs (no
/// leader yet, a proposal that failed).
const REGISTER_RETRY: Duration = Duration::from_millis(200);

/// Opens the controller on shard 0 of a cluster node (nothing elsewhere).
pub async fn start(shard: &Rc<Shard>) -> Result<(), String> {
    let Some(t) = &shard.raft else { return Ok(()) };
    if shard.id != CONTROLLER_SHARD {
        return Ok(());
    }
    let c = &shard.config.cluster;
    let config = ControllerConfig {
        heartbeat_ms: c.raft_heartbeat_ms,
        election_timeout_ms: c.raft_election_timeout_ms,
        ..ControllerConfig::default()
    };
    let dir = shard.data_dir().join("raft").join("__controller");
    let voters: BTreeSet<u64> = c.node_ids().into_iter().collect();
    let controller = Controller::open(
        shard.config.node_id,
        &dir,
        voters,
        &t.network,
        &t.registry,
        config,
    )
    .await
    .map_err(|e| format!("opening the controller group: {e}"))?;
    t.control.set_behind(controller.control_handler());
    *t.controller.borrow_mut() = Some(controller.clone());
    crate::cluster::health::start(shard, &controller);
    glommio::spawn_local(crate::cluster::identity::follow(
        shard.clone(),
        controller.clone(),
    ))
    .detach();
    crate::cluster::reconciler::spawn(shard.clone(), controller.clone());
    crate::producers::cluster::follow(shard.clone(), controller.clone());
    crate::groups::cluster::follow(shard.clone(), controller.clone());
    glommio::spawn_local(register(shard.clone(), controller)).detach();
    Ok(())
}

/// This node's entry in the controller's node registry.
pub fn node_info(shard: &Shard) -> NodeInfo {
    let config = &shard.config;
    let id = config.node_id;
    let raft_addr = config
        .cluster
        .peers
        .as_ref()
        .and_then(|p| p.0.get(&id).cloned())
        .unwrap_or_default();
    NodeInfo {
        node_id: id,
        raft_addr,
        http_addr: config
            .cluster
            .advertised_http_addr
            .clone()
            .unwrap_or_else(|| config.http_addr.to_string()),
        binary_addr: config
            .cluster
            .advertised_binary_addr
            .clone()
            .unwrap_or_else(|| config.binary_addr.to_string()),
        kafka_addr: config.kafka.advertised().map(|(h, p)| format!("{h}:{p}")),
    }
}

/// Proposes `RegisterNode` until the registry holds this node's addresses.
async fn register(shard: Rc<Shard>, controller: Controller) {
    let me = node_info(&shard);
    while !shard.is_shutting_down() {
        if controller.state().nodes.get(&me.node_id) == Some(&me) {
            tracing::info!(
                node = me.node_id,
                "this node's addresses are registered with the controller"
            );
            return;
        }
        if controller.leader().is_some() {
            match controller
                .propose(ControllerCommand::RegisterNode(me.clone()))
                .await
            {
                Ok(Ok(_)) => continue,
                Ok(Err(r)) => tracing::warn!(%r, "the controller refused this node's registration"),
                Err(e) => tracing::debug!(error = %e, "registration not committed yet; trying again"),
            }
        }
        glommio::timer::sleep(REGISTER_RETRY).await;
    }
}

/// Stops the controller (shard 0, at shutdown, before the transport).
pub async fn stop(shard: &Shard) {
    let Some(t) = &shard.raft else { return };
    let c = t.controller.borrow_mut().take();
    if let Some(c) = c {
        c.shutdown().await;
    }
}
