//! The one way the integration tests wait (the broker's, and the CLI's,
//! which include this file by path): poll a condition until it holds.
//!
//! A wait is never a verdict on speed. It stops early only when what it
//! waits on cannot happen any more (a broker it depends on has exited:
//! see [`watch`]); otherwise it gives up only after the hang guard,
//! [`hang_guard`] (10 minutes, `ES_TEST_WAIT_SECS` to change), which turns
//! a hang into a failure and says nothing about how fast the machine is.
#![allow(dead_code)]

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The variable that sets the hang guard, in seconds.
pub const WAIT_SECS_ENV: &str = "ES_TEST_WAIT_SECS";
/// The hang guard when `ES_TEST_WAIT_SECS` is not set.
const WAIT_SECS_DEFAULT: u64 = 600;
/// Interval between two polls.
pub const POLL: Duration = Duration::from_millis(20);

/// How long a wait (or a blocking read that only guards against a hang)
/// may last before the test gives up: `ES_TEST_WAIT_SECS`, else 10 minutes.
pub fn hang_guard() -> Duration {
    let secs = std::env::var(WAIT_SECS_ENV)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(WAIT_SECS_DEFAULT);
    Duration::from_secs(secs)
}

thread_local! {
    /// Processes (pid, log file) the waits of this thread depend on.
    static WATCHED: RefCell<Vec<(u32, PathBuf)>> = const { RefCell::new(Vec::new()) };
}

/// Makes every later wait on this thread stop at once, with the log at
/// `log`, if process `pid` exits (a broker the test started).
pub fn watch(pid: u32, log: &Path) {
    WATCHED.with(|w| w.borrow_mut().push((pid, log.to_path_buf())));
}

/// Undoes [`watch`]: process `pid` is meant to exit now.
pub fn unwatch(pid: u32) {
    WATCHED.with(|w| w.borrow_mut().retain(|(p, _)| *p != pid));
}

/// Whether process `pid` has exited (gone, or a zombie not yet reaped).
pub fn has_exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            matches!(state, None | Some("Z" | "X"))
        }
        Err(_) => true,
    }
}

/// Why the waits of this thread cannot succeed any more: a watched
/// process has exited (with its log), or `None`.
pub fn watched_exit() -> Option<String> {
    WATCHED.with(|w| {
        w.borrow()
            .iter()
            .find(|(pid, _)| has_exited(*pid))
            .map(|(pid, log)| {
                let text = std::fs::read_to_string(log)
                    .unwrap_or_else(|e| format!("(cannot read {}: {e})", log.display()));
                format!("es-broker (pid {pid}) exited; its log:\n{text}")
            })
    })
}

/// Polls `probe` until it returns something, and returns that. Panics at
/// once when `died` says why it never will (or a watched broker exits),
/// and after [`hang_guard`] otherwise.
#[track_caller]
pub fn poll_until<T>(
    what: &str,
    mut died: impl FnMut() -> Option<String>,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let guard = hang_guard();
    let start = Instant::now();
    loop {
        if let Some(t) = probe() {
            return t;
        }
        if let Some(why) = died().or_else(watched_exit) {
            panic!("waiting for {what}: {why}");
        }
        if start.elapsed() > guard {
            panic!(
                "gave up waiting for {what} after {guard:?} (a guard against a hang, \
                 not a limit on speed: {WAIT_SECS_ENV} sets it)"
            );
        }
        std::thread::sleep(POLL);
    }
}

/// [`poll_until`] for a condition.
#[track_caller]
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    poll_until(what, || None, || cond().then_some(()))
}
