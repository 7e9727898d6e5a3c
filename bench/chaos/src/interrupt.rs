//! Ctrl-C and SIGTERM: the run stops at once, its faults healed,
//! and a broker es-chaos started is stopped (and its loop mount unmounted) before it exits.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}
