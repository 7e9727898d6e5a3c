//! Asking the kernel's scheduler for a short time slice for the calling
//! thread: for threads that sleep most of the time and, when woken, must
//! run at once for a few microseconds (a disk thread given a write).
//!
//! Linux's fair scheduler (EEVDF, 6.6+) lets a task that is running keep
//! its CPU until its slice ends (the default scales with the CPU count:
//! 1.4 ms on two) before a task it woke gets the CPU, unless the woken task asked
//! for a shorter slice (6.12+: `sched_setattr` with `sched_runtime` on a
//! SCHED_OTHER thread; no privilege needed, clamped by the kernel to
//! 0.1-100 ms). A shard that spins before it parks
//! (`--spin-before-park-us`) is such a running task: on the two-core
//! machine of docs/benchmarks.md a disk thread woken for a write waited
//! over 0.5 ms for one in 1.1-2.5% of jobs, 0.03-0.2% with a 100 us slice
//! (docs/storage.md, "Disk threads").
//! Kernels before 6.12 accept the call and keep their default.

use std::io;

/// The shortest slice Linux grants (it clamps shorter requests up).
pub const THREAD_SLICE_US_MIN: u64 = 100;
/// The longest slice Linux grants.
pub const THREAD_SLICE_US_MAX: u64 = 100_000;

/// Asks for a slice of `us` microseconds for the calling thread, keeping
/// its nice value. An error says the kernel refused (the thread keeps the
/// default slice).
pub fn ask_thread_slice_us(us: u64) -> io::Result<()> {
    if !(THREAD_SLICE_US_MIN..=THREAD_SLICE_US_MAX).contains(&us) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a thread slice is {THREAD_SLICE_US_MIN}-{THREAD_SLICE_US_MAX} us, not {us}"),
        ));
    }
    // SAFETY: no pointers; `who` 0 is the calling thread on Linux.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // SAFETY: `sched_attr` is plain data; all zeros is a valid value.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    attr.size = std::mem::size_of::<libc::sched_attr>() as u32;
    attr.sched_policy = libc::SCHED_OTHER as u32;
    attr.sched_nice = nice;
    attr.sched_runtime = us * 1000;
    // SAFETY: `attr` is a valid, initialized `sched_attr` of `attr.size`
    // bytes, alive for the call; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's slice, in ns, as `sched_getattr` reports it
    /// (0 on kernels that do not report one).
    fn slice_ns() -> u64 {
        // SAFETY: as in `ask_thread_slice_us`; the kernel fills `attr`.
        let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::sched_attr>() as u32;
        // SAFETY: `attr` is `size` writable bytes.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                0,
                &mut attr as *mut libc::sched_attr,
                size,
                0,
            )
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        attr.sched_runtime
    }

    #[test]
    fn a_thread_gets_the_slice_it_asks_for_and_keeps_its_nice_value() {
        std::thread::spawn(|| {
            // SAFETY: no pointers.
            assert_eq!(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 3) }, 0);
            let before = slice_ns();
            ask_thread_slice_us(250).unwrap();
            // SAFETY: no pointers.
            assert_eq!(
                unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) },
                3,
                "nice kept"
            );
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
    fn a_slice_outside_what_linux_grants_is_refused() {
        for us in [0, 99, 100_001] {
            let e = ask_thread_slice_us(us).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
