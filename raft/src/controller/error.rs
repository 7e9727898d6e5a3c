//! `ControllerError`: why a controller request got no answer from the
//! controller's state (a [`Refusal`](super::Refusal) is an answer).

use thiserror::Error;

use crate::types::NodeId;

/// A controller request that did not complete.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ControllerError {
    /// The leader it went to was no longer the leader, and no leader took
    /// it within the bound; who leads now, if known. Not proposed.
    #[error("not the controller leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    /// No leader within the bound, or the leader could not be reached or
    /// could not take it. Not proposed.
    #[error("the controller is unavailable: {0}")]
    Unavailable(String),
    /// Proposed, but whether it was committed is not known (the leader was
    /// lost, or the commit did not come within the bound): it may still
    /// be applied.
    #[error("the outcome of the controller command is unknown: {0}")]
    OutcomeUnknown(String),
    /// This node's controller stopped (shut down, or a storage failure).
    #[error("the controller stopped: {0}")]
    Fatal(String),
}
