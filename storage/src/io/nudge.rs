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
//!
//! A nudge is not always enough: an executor has also been seen asleep in
//! `io_uring_enter` through thousands of nudges (its eventfd written each
//! time), woken only when the thread was interrupted (a debugger's attach).
//! So the nudger watches each executor's poll count, and when an executor
//! has not polled its nudge task for [`KICK_AFTER_NUDGES`] nudges in a row it
//! sends that thread [`KICK_SIGNAL`], whose handler does nothing: the signal
//! ends the `io_uring_enter` (glommio takes its EINTR as a wake-up, and the
//! kernel runs the thread's pending io_uring work on the way out).
//! `SA_RESTART` keeps any other interrupted call going. A kick that finds
//! the executor merely busy costs one signal delivery.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak}; // blocking-ok: the nudger thread and executor start-up lock it, for nanoseconds
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;

use crate::limits::{KICK_AFTER_NUDGES, NUDGE_INTERVAL_MS};

/// The signal a stuck executor's thread is kicked with: ignored by default
/// (so it interrupts nothing until [`install_kick_handler`] runs) and used
/// for nothing else in es.
const KICK_SIGNAL: libc::c_int = libc::SIGURG;

/// Kicks sent since the process started (every executor).
static KICKS: AtomicU64 = AtomicU64::new(0);

/// How many stuck executors the nudger has kicked with a signal since the
/// process started (docs/design/lost-wakeup.md).
pub fn kicks() -> u64 {
    KICKS.load(Ordering::Relaxed)
}

/// One nudged executor's task: woken by the nudger thread.
struct Slot {
    waker: AtomicWaker,
    stopped: AtomicBool,
    /// Times the task was polled: each nudge that reached the executor.
    polls: AtomicU64,
    /// The executor's thread (a Linux thread id), for a kick.
    tid: libc::pid_t,
}

/// What the nudger remembers of one executor between nudges.
struct Watched {
    slot: Weak<Slot>,
    /// `polls` when the nudger last looked.
    polls: u64,
    /// Nudges in a row that did not get the task polled.
    unanswered: u32,
}

/// Every nudged executor, for the nudger thread; dead ones are dropped as
/// it goes.
fn slots() -> &'static Mutex<Vec<Watched>> {
    static SLOTS: OnceLock<Mutex<Vec<Watched>>> = OnceLock::new();
    SLOTS.get_or_init(|| {
        install_kick_handler();
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
        slots.retain_mut(|w| match w.slot.upgrade() {
            Some(slot) => {
                let polls = slot.polls.load(Ordering::Relaxed);
                if polls == w.polls {
                    w.unanswered += 1;
                } else {
                    w.polls = polls;
                    w.unanswered = 0;
                }
                if w.unanswered >= KICK_AFTER_NUDGES {
                    w.unanswered = 0;
                    kick(slot.tid);
                }
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
            // SAFETY: gettid has no preconditions.
            tid: unsafe { libc::gettid() },
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
        slots().lock().unwrap_or_else(|e| e.into_inner()).push(Watched {
            slot: Arc::downgrade(&slot),
            polls: 0,
            unanswered: 0,
        });
        Ok(Nudge { slot })
    }
}

impl Drop for Nudge {
    fn drop(&mut self) {
        self.slot.stopped.store(true, Ordering::Release);
        self.slot.waker.wake();
    }
}

/// Sends [`KICK_SIGNAL`] to thread `tid` of this process.
fn kick(tid: libc::pid_t) {
    KICKS.fetch_add(1, Ordering::Relaxed);
    metrics::counter!("es_executor_kicks_total").increment(1);
    // SAFETY: tgkill takes plain integers; a thread that has ended makes it
    // fail with ESRCH, and a thread id is only ever reused within this
    // process's threads, where the handler does nothing.
    unsafe {
        libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, KICK_SIGNAL);
    }
}

/// The kick's handler: nothing (async-signal-safe).
extern "C" fn on_kick(_: libc::c_int) {}

/// Installs the do-nothing handler for [`KICK_SIGNAL`], with `SA_RESTART`
/// so a system call the kick interrupts carries on (glommio's sleep in
/// `io_uring_enter` returns, which is the point).
fn install_kick_handler() {
    // SAFETY: a zeroed sigaction is a valid empty one; the handler is an
    // `extern "C" fn(c_int)` that touches nothing.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_kick as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        // Fails only for an invalid signal number or pointer: neither here.
        libc::sigaction(KICK_SIGNAL, &action, std::ptr::null_mut());
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

    /// An executor that does not poll its nudge task (here its thread is
    /// held by a blocking loop, as a lost wake-up holds it asleep) is kicked
    /// with the signal, and carries on as before.
    #[test]
    fn an_executor_that_answers_no_nudge_is_kicked() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .expect("glommio executor")
            .run(async {
                let nudge = Nudge::install().expect("nudge");
                let before = kicks();
                let start = std::time::Instant::now();
                // Holds the thread: the nudge task cannot be polled.
                while kicks() == before {
                    // A guard against a hang, not a limit on speed.
                    assert!(start.elapsed() < Duration::from_secs(600), "no kick came");
                    std::thread::sleep(Duration::from_millis(NUDGE_INTERVAL_MS));
                }
                // The executor still sleeps and wakes on its timers.
                glommio::timer::sleep(Duration::from_millis(NUDGE_INTERVAL_MS)).await;
                drop(nudge);
            });
    }

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
