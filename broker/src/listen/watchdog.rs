//! The watch over one client connection, of either listener: what it is
//! doing (requests in flight, responses waiting to be written, when a
//! byte last came or went), and the verdict that closes it: idle for
//! `--connection-idle-ms` with nothing in flight, or a writer that has
//! waited for the socket to take a byte for `--frame-stall-ms` (a client
//! that stopped reading holds the memory of its unwritten responses).
//! Lives on the connection's shard.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What one connection is doing, as its read loop, request tasks and
/// writer report it.
pub struct Activity {
    /// When a byte last arrived or left, or a request last completed.
    last: Cell<Instant>,
    /// Requests in flight (read, not yet answered) and responses not yet
    /// written whole; a long-poll is in flight while it waits.
    busy: Cell<usize>,
    /// Since when the writer has been waiting for the socket to take
    /// bytes, while it is.
    write_waiting_since: Cell<Option<Instant>>,
    /// The connection is closing (or moving): no verdict any more.
    ended: Cell<bool>,
}

/// Something in flight on a connection, from a request's arrival until its
/// answer is written (dropped then).
pub struct Busy(Rc<Activity>);

/// Why a connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing in flight and nothing received for `--connection-idle-ms`.
    Idle,
    /// Responses waited for `--frame-stall-ms` for the socket to take any
    /// of their bytes.
    WriteStalled,
}

impl Activity {
    pub fn new() -> Rc<Activity> {
        Rc::new(Activity {
            last: Cell::new(Instant::now()),
            busy: Cell::new(0),
            write_waiting_since: Cell::new(None),
            ended: Cell::new(false),
        })
    }

    /// The connection is done with its socket: [`watch`] gives no verdict
    /// from now on.
    pub fn end(&self) {
        self.ended.set(true);
    }

    /// Bytes arrived.
    pub fn touch(&self) {
        self.last.set(Instant::now());
    }

    /// A request (or a response) is in flight until the guard is dropped.
    pub fn busy(self: &Rc<Self>) -> Busy {
        self.busy.set(self.busy.get() + 1);
        Busy(self.clone())
    }

    /// The writer waits for the socket to take bytes.
    pub fn write_waits(&self) {
        if self.write_waiting_since.get().is_none() {
            self.write_waiting_since.set(Some(Instant::now()));
        }
    }

    /// The socket took bytes (or the writer stopped waiting).
    pub fn wrote(&self) {
        self.write_waiting_since.set(None);
        self.touch();
    }

    /// The verdict due by `now`, or when to look again: the writer's wait
    /// for the socket first, then idleness (`idle`, when the connection
    /// has an idle limit), and at the latest after `stall`, since a
    /// write may start waiting at any time.
    fn due(&self, now: Instant, idle: Option<Duration>, stall: Duration) -> Result<Verdict, Instant> {
        let recheck = now + stall;
        if let Some(since) = self.write_waiting_since.get() {
            let due = since + stall;
            return if now >= due {
                Ok(Verdict::WriteStalled)
            } else {
                Err(due)
            };
        }
        match idle {
            Some(idle) if self.busy.get() == 0 => {
                let due = self.last.get() + idle;
                if now >= due {
                    Ok(Verdict::Idle)
                } else {
                    Err(due.min(recheck))
                }
            }
            Some(idle) => Err((now + idle).min(recheck)),
            None => Err(recheck),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let a = &self.0;
        a.busy.set(a.busy.get() - 1);
        a.touch();
    }
}

/// Watches `activity` until a verdict is due: one timer at a time, woken
/// when the next verdict could be due (at least every `stall`). Part of
/// its connection's future, dropped with it; never ready once the
/// connection has ended its activity.
pub async fn watch(activity: &Activity, idle: Option<Duration>, stall: Duration) -> Verdict {
    loop {
        if activity.ended.get() {
            futures::future::pending::<()>().await;
        }
        let now = Instant::now();
        match activity.due(now, idle, stall) {
            Ok(verdict) => return verdict,
            Err(next) => glommio::timer::sleep(next.saturating_duration_since(now)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn idle_only_with_nothing_in_flight() {
        let a = Activity::new();
        let t0 = a.last.get();
        let (idle, stall) = (Some(100 * MS), 30 * MS);
        assert_eq!(
            a.due(t0 + 10 * MS, idle, stall),
            Err(t0 + 40 * MS),
            "looks again after a stall"
        );
        assert_eq!(a.due(t0 + 100 * MS, idle, stall), Ok(Verdict::Idle));
        let busy = a.busy();
        assert!(
            a.due(t0 + 500 * MS, idle, stall).is_err(),
            "a long-poll in flight"
        );
        drop(busy);
        let t1 = a.last.get();
        assert!(t1 >= t0, "completing a request counts as activity");
        assert_eq!(a.due(t1 + 100 * MS, idle, stall), Ok(Verdict::Idle));
        assert!(a.due(t1 + 500 * MS, None, stall).is_err(), "no idle limit");
    }

    #[test]
    fn a_write_that_waits_past_the_stall_limit_is_stalled_whatever_else() {
        let a = Activity::new();
        let _busy = a.busy();
        a.write_waits();
        let since = a.write_waiting_since.get().unwrap();
        let stall = 30 * MS;
        assert_eq!(a.due(since + 10 * MS, None, stall), Err(since + stall));
        assert_eq!(a.due(since + stall, None, stall), Ok(Verdict::WriteStalled));
        a.write_waits();
        assert_eq!(
            a.write_waiting_since.get(),
            Some(since),
            "measured from the first wait"
        );
        a.wrote();
        assert!(a.due(since + stall, None, stall).is_err(), "progress resets it");
    }
}
