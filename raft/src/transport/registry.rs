//! `GroupRegistry`: a shard's Raft groups by id, where the server side of
//! the transport sends each frame. A group that is being opened answers
//! `not_ready`, one that is not here `unknown_group` (the topic may not be
//! applied on this node yet); the sender's openraft backs off and retries.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use openraft::Raft;

use crate::transport::codec::ErrorBody;
use crate::transport::error::code;
use crate::types::{EsRaft, GroupId};

enum Slot {
    Opening,
    Ready(Raft<EsRaft>),
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
        self.0.borrow_mut().insert(group, Slot::Ready(raft));
    }

    /// Stops routing `group`; its handle if it was ready.
    pub fn remove(&self, group: GroupId) -> Option<Raft<EsRaft>> {
        match self.0.borrow_mut().remove(&group) {
            Some(Slot::Ready(r)) => Some(r),
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
        match self.0.borrow().get(&group) {
            Some(Slot::Ready(r)) => Ok(r.clone()),
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
