//! `--thread-slice-us`: the time slice es-bench's producer and disk-writer
//! threads ask the kernel's scheduler for (Linux 6.12+; older kernels keep
//! their own).
//!
//! es-bench usually shares the broker's machine, and a shard that spins
//! before it parks keeps its CPU until its slice ends (1.4 ms on the
//! two-core machine of docs/benchmarks.md): a producer woken by its ack
//! then waits for the shard, which a client on another machine would not.
//! With a short slice the woken thread gets the CPU at once. The broker's
//! disk threads ask for the same (es-storage's `thread_slice.rs`, whose
//! call this repeats: es-bench depends on the protocol crate alone).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Default `--thread-slice-us`: the shortest slice Linux grants.
pub const THREAD_SLICE_US_DEFAULT: u64 = 100;
/// The range Linux grants (it clamps requests into it).
pub const THREAD_SLICE_US_RANGE: std::ops::RangeInclusive<u64> = 100..=100_000;

/// The slice this run's threads ask for; 0: none asked.
static SLICE_US: AtomicU64 = AtomicU64::new(0);

/// Sets the slice [`apply`] asks for (0: none).
pub fn set(us: u64) {
    SLICE_US.store(us, Ordering::Relaxed);
}

/// Asks for the set slice for the calling thread, keeping its nice
/// value; a refusal is said once, on stderr, and the thread runs on with
/// the kernel's slice.
pub fn apply() {
    let us = SLICE_US.load(Ordering::Relaxed);
    if us == 0 {
        return;
    }
    // SAFETY: no pointers; `who` 0 is the calling thread on Linux.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // SAFETY: `sched_attr` is plain data; all zeros is a valid value.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    attr.size = std::mem::size_of::<libc::sched_attr>() as u32;
    attr.sched_policy = libc::SCHED_OTHER as u32;
    attr.sched_nice = nice;
    attr.sched_runtime = us * 1000;
    // SAFETY: `attr` is a valid `sched_attr` of `attr.size` bytes, alive
    // for the call; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0) };
    static WARNED: AtomicBool = AtomicBool::new(false);
    if r != 0 && !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "es-bench: the kernel refused a {us} us thread slice ({}): threads keep the default",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's slice in ns, if the kernel reports one.
    fn slice_ns() -> Option<u64> {
        let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
        let line = sched.lines().find(|l| l.starts_with("se.slice"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    #[test]
    fn a_thread_that_applies_the_set_slice_runs_with_it() {
        std::thread::spawn(|| {
            let Some(before) = slice_ns() else {
                return; // this kernel reports no slice
            };
            assert_ne!(before, 250_000, "not the default already");
            set(250);
            apply();
            assert_eq!(slice_ns(), Some(250_000));
            set(0);
        })
        .join()
        .unwrap();
    }
}
