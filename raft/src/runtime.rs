//! `GlommioRuntime`: openraft's `AsyncRuntime` on a glommio shard.
//!
//! openraft 0.9 with `singlethreaded` asks of its runtime: spawn, sleep,
//! timeout, a oneshot channel, a thread-local rng and an `Instant`. Here:
//!
//! - `spawn` runs the future on the current glommio executor and
//!   **detaches** it at once: openraft drops some join handles and expects
//!   the task to go on (tokio's semantics), while a dropped glommio `Task`
//!   cancels its future. A detached glommio task is joined through its
//!   `JoinHandle`, which resolves to `None` if the task was cancelled.
//!   Tasks go into the shard's raft task queue when one was set
//!   ([`set_raft_task_queue`]): glommio's plain `spawn_local` inherits the
//!   queue of whatever task is running, so heartbeats and votes would
//!   otherwise compete with the request that happened to start the group.
//! - `Sleep` is a glommio `Timer`; `Timeout` races the future with one.
//!   openraft's timeouts are at least the shard's RPC timeout floor
//!   ([`set_rpc_timeout_floor`], `--raft-rpc-timeout-ms`): openraft 0.9
//!   gives each AppendEntries the heartbeat interval as its timeout
//!   (`replication/mod.rs`), so on a link whose round trip is longer every
//!   append would time out and be sent again, and nothing would commit.
//!   es's own waits use [`GlommioRuntime::within`], exactly.
//!   `sleep_until` wakes up to half its wait late, at random (see
//!   `tick_wait`): openraft 0.9.25 calls it for one thing only, the
//!   tick that checks election timeouts, and that tick must not keep two
//!   nodes in step.
//! - `Instant` is openraft's `TokioInstant`: a monotonic clock that needs
//!   no tokio runtime (tokio is compiled, as openraft depends on it, but no
//!   tokio runtime ever runs).
//! - the oneshot is `futures`' (executor-agnostic).

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use glommio::timer::Timer;
use glommio::TaskQueueHandle;
use openraft::async_runtime::AsyncOneshotSendExt;
use openraft::{AsyncRuntime, OptionalSend, TokioInstant};

/// openraft's runtime on the current glommio executor.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
pub struct GlommioRuntime;

thread_local! {
    static RAFT_TQ: Cell<Option<TaskQueueHandle>> = const { Cell::new(None) };
    static RPC_TIMEOUT_FLOOR: Cell<Duration> =
        const { Cell::new(Duration::from_millis(crate::limits::RPC_TIMEOUT_MS_DEFAULT)) };
}

/// Makes every timeout openraft sets on this thread from now on at least
/// `floor` (`--raft-rpc-timeout-ms`; see the module's notes). Its RPCs are
/// the only timeouts openraft sets through its runtime; its election and
/// heartbeat timers are sleeps, which this leaves alone.
pub fn set_rpc_timeout_floor(floor: Duration) {
    RPC_TIMEOUT_FLOOR.with(|c| c.set(floor));
}

/// The floor [`set_rpc_timeout_floor`] set on this thread.
pub fn rpc_timeout_floor() -> Duration {
    RPC_TIMEOUT_FLOOR.with(|c| c.get())
}

impl GlommioRuntime {
    /// `future`, unless `duration` passes first: exactly `duration` (es's
    /// own waits; openraft's go through `AsyncRuntime::timeout`, at least
    /// the RPC timeout floor).
    pub fn within<R, F: Future<Output = R>>(duration: Duration, future: F) -> Timeout<F> {
        Timeout {
            future: Box::pin(future),
            timer: Timer::new(duration),
        }
    }
}

/// Makes every task openraft spawns on this thread from now on run in
/// `tq` (the shard's raft task queue); `None` goes back to the queue of
/// the spawning task.
pub fn set_raft_task_queue(tq: Option<TaskQueueHandle>) {
    RAFT_TQ.with(|c| c.set(tq));
}

/// The join handle of a spawned task: resolves to its output, or to
/// [`JoinError`] if the task was cancelled (its executor ended).
pub struct JoinHandle<T>(glommio::task::JoinHandle<T>);

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|out| out.ok_or(JoinError))
    }
}

/// A spawned task ended without its output (cancelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinError;

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the task was cancelled")
    }
}

impl std::error::Error for JoinError {}

/// A timeout elapsed before its future finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// `sleep`: a glommio timer, its output dropped.
pub struct Sleep(Timer);

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// `timeout`: the future, unless the timer fires first.
pub struct Timeout<F> {
    future: Pin<Box<F>>,
    timer: Timer,
}

impl<R, F: Future<Output = R>> Future for Timeout<F> {
    type Output = Result<R, Elapsed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(out) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        match Pin::new(&mut self.timer).poll(cx) {
            Poll::Ready(_) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The sending half of [`GlommioRuntime::oneshot`].
pub struct OneshotSender<T>(futures::channel::oneshot::Sender<T>);

impl<T> fmt::Debug for OneshotSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OneshotSender")
    }
}

impl<T> AsyncOneshotSendExt<T> for OneshotSender<T> {
    fn send(self, t: T) -> Result<(), T> {
        self.0.send(t)
    }
}

fn until(deadline: TokioInstant) -> Duration {
    deadline.saturating_duration_since(TokioInstant::now())
}

/// How long openraft's tick sleeps when it asks for `wait`: `wait` plus a
/// random lateness of up to half of it.
///
/// openraft 0.9 draws a node's election timeout once, when the node
/// starts, and checks it only on its ticks (every 1.5 heartbeat
/// intervals); a candidate's next campaign starts its own election
/// timeout after its last. Two survivors whose draws fall between the same
/// two ticks and whose ticks are in step (nodes on one executor, or ticks
/// that happen to line up) campaign on the same tick, each votes for
/// itself and refuses the other, and they do it again on the same tick of
/// the next term, and the next: the tie is a fixed point, the group has a
/// quorum and no leader. (openraft 0.10 draws a new timeout for each
/// campaign, openraft#1838.) A random lateness on every tick puts the two
/// tick trains out of step, so each new term's campaigns start apart with
/// a fresh chance, and a split vote stays a matter of bad luck that does
/// not repeat. Lateness only, never early: heartbeats, sent on ticks, go
/// out every 1.5 to 2.25 heartbeat intervals instead of every 1.5.
fn tick_wait(wait: Duration) -> Duration {
    use rand::Rng;
    let lateness_ns = rand::thread_rng().gen_range(0..=wait.as_nanos() / 2);
    wait + Duration::from_nanos(u64::try_from(lateness_ns).unwrap_or(u64::MAX))
}

impl AsyncRuntime for GlommioRuntime {
    type JoinError = JoinError;
    type JoinHandle<T: OptionalSend + 'static> = JoinHandle<T>;
    type Sleep = Sleep;
    type Instant = TokioInstant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = Timeout<T>;
    type ThreadLocalRng = rand::rngs::ThreadRng;
    type OneshotSender<T: OptionalSend> = OneshotSender<T>;
    type OneshotReceiverError = futures::channel::oneshot::Canceled;
    type OneshotReceiver<T: OptionalSend> = futures::channel::oneshot::Receiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        let task = match RAFT_TQ.with(Cell::get) {
            Some(tq) => glommio::spawn_local_into(future, tq)
                .unwrap_or_else(|e| panic!("the raft task queue is gone: {e}")),
            None => glommio::spawn_local(future),
        };
        JoinHandle(task.detach())
    }

    fn sleep(duration: Duration) -> Sleep {
        Sleep(Timer::new(duration))
    }

    fn sleep_until(deadline: TokioInstant) -> Sleep {
        // openraft's tick: see tick_wait.
        Sleep(Timer::new(tick_wait(until(deadline))))
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Timeout<F> {
        Self::within(duration.max(rpc_timeout_floor()), future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: TokioInstant, future: F) -> Timeout<F> {
        Self::timeout(until(deadline), future)
    }

    fn is_panic(_: &JoinError) -> bool {
        // A panic in a glommio task is not caught into its handle: it
        // unwinds the executor. A JoinError is only ever a cancellation.
        false
    }

    fn thread_rng() -> rand::rngs::ThreadRng {
        rand::thread_rng()
    }

    fn oneshot<T>() -> (OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        let (tx, rx) = futures::channel::oneshot::channel();
        (OneshotSender(tx), rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_comes_late_by_up_to_half_its_wait_never_early() {
        let wait = Duration::from_millis(75);
        let waits: Vec<Duration> = (0..1000).map(|_| tick_wait(wait)).collect();
        assert!(waits.iter().all(|&w| w >= wait && w <= wait + wait / 2));
        assert!(
            waits.iter().any(|&w| w != waits[0]),
            "the lateness is drawn anew for each tick"
        );
        assert_eq!(tick_wait(Duration::ZERO), Duration::ZERO);
    }
}
