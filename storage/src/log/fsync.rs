//! The shard's fsync batcher: group commit.
//!
//! Lives on one shard. A partition that wrote bytes marks itself dirty
//! here. Each target has at most one sync in flight: marked while idle, it
//! syncs at once; marked while its sync runs, it syncs once more when that
//! one ends, covering every append that completed meanwhile. So one
//! appender costs one fsync, a thousand concurrent appenders to a partition
//! cost one or two, and partitions never wait for each other's syncs (two
//! producers on two partitions of a shard overlap their fsyncs as two
//! writers to two files would).

use std::cell::{Cell, RefCell};
use std::collections::hash_map::{Entry, HashMap};
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
    /// Syncs run (one fdatasync each); a "round" is one target's sync.
    pub rounds: u64,
    /// Target syncs issued (the same as `rounds`; kept for callers).
    pub syncs: u64,
    /// Appends made durable.
    pub appends: u64,
}

/// One per shard; cheap to clone (a handle).
#[derive(Clone)]
pub struct FsyncBatcher {
    inner: Rc<Inner>,
}

struct Inner {
    /// Targets with a sync in flight, by address (see [`key`]).
    active: RefCell<HashMap<usize, Slot>>,
    stats: Cell<FsyncStats>,
    duration: metrics::Histogram,
    per_round: metrics::Histogram,
    rounds: metrics::Counter,
}

struct Slot {
    /// Marked again while the sync ran: sync once more.
    again: bool,
    /// Appends the next sync covers.
    appends: u64,
}

impl Default for FsyncBatcher {
    fn default() -> FsyncBatcher {
        FsyncBatcher::new()
    }
}

impl FsyncBatcher {
    pub fn new() -> FsyncBatcher {
        FsyncBatcher {
            inner: Rc::new(Inner {
                active: RefCell::new(HashMap::new()),
                stats: Cell::new(FsyncStats::default()),
                duration: metrics::histogram!("es_fsync_duration_seconds"),
                per_round: metrics::histogram!("es_fsync_appends_per_round"),
                rounds: metrics::counter!("es_fsync_rounds_total"),
            }),
        }
    }

    pub fn stats(&self) -> FsyncStats {
        self.inner.stats.get()
    }

    /// Asks for `target` to be synced, counting `appends` appends the sync
    /// will make durable: at once if it has no sync in flight, else once
    /// more after the one in flight.
    pub fn mark_dirty(&self, target: Rc<dyn SyncTarget>, appends: u64) {
        let mut active = self.inner.active.borrow_mut();
        match active.entry(key(&target)) {
            Entry::Occupied(mut slot) => {
                let slot = slot.get_mut();
                slot.again = true;
                slot.appends += appends;
            }
            Entry::Vacant(slot) => {
                slot.insert(Slot {
                    again: false,
                    appends,
                });
                drop(active);
                glommio::spawn_local(sync_loop(self.inner.clone(), target, None)).detach();
            }
        }
    }

    /// Whether `target` has a sync in flight (then marking it dirty makes
    /// it sync once more after that one).
    pub fn is_syncing(&self, target: &Rc<dyn SyncTarget>) -> bool {
        self.inner.active.borrow().contains_key(&key(target))
    }

    /// Takes `started`, a sync of `target` that its owner already started
    /// (a write that its disk thread syncs right after: `io/disk_threads/`)
    /// and that completes `appends` appends, as `target`'s sync in flight:
    /// counted like any other, and marking `target` dirty meanwhile syncs
    /// it once more after it. `target` must have no sync in flight.
    pub fn adopt(&self, target: Rc<dyn SyncTarget>, appends: u64, started: SyncFuture) {
        let previous = self.inner.active.borrow_mut().insert(
            key(&target),
            Slot {
                again: false,
                appends,
            },
        );
        assert!(previous.is_none(), "a target has one sync in flight");
        glommio::spawn_local(sync_loop(self.inner.clone(), target, Some(started))).detach();
    }
}

/// A sync under way: resolves when it ends (its owner handles its result).
pub type SyncFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Syncs `target` until no append is left waiting for it, starting with
/// the sync already under way, if any.
async fn sync_loop(inner: Rc<Inner>, target: Rc<dyn SyncTarget>, mut started: Option<SyncFuture>) {
    let k = key(&target);
    loop {
        let appends = {
            let mut active = inner.active.borrow_mut();
            let slot = active.get_mut(&k).expect("a syncing target has a slot");
            slot.again = false;
            std::mem::take(&mut slot.appends)
        };
        let started_at = Instant::now();
        match started.take() {
            Some(sync) => sync.await,
            None => target.clone().sync().await,
        }
        inner.duration.record(started_at.elapsed().as_secs_f64());
        inner.per_round.record(appends as f64);
        inner.rounds.increment(1);
        let mut s = inner.stats.get();
        s.rounds += 1;
        s.syncs += 1;
        s.appends += appends;
        inner.stats.set(s);
        let mut active = inner.active.borrow_mut();
        if !active.get(&k).expect("a syncing target has a slot").again {
            active.remove(&k);
            return;
        }
    }
}

/// A target's identity: the address of the object (not of its vtable,
/// which may differ between codegen units). It stays valid while the
/// target's sync loop holds the target.
fn key(target: &Rc<dyn SyncTarget>) -> usize {
    Rc::as_ptr(target) as *const () as usize
}
