//! `GroupRegistry`: a shard's Raft groups by id, where the server side of
//! the transport sends each frame. A group that is being opened answers
//! `not_ready`, one that is not here `unknown_group` (the topic may not be
//! applied on this node yet); the sender's openraft backs off and retries.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use openraft::Raft;

use crate::snapshot_image::ImageReceiver;
use crate::snapshot_recv::SnapshotReceiver;
use crate::transport::codec::ErrorBody;
use crate::transport::error::code;
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
pub struct GroupRegistry(Rc<RefCell<HashMap<GroupId, Slot>>>);

impl GroupRegistry {
    /// Marks `group` as being opened: its frames answer `not_ready` until
    /// [`insert`](Self::insert).
    pub fn opening(&self, group: GroupId) {
        self.0.borrow_mut().insert(group, Slot::Opening);
    }

    /// Routes `group`'s frames to `raft`.
    pub fn insert(&self, group: GroupId, raft: Raft<EsRaft>) {
        self.0.borrow_mut().insert(group, Slot::Ready(raft, None));
    }

    /// Routes `group`'s frames to `raft`, its snapshot transfers to
    /// `receiver`.
    pub(crate) fn insert_with_receiver(&self, group: GroupId, raft: Raft<EsRaft>, receiver: Receiver) {
        self.0
            .borrow_mut()
            .insert(group, Slot::Ready(raft, Some(receiver)));
    }

    /// Stops routing `group`; its handle if it was ready.
    pub fn remove(&self, group: GroupId) -> Option<Raft<EsRaft>> {
        match self.0.borrow_mut().remove(&group) {
            Some(Slot::Ready(r, _)) => Some(r),
            _ => None,
        }
    }

    /// Groups registered (ready or opening).
    pub fn len(&self) -> usize {
        self.0.borrow().len()
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
        match self.0.borrow().get(&group) {
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
