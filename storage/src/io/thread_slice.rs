//! Asking the kernel's scheduler for a short time slice for the calling
//! thread: for threads that sleep most of the time and, when woken, must
//! run at once for a few microseconds (a disk thread given a write).
//!
//! Linux's fair scheduler (EEVDF, 6.6+) lets a running task keep its CPU
//! until its slice ends (the default scales with the CPU count: 1.4 ms on
//! two) before a task it woke gets the CPU, unless the woken task asked
//! for a shorter slice (6.12+: `sched_setattr` with `sched_runtime` on a
//! fair thread; no privilege needed; clamped by the kernel to 0.1-100 ms).
//! Only the slice changes: the thread's policy and nice value stay, and a
//! thread an operator put under another policy is left alone. Kernels
//! before 6.12 accept the call and keep their default.
//!
//! A shard that spins before it parks (`--spin-before-park-us`) is such a
//! running task: with the default slice, disk-thread jobs waited for it to
//! run out its slice (docs/storage.md, "Disk threads"; the measurements:
//! docs/design/disk-threads.md).

use std::io;

use crate::limits::{THREAD_SLICE_US_MAX, THREAD_SLICE_US_MIN};

/// Asks for a slice of `us` microseconds for the calling thread, keeping
/// its policy, nice value and flags. An error says the kernel refused, or
/// that the thread is not under the fair scheduler (a real-time or idle
/// policy an operator set: left as it is); either way the thread keeps
/// what it had.
pub fn ask_thread_slice_us(us: u64) -> io::Result<()> {
    if !(THREAD_SLICE_US_MIN..=THREAD_SLICE_US_MAX).contains(&us) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a thread slice is {THREAD_SLICE_US_MIN}-{THREAD_SLICE_US_MAX} us, not {us}"),
        ));
    }
    let mut attr = current()?;
    let policy = attr.sched_policy as i32;
    if policy != libc::SCHED_OTHER && policy != libc::SCHED_BATCH {
        return Err(io::Error::other(format!(
            "the thread's scheduling policy ({policy}) has no fair-scheduler slice"
        )));
    }
    attr.sched_runtime = us * 1000;
    set(&attr)
}

/// Sets the calling thread's scheduling attributes to `attr` (as
/// [`current`] gave them, changed).
fn set(attr: &libc::sched_attr) -> io::Result<()> {
    // SAFETY: `attr` is a valid `sched_attr` of `attr.size` bytes, alive
    // for the call; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, attr as *const libc::sched_attr, 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's scheduling attributes.
fn current() -> io::Result<libc::sched_attr> {
    // SAFETY: `sched_attr` is plain data; all zeros is a valid value.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::sched_attr>() as u32;
    // SAFETY: `attr` is `size` writable bytes, alive for the call; pid 0 is
    // the calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut libc::sched_attr,
            size,
            0,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // The kernel reports the size it filled in; it is what setattr takes.
    attr.size = size;
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's slice, in ns, as `sched_getattr` reports it
    /// (0 on kernels that do not report one).
    fn slice_ns() -> u64 {
        current().unwrap().sched_runtime
    }

    /// Puts the calling thread under `policy`, its other attributes kept.
    fn set_policy(policy: i32) {
        let mut attr = current().unwrap();
        attr.sched_policy = policy as u32;
        set(&attr).unwrap();
    }

    fn nice() -> i32 {
        // SAFETY: no pointers; `who` 0 is the calling thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn a_thread_gets_the_slice_it_asks_for_and_keeps_its_policy_and_nice_value() {
        std::thread::spawn(|| {
            // One step nicer than the test runs (raising nice needs no
            // privilege).
            let niced = (nice() + 1).min(19);
            // SAFETY: no pointers.
            assert_eq!(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, niced) }, 0);
            let before = slice_ns();
            ask_thread_slice_us(250).unwrap();
            assert_eq!(nice(), niced, "nice kept");
            assert_eq!(current().unwrap().sched_policy, libc::SCHED_OTHER as u32);
            // Kernels before 6.12 report no slice for a fair thread (0).
            if before != 0 {
                assert_ne!(before, 250_000, "not the default already");
                assert_eq!(slice_ns(), 250_000);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_batch_thread_stays_a_batch_thread() {
        std::thread::spawn(|| {
            set_policy(libc::SCHED_BATCH);
            ask_thread_slice_us(300).unwrap();
            assert_eq!(current().unwrap().sched_policy, libc::SCHED_BATCH as u32);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_idle_policy_thread_is_left_as_it_is() {
        std::thread::spawn(|| {
            set_policy(libc::SCHED_IDLE);
            let before = current().unwrap().sched_runtime;
            assert!(ask_thread_slice_us(300).is_err());
            let after = current().unwrap();
            assert_eq!(after.sched_policy, libc::SCHED_IDLE as u32);
            assert_eq!(after.sched_runtime, before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_slice_outside_what_linux_grants_is_refused() {
        for us in [0, 99, 100_001] {
            let e = ask_thread_slice_us(us).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
