//! An offset that only grows (but for a truncation, which takes it back)
//! and that tasks on the same shard can wait on.
//!
//! Lives on one shard (`!Send`). Used for a partition's `written` and
//! `durable` marks: appenders wait for `durable` to pass their last offset,
//! long-polling readers for it to pass the offset they want.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use futures::channel::oneshot;

/// Why a wait ended without the mark reaching its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The mark will never move again (write or fsync failure, or close).
    Failed(String),
    /// The records waited for will not come: their write was refused and
    /// the log went back below them (`refuse_above`). The mark moves on.
    Refused(String),
    /// What was waited for was cut off the log: a replicated log's
    /// uncommitted suffix truncated, the mark taken back to this value
    /// (`rewind`). Whatever is placed there next is another entry.
    Truncated(u64),
}

/// A waiter's key: its target, then a sequence number that tells apart
/// waiters with the same target. Ordered by target, so the waiters a move
/// of the mark wakes are one range.
type WaiterKey = (u64, u64);

/// A value that only grows (but for [`rewind`](Watermark::rewind), a
/// replicated log's truncation), with waiters woken when it reaches their
/// target.
///
/// Invariant: `waiters` holds exactly the waits in progress; a wait whose
/// future is dropped before the mark reaches its target (a long-poll that
/// timed out, a connection that closed) removes itself, so the map never
/// grows with abandoned waits.
#[derive(Debug, Default)]
pub struct Watermark {
    value: Cell<u64>,
    failed: RefCell<Option<String>>,
    waiters: RefCell<BTreeMap<WaiterKey, oneshot::Sender<Result<(), WaitError>>>>,
    next_waiter: Cell<u64>,
}

impl Watermark {
    pub fn new(value: u64) -> Watermark {
        Watermark {
            value: Cell::new(value),
            ..Default::default()
        }
    }

    pub fn get(&self) -> u64 {
        self.value.get()
    }

    /// Moves the mark up to `value` if it is below (a no-op otherwise).
    pub fn advance_to_at_least(&self, value: u64) {
        if value > self.value.get() {
            self.advance(value);
        }
    }

    /// Moves the mark up to `value` and wakes everyone waiting for it.
    pub fn advance(&self, value: u64) {
        assert!(value >= self.value.get(), "watermark moved backwards");
        self.value.set(value);
        let reached = {
            let mut waiters = self.waiters.borrow_mut();
            let above = match value.checked_add(1) {
                Some(next) => waiters.split_off(&(next, 0)),
                None => BTreeMap::new(),
            };
            std::mem::replace(&mut *waiters, above)
        };
        for (_, tx) in reached {
            let _ = tx.send(Ok(()));
        }
    }

    /// Fails every current and future waiter whose target is above the mark.
    pub fn fail(&self, reason: &str) {
        self.failed.borrow_mut().get_or_insert_with(|| reason.to_string());
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for (_, tx) in waiters {
            let _ = tx.send(Err(WaitError::Failed(reason.to_string())));
        }
    }

    /// Refuses every current waiter whose target is above `value` (what
    /// they wait for was dropped: the log went back to `value`), without
    /// failing the mark: later waits wait as usual.
    pub fn refuse_above(&self, value: u64, reason: &str) {
        let refused = match value.checked_add(1) {
            Some(next) => self.waiters.borrow_mut().split_off(&(next, 0)),
            None => BTreeMap::new(),
        };
        for (_, tx) in refused {
            let _ = tx.send(Err(WaitError::Refused(reason.to_string())));
        }
    }

    /// Takes the mark back to `value` (at or below it): the one exception
    /// to "never moves backwards", for a replicated log whose uncommitted
    /// suffix was cut (`log/truncate.rs`). Every waiter whose target is
    /// above `value` gets [`WaitError::Truncated`]: what it waited for is
    /// gone, and the same offsets will hold other records.
    pub fn rewind(&self, value: u64) {
        assert!(value <= self.value.get(), "a rewind goes back");
        self.value.set(value);
        let cut = match value.checked_add(1) {
            Some(next) => self.waiters.borrow_mut().split_off(&(next, 0)),
            None => BTreeMap::new(),
        };
        for (_, tx) in cut {
            let _ = tx.send(Err(WaitError::Truncated(value)));
        }
    }

    /// Resolves once the mark is at least `target`. Dropping the future
    /// before then withdraws the wait.
    pub async fn wait_for(&self, target: u64) -> Result<(), WaitError> {
        if self.value.get() >= target {
            return Ok(());
        }
        if let Some(reason) = self.failed.borrow().as_ref() {
            return Err(WaitError::Failed(reason.clone()));
        }
        let key = (target, self.next_waiter.get());
        self.next_waiter.set(key.1.wrapping_add(1));
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().insert(key, tx);
        let _withdraw = Withdraw { mark: self, key };
        rx.await
            .unwrap_or_else(|_| Err(WaitError::Failed("watermark dropped".into())))
    }

    /// Waits in progress.
    pub fn waiting(&self) -> usize {
        self.waiters.borrow().len()
    }
}

/// Removes a wait's entry when its future ends or is dropped (a no-op when
/// `advance` or `fail` already took it).
struct Withdraw<'a> {
    mark: &'a Watermark,
    key: WaiterKey,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        // Never borrowed across an await or a drop of a wait, so the borrow
        // is free; if it were not, leaving the entry is only a leak.
        if let Ok(mut waiters) = self.mark.waiters.try_borrow_mut() {
            waiters.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn waits_until_reached() {
        let w = Watermark::new(5);
        assert_eq!(w.wait_for(5).now_or_never(), Some(Ok(())));
        let mut f = Box::pin(w.wait_for(8));
        assert!(f.as_mut().now_or_never().is_none());
        w.advance(7);
        assert!(f.as_mut().now_or_never().is_none());
        w.advance(8);
        assert_eq!(f.now_or_never(), Some(Ok(())));
    }

    #[test]
    fn failure_reaches_waiters() {
        let w = Watermark::new(0);
        let mut f = Box::pin(w.wait_for(1));
        assert!(f.as_mut().now_or_never().is_none());
        w.fail("disk gone");
        assert!(matches!(f.now_or_never(), Some(Err(WaitError::Failed(_)))));
        assert!(matches!(w.wait_for(1).now_or_never(), Some(Err(_))));
    }

    /// Waits abandoned before the mark reaches them (a long-poll that timed
    /// out, a connection gone) leave nothing behind.
    #[test]
    fn dropped_waits_leave_no_waiter() {
        let w = Watermark::new(0);
        for i in 0..10_000u64 {
            let mut f = Box::pin(w.wait_for(1 + i % 7));
            assert!(f.as_mut().now_or_never().is_none());
            assert_eq!(w.waiting(), 1);
            drop(f);
        }
        assert_eq!(w.waiting(), 0);
        // Those still waiting are woken in order of target; the rest wait on.
        let mut low = Box::pin(w.wait_for(3));
        let mut same = Box::pin(w.wait_for(3));
        let mut high = Box::pin(w.wait_for(9));
        for f in [&mut low, &mut same, &mut high] {
            assert!(f.as_mut().now_or_never().is_none());
        }
        w.advance(3);
        assert_eq!(low.now_or_never(), Some(Ok(())));
        assert_eq!(same.now_or_never(), Some(Ok(())));
        assert_eq!(w.waiting(), 1);
        assert!(high.as_mut().now_or_never().is_none());
        w.advance(u64::MAX);
        assert_eq!(high.now_or_never(), Some(Ok(())));
        assert_eq!(w.waiting(), 0);
    }

    /// A refusal ends the waits above the value only, once: the mark is
    /// not failed, and later waits are served as usual.
    #[test]
    fn refusal_ends_the_waits_above_only() {
        let w = Watermark::new(5);
        let mut at = Box::pin(w.wait_for(7));
        let mut above = Box::pin(w.wait_for(8));
        let mut far = Box::pin(w.wait_for(12));
        for f in [&mut at, &mut above, &mut far] {
            assert!(f.as_mut().now_or_never().is_none());
        }
        w.refuse_above(7, "disk full");
        assert!(at.as_mut().now_or_never().is_none());
        assert_eq!(
            above.now_or_never(),
            Some(Err(WaitError::Refused("disk full".into())))
        );
        assert!(matches!(far.now_or_never(), Some(Err(WaitError::Refused(_)))));
        assert_eq!(w.waiting(), 1);
        let mut again = Box::pin(w.wait_for(12));
        assert!(again.as_mut().now_or_never().is_none());
        w.advance(12);
        assert_eq!(at.now_or_never(), Some(Ok(())));
        assert_eq!(again.now_or_never(), Some(Ok(())));
        w.refuse_above(u64::MAX, "nothing above");
    }

    /// A rewind takes the mark back and ends the waits in progress (all
    /// above it: a wait at or below the old value had resolved); the mark
    /// then grows again as usual.
    #[test]
    fn rewind_ends_the_waits_in_progress() {
        let w = Watermark::new(10);
        let mut above = Box::pin(w.wait_for(13));
        assert!(above.as_mut().now_or_never().is_none());
        w.rewind(4);
        assert_eq!(w.get(), 4);
        assert_eq!(above.now_or_never(), Some(Err(WaitError::Truncated(4))));
        assert_eq!(w.waiting(), 0);
        let mut again = Box::pin(w.wait_for(6));
        assert!(again.as_mut().now_or_never().is_none());
        w.advance(6);
        assert_eq!(again.now_or_never(), Some(Ok(())));
        w.rewind(6);
        assert_eq!(w.get(), 6, "a rewind to the value itself changes nothing");
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn never_moves_backwards() {
        let w = Watermark::new(3);
        w.advance(2);
    }
}
