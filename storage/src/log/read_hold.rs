//! `ReadHold`: keeps cleanup off a replicated log's segments while a
//! leader streams them to a late follower (a snapshot transfer reads the
//! log below the purge point, where retention may otherwise delete the
//! segment being read, fail the transfer, and with retention faster than
//! the transfer, starve the follower for good). While a hold from offset
//! `o` lives, retention, tiering and compaction touch only segments that
//! end at or below `o`, whatever the cleanup limit says.

use std::rc::{Rc, Weak};

use crate::{Offset, PartitionLog};

use super::partition::LogState;

/// A hold on a log's segments from an offset on; released when dropped.
pub struct ReadHold {
    log: Weak<LogState>,
    id: u64,
}

impl PartitionLog {
    /// Keeps cleanup off every segment that ends above `offset` until the
    /// hold is dropped.
    pub fn hold_from(&self, offset: Offset) -> ReadHold {
        let shared = &self.shared;
        let id = shared.next_hold.get();
        shared.next_hold.set(id + 1);
        shared.holds.borrow_mut().insert(id, offset.0);
        ReadHold {
            log: Rc::downgrade(shared),
            id,
        }
    }

    /// How many holds live (tests, diagnostics).
    pub fn holds(&self) -> usize {
        self.shared.holds.borrow().len()
    }
}

impl LogState {
    /// The offset cleanup may reach: the cleanup limit, or the lowest hold
    /// if one is lower.
    pub(crate) fn cleanup_bound(&self) -> u64 {
        let held = self.holds.borrow().values().copied().min().unwrap_or(u64::MAX);
        self.cleanup_limit.get().min(held)
    }
}

impl Drop for ReadHold {
    fn drop(&mut self) {
        if let Some(log) = self.log.upgrade() {
            log.holds.borrow_mut().remove(&self.id);
        }
    }
}

impl std::fmt::Debug for ReadHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadHold").field("id", &self.id).finish()
    }
}
