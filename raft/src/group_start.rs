//! `Initialize`: how a partition group that was never started starts.
//!
//! Every replica of a new partition opens with the same voters. openraft's
//! `initialize` writes the membership entry and campaigns at once; on
//! every replica at the same moment that is a split vote, and the rounds
//! after it (one per replica, drawn timeouts) may overlap and depose the
//! leader one of them just elected: the first produces to a new topic
//! would meet `outcome_unknown`. So the preferred replica (the
//! assignment's first, Kafka's preferred leader) starts the group at
//! once, and each other replica waits an election timeout drawn as its
//! clock draws one: if by then it has neither a log nor a vote (the
//! preferred replica is down, or has not reached it), it starts the group
//! itself. The members are the same either way, and openraft refuses an
//! `initialize` once the group has a log or a vote, so a late one is a
//! no-op.

use std::collections::BTreeSet;

use openraft::error::{InitializeError, RaftError};
use openraft::AsyncRuntime;

use crate::group::{err, PartitionRaft};
use crate::runtime::GlommioRuntime;
use crate::types::NodeId;

/// The voters a never-started group starts with, and the one that starts
/// it first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Initialize {
    pub voters: BTreeSet<NodeId>,
    pub preferred: NodeId,
}

impl Initialize {
    /// From an assignment's replicas, the preferred one first; `None`
    /// for none.
    pub fn from_replicas(replicas: &[NodeId]) -> Option<Initialize> {
        Some(Initialize {
            voters: replicas.iter().copied().collect(),
            preferred: *replicas.first()?,
        })
    }
}

/// Whether `p`'s group was never started here: no log entry, no vote.
fn never_started(p: &PartitionRaft) -> bool {
    let m = p.now().raft.metrics();
    let m = m.borrow();
    m.last_log_index.is_none() && m.current_term == 0
}

/// Starts `p`'s group with `init`'s voters if it never started: at once
/// on the preferred replica (or where it is not a voter), after a drawn
/// election timeout elsewhere (see the module's comment).
pub(crate) async fn start(p: &PartitionRaft, init: Initialize) -> Result<(), String> {
    if !never_started(p) {
        return Ok(());
    }
    let me = p.0.node_id;
    if me == init.preferred || !init.voters.contains(&init.preferred) {
        return initialize(p, init.voters).await;
    }
    let wait = crate::election_timer::draw_timeout(&p.0.config);
    let p = p.clone();
    GlommioRuntime::spawn(async move {
        GlommioRuntime::sleep(wait).await;
        if p.0.stopped.get() || !never_started(&p) {
            return;
        }
        tracing::info!(
            group = p.0.group,
            preferred = init.preferred,
            "the preferred replica did not start the group: starting it here"
        );
        if let Err(e) = initialize(&p, init.voters).await {
            tracing::warn!(group = p.0.group, error = %e, "starting the group");
        }
    });
    Ok(())
}

async fn initialize(p: &PartitionRaft, voters: BTreeSet<NodeId>) -> Result<(), String> {
    match p.now().raft.initialize(voters).await {
        Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(err(&format!("group {}: initialize", p.0.group), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_replica_is_the_preferred_one() {
        let i = Initialize::from_replicas(&[3, 1, 2]).unwrap();
        assert_eq!(i.preferred, 3);
        assert_eq!(i.voters, BTreeSet::from([1, 2, 3]));
        assert_eq!(Initialize::from_replicas(&[]), None);
    }
}
