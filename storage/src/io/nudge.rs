//! The nudge: a bound on a lost wake-up of a glommio executor.
//!
//! Invariant: an executor that holds a [`Nudge`] never stays asleep longer
//! than [`NUDGE_INTERVAL_MS`], whatever glommio's sleep missed. Under load,
//! glommio 0.9 executors on Linux 6.x have been seen asleep in
//! `io_uring_enter` with expired timers and finished work; one write to
//! the executor's eventfd woke them (docs/design/lost-wakeup.md). So one
//! process-wide thread wakes a task on every nudged executor each interval.
//! The task lives in a latency-sensitive task queue: glommio wakes such a
//! task from another thread by always writing its executor's eventfd,
//! never only when it believes the executor asleep. A nudge that finds the
//! executor awake costs one poll of an empty task.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak}; // blocking-ok: the nudger thread and executor start-up lock it, for nanoseconds
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;

use crate::limits::NUDGE_INTERVAL_MS;

/// One nudged executor's task: woken by the nudger thread.
struct Slot {
    waker: AtomicWaker,
    stopped: AtomicBool,
    /// Times the task was polled: each nudge that reached the executor.
    polls: AtomicU64,
}

/// Every nudged executor, for the nudger thread; dead ones are dropped as
/// it goes.
fn slots() -> &'static Mutex<Vec<Weak<Slot>>> {
    static SLOTS: OnceLock<Mutex<Vec<Weak<Slot>>>> = OnceLock::new();
    SLOTS.get_or_init(|| {
        std::thread::Builder::new()
            .name("es-nudge".into())
            .spawn(nudger)
            .expect("starting the nudge thread");
        Mutex::new(Vec::new())
    })
}

/// The nudger thread: wakes every nudged executor each interval, for as
/// long as the process lives.
fn nudger() {
    loop {
        std::thread::sleep(Duration::from_millis(NUDGE_INTERVAL_MS)); // blocking-ok: its own thread, not a shard
        let mut slots = slots().lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|s| match s.upgrade() {
            Some(slot) => {
                slot.waker.wake();
                true
            }
            None => false,
        });
    }
}

/// Keeps the current executor nudged until dropped. Held for as long as
/// the executor runs (a shard, a test's executor).
pub struct Nudge {
    slot: Arc<Slot>,
}

impl Nudge {
    /// Nudges the executor this is called on. Must run inside a glommio
    /// executor.
    pub fn install() -> std::io::Result<Nudge> {
        let slot = Arc::new(Slot {
            waker: AtomicWaker::new(),
            stopped: AtomicBool::new(false),
            polls: AtomicU64::new(0),
        });
        let queue = glommio::executor().create_task_queue(
            glommio::Shares::default(),
            glommio::Latency::Matters(Duration::from_millis(NUDGE_INTERVAL_MS)),
            "es-nudge",
        );
        glommio::spawn_local_into(Nudged { slot: slot.clone() }, queue)
            .map_err(|e| std::io::Error::other(format!("spawning the nudge task: {e}")))?
            .detach();
        // blocking-ok: once per executor, held for nanoseconds by the nudger
        slots()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&slot));
        Ok(Nudge { slot })
    }
}

impl Drop for Nudge {
    fn drop(&mut self) {
        self.slot.stopped.store(true, Ordering::Release);
        self.slot.waker.wake();
    }
}

/// The task the nudger wakes: does nothing but wait for the next nudge,
/// until its [`Nudge`] is dropped.
struct Nudged {
    slot: Arc<Slot>,
}

impl Future for Nudged {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.slot.polls.fetch_add(1, Ordering::Relaxed);
        self.slot.waker.register(cx.waker());
        if self.slot.stopped.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nudged task is polled again and again while its executor has
    /// nothing else to do, and ends once the nudge is dropped.
    #[test]
    fn a_nudged_executor_is_woken_until_the_nudge_is_dropped() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .expect("glommio executor")
            .run(async {
                let nudge = Nudge::install().expect("nudge");
                let slot = nudge.slot.clone();
                let start = std::time::Instant::now();
                while slot.polls.load(Ordering::Relaxed) < 5 {
                    // A guard against a hang, not a limit on speed.
                    assert!(start.elapsed() < Duration::from_secs(600), "no nudge came");
                    glommio::timer::sleep(Duration::from_millis(NUDGE_INTERVAL_MS)).await;
                }
                drop(nudge);
                // The task ends: it was polled once more, and registers
                // no waker after that.
                while Arc::strong_count(&slot) > 1 {
                    glommio::timer::sleep(Duration::from_millis(NUDGE_INTERVAL_MS)).await;
                }
            });
    }
}
