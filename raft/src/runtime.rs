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
        Sleep(Timer::new(until(deadline)))
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Timeout<F> {
        Timeout {
            future: Box::pin(future),
            timer: Timer::new(duration),
        }
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
