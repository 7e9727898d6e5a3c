//! `GroupRegistry`: a shard's Raft groups by id, where the server side of
//! the transport sends each frame. A group that is being opened answers
//! `not_ready`, one that is not here `unknown_group` (the topic may not be
//! applied on this node yet); the sender's openraft backs off and retries.
//! It holds the shard's [`ElectionTimer`] too: the server notes there when
//! a group hears from its leader, and answers pre-votes from it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use openraft::Raft;

use crate::election_timer::{Clock, ElectionTimer, LastLog};
use crate::snapshot_image::ImageReceiver;
use crate::snapshot_recv::SnapshotReceiver;
use crate::transport::codec::ErrorBody;
use crate::transport::error::code;
use crate::transport::network::ShardNetwork;
use crate::types::{EsRaft, GroupId};

enum Slot {
    Opening,
    /// A group, and where its snapshot transfers are received.
    Ready(Raft<EsRaft>, Option<Receiver>),
}

/// Where a group's snapshot transfers are received.
#[derive(Clone)]
pub(crate) enum Receiver {
    /// A partition replica's: the run of the leader's log it lacks.
    Log(Rc<SnapshotReceiver>),
    /// The controller's: its state's image.
    Image(Rc<ImageReceiver>),
}

/// The shard's groups; clones share them.
#[derive(Clone, Default)]
pub struct GroupRegistry {
    slots: Rc<RefCell<HashMap<GroupId, Slot>>>,
    elections: ElectionTimer,
}

impl GroupRegistry {
    /// Marks `group` as being opened: its frames answer `not_ready` until
    /// [`insert`](Self::insert).
    pub fn opening(&self, group: GroupId) {
        self.slots.borrow_mut().insert(group, Slot::Opening);
    }

    /// Routes `group`'s frames to `raft`.
    pub fn insert(&self, group: GroupId, raft: Raft<EsRaft>) {
        self.slots.borrow_mut().insert(group, Slot::Ready(raft, None));
    }

    /// Routes `group`'s frames to `raft`, its snapshot transfers to
    /// `receiver`.
    pub(crate) fn insert_with_receiver(&self, group: GroupId, raft: Raft<EsRaft>, receiver: Receiver) {
        self.slots
            .borrow_mut()
            .insert(group, Slot::Ready(raft, Some(receiver)));
    }

    /// Runs `group`'s elections on the shard's [`ElectionTimer`] (with
    /// pre-vote) instead of openraft's timer; until [`remove`](Self::remove).
    pub(crate) fn elect_by_pre_vote(
        &self,
        group: GroupId,
        raft: Raft<EsRaft>,
        last_log: LastLog,
        network: ShardNetwork,
    ) {
        self.elections.register(group, raft, last_log, network);
    }

    /// Notes that `group` heard from its leader now (its election clock
    /// starts over), if its elections run here.
    pub(crate) fn heard_from_leader(&self, group: GroupId) {
        if let Some(c) = self.elections.clock(group) {
            c.heard_from_leader();
        }
    }

    /// `group`'s election clock, or the error to answer a pre-vote with.
    pub(crate) fn clock(&self, group: GroupId) -> Result<Rc<Clock>, ErrorBody> {
        self.get(group)?;
        self.elections.clock(group).ok_or_else(|| ErrorBody {
            code: code::UNSUPPORTED.into(),
            message: format!("group {group} answers no pre-votes"),
        })
    }

    /// The shard's election timer.
    pub fn elections(&self) -> &ElectionTimer {
        &self.elections
    }

    /// Stops routing `group` (and running its elections); its handle if it
    /// was ready.
    pub fn remove(&self, group: GroupId) -> Option<Raft<EsRaft>> {
        self.elections.remove(group);
        match self.slots.borrow_mut().remove(&group) {
            Some(Slot::Ready(r, _)) => Some(r),
            _ => None,
        }
    }

    /// Groups registered (ready or opening).
    pub fn len(&self) -> usize {
        self.slots.borrow().len()
    }

    /// Whether no group is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The handle frames for `group` go to, or the error to answer.
    pub(crate) fn get(&self, group: GroupId) -> Result<Raft<EsRaft>, ErrorBody> {
        self.get_with_receiver(group).map(|(r, _)| r)
    }

    /// [`get`](Self::get), with the group's snapshot receiver; a group that
    /// receives no snapshots answers `unsupported`.
    pub(crate) fn receiver(&self, group: GroupId) -> Result<(Raft<EsRaft>, Receiver), ErrorBody> {
        match self.get_with_receiver(group)? {
            (r, Some(rx)) => Ok((r, rx)),
            (_, None) => Err(ErrorBody {
                code: code::UNSUPPORTED.into(),
                message: format!("group {group} receives no snapshots"),
            }),
        }
    }

    fn get_with_receiver(&self, group: GroupId) -> Result<(Raft<EsRaft>, Option<Receiver>), ErrorBody> {
        match self.slots.borrow().get(&group) {
            Some(Slot::Ready(r, rx)) => Ok((r.clone(), rx.clone())),
            Some(Slot::Opening) => Err(ErrorBody {
                code: code::NOT_READY.into(),
                message: format!("group {group} is opening"),
            }),
            None => Err(ErrorBody {
                code: code::UNKNOWN_GROUP.into(),
                message: format!("no group {group} on this shard"),
            }),
        }
    }
}
