//! A monotonic offset that tasks on the same shard can wait on.
//!
//! Lives on one shard (`!Send`). Used for a partition's `written` and
//! `durable` marks: appenders wait for `durable` to pass their last offset,
//! long-polling readers for it to pass the offset they want.

use std::cell::{Cell, RefCell};

use futures::channel::oneshot;

/// Why a wait ended without the mark reaching its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The mark will never move again (write or fsync failure, or close).
    Failed(String),
}

/// One waiter: its target and where to tell it.
type Waiter = (u64, oneshot::Sender<Result<(), WaitError>>);

/// A value that only grows, with waiters woken when it reaches their target.
#[derive(Debug, Default)]
pub struct Watermark {
    value: Cell<u64>,
    failed: RefCell<Option<String>>,
    waiters: RefCell<Vec<Waiter>>,
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

    /// Moves the mark up to `value` and wakes everyone waiting for it.
    pub fn advance(&self, value: u64) {
        assert!(value >= self.value.get(), "watermark moved backwards");
        self.value.set(value);
        self.waiters.borrow_mut().retain_mut(|(target, tx)| {
            if *target <= value {
                let tx = std::mem::replace(tx, oneshot::channel().0);
                let _ = tx.send(Ok(()));
                false
            } else {
                true
            }
        });
    }

    /// Fails every current and future waiter whose target is above the mark.
    pub fn fail(&self, reason: &str) {
        self.failed.borrow_mut().get_or_insert_with(|| reason.to_string());
        for (_, tx) in self.waiters.borrow_mut().drain(..) {
            let _ = tx.send(Err(WaitError::Failed(reason.to_string())));
        }
    }

    /// Resolves once the mark is at least `target`.
    pub async fn wait_for(&self, target: u64) -> Result<(), WaitError> {
        if self.value.get() >= target {
            return Ok(());
        }
        if let Some(reason) = self.failed.borrow().as_ref() {
            return Err(WaitError::Failed(reason.clone()));
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push((target, tx));
        rx.await
            .unwrap_or_else(|_| Err(WaitError::Failed("watermark dropped".into())))
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

    #[test]
    #[should_panic(expected = "backwards")]
    fn never_moves_backwards() {
        let w = Watermark::new(3);
        w.advance(2);
    }
}
