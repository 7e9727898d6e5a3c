//! The shard's fsync batcher: group commit.
//!
//! Lives on one shard. Partitions that wrote bytes mark themselves dirty
//! here. One round takes every dirty target, syncs each once (in parallel),
//! and each target then completes every append its sync covered. Appends
//! that arrive while a round runs join the next round, so one appender costs
//! one fsync and a thousand concurrent appenders cost one or two.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

/// Something the batcher can make durable: a partition, a group file.
pub trait SyncTarget {
    /// Syncs what has been written so far and completes the waiters it
    /// covers. A failure is the target's to handle (it poisons itself).
    fn sync(self: Rc<Self>) -> Pin<Box<dyn Future<Output = ()>>>;
}

/// Counters of the batcher, for metrics and benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FsyncStats {
    /// Rounds run.
    pub rounds: u64,
    /// Target syncs issued (one fdatasync each).
    pub syncs: u64,
    /// Appends made durable.
    pub appends: u64,
}

/// One per shard; cheap to clone (a handle).
#[derive(Clone, Default)]
pub struct FsyncBatcher {
    inner: Rc<Inner>,
}

#[derive(Default)]
struct Inner {
    dirty: RefCell<Vec<Rc<dyn SyncTarget>>>,
    dirty_appends: Cell<u64>,
    running: Cell<bool>,
    stats: Cell<FsyncStats>,
}

impl FsyncBatcher {
    pub fn new() -> FsyncBatcher {
        FsyncBatcher::default()
    }

    pub fn stats(&self) -> FsyncStats {
        self.inner.stats.get()
    }

    /// Registers `target` for the next round (once, however often it is
    /// marked), counting `appends` appends it will make durable. Starts a
    /// round at once if none is running.
    pub fn mark_dirty(&self, target: Rc<dyn SyncTarget>, appends: u64) {
        {
            let mut dirty = self.inner.dirty.borrow_mut();
            if !dirty.iter().any(|t| Rc::ptr_eq(t, &target)) {
                dirty.push(target);
            }
        }
        self.inner
            .dirty_appends
            .set(self.inner.dirty_appends.get() + appends);
        if !self.inner.running.replace(true) {
            glommio::spawn_local(run(self.inner.clone())).detach();
        }
    }
}

async fn run(inner: Rc<Inner>) {
    let duration = metrics::histogram!("es_fsync_duration_seconds");
    let per_round = metrics::histogram!("es_fsync_appends_per_round");
    let rounds = metrics::counter!("es_fsync_rounds_total");
    loop {
        let targets = std::mem::take(&mut *inner.dirty.borrow_mut());
        if targets.is_empty() {
            inner.running.set(false);
            return;
        }
        let appends = inner.dirty_appends.replace(0);
        let started = Instant::now();
        let syncs = targets.len() as u64;
        futures::future::join_all(targets.into_iter().map(|t| t.sync())).await;
        duration.record(started.elapsed().as_secs_f64());
        per_round.record(appends as f64);
        rounds.increment(1);
        let mut s = inner.stats.get();
        s.rounds += 1;
        s.syncs += syncs;
        s.appends += appends;
        inner.stats.set(s);
    }
}
