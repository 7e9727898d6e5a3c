//! The shard's budget for recent writes: memory bounded by the shard, not
//! by its partition count.
//!
//! Each partition's `RecentWrites` keeps up to `recent_writes_bytes` of its
//! newest writes (see `recent.rs`); a shard with thousands of partitions
//! would hold that many times as much. The budget counts what all the
//! partitions of this shard hold together and, when a write takes the sum
//! past `recent_writes_shard_bytes`, trims other partitions down to their
//! partial last page (which the writer needs): the least recently written
//! first, by the clock (second chance) rule: a partition written since the
//! budget last passed it is passed over once. A trimmed partition's
//! readers read those bytes back from the file.
//!
//! The budget is per shard, so it lives in a thread local: a shard is one
//! thread, and its partitions never leave it. Total memory: at most the
//! budget, or one partition's own cap when that is larger, plus a partial
//! page per active segment.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use crate::limits::{QUEUE_SWEEP_ENTRIES, RECENT_WRITES_SHARD_BYTES_DEFAULT};
use crate::write::recent::RecentWrites;

struct Budget {
    cap: usize,
    held: usize,
    /// Partitions holding more than their partial page, oldest first.
    queue: VecDeque<Weak<RefCell<RecentWrites>>>,
}

thread_local! {
    static BUDGET: RefCell<Budget> = const {
        RefCell::new(Budget {
            cap: RECENT_WRITES_SHARD_BYTES_DEFAULT,
            held: 0,
            queue: VecDeque::new(),
        })
    };
}

/// Sets this shard's (this thread's) budget; call on the shard at start.
pub fn set_recent_writes_shard_bytes(bytes: usize) {
    BUDGET.with(|b| b.borrow_mut().cap = bytes);
}

/// Bytes of recent writes this shard's partitions hold together.
pub fn recent_writes_shard_held_bytes() -> usize {
    BUDGET.with(|b| b.borrow().held)
}

/// Forgets what a dropped `RecentWrites` held.
pub(crate) fn uncharge(bytes: usize) {
    let _ = BUDGET.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            b.held = b.held.saturating_sub(bytes);
        }
    });
}

/// Counts a write `current` just took, then trims other partitions while
/// the shard holds more than its budget.
pub(crate) fn after_write(current: &Rc<RefCell<RecentWrites>>) {
    let (grew, shrank, enqueue) = {
        let mut rw = current.borrow_mut();
        let (was, now) = (rw.charged_bytes, rw.held_bytes());
        rw.charged_bytes = now;
        rw.referenced = true;
        let enqueue = !rw.queued && now > 0;
        rw.queued |= enqueue;
        (now.saturating_sub(was), was.saturating_sub(now), enqueue)
    };
    BUDGET.with(|b| {
        let mut b = b.borrow_mut();
        b.held = b.held + grew - shrank;
        if enqueue {
            b.queue.push_back(Rc::downgrade(current));
            if b.queue.len().is_multiple_of(QUEUE_SWEEP_ENTRIES) {
                b.queue.retain(|w| w.strong_count() > 0);
            }
        }
    });
    // Each entry is passed at most twice: once to clear its mark, once
    // to trim it.
    let mut visits = 2 * BUDGET.with(|b| b.borrow().queue.len());
    while visits > 0 {
        visits -= 1;
        let next = BUDGET.with(|b| {
            let mut b = b.borrow_mut();
            if b.held <= b.cap {
                None
            } else {
                b.queue.pop_front()
            }
        });
        let Some(weak) = next else {
            break;
        };
        let Some(rc) = weak.upgrade() else {
            continue; // sealed: its drop uncharged it
        };
        let requeue = |weak| BUDGET.with(|b| b.borrow_mut().queue.push_back(weak));
        if Rc::ptr_eq(&rc, current) {
            requeue(weak);
            continue;
        }
        let Ok(mut rw) = rc.try_borrow_mut() else {
            requeue(weak);
            continue;
        };
        if rw.referenced {
            rw.referenced = false;
            drop(rw);
            requeue(weak);
            continue;
        }
        rw.trim();
        let freed = rw.charged_bytes - rw.held_bytes();
        rw.charged_bytes = rw.held_bytes();
        rw.queued = false;
        drop(rw);
        BUDGET.with(|b| b.borrow_mut().held -= freed);
    }
}
