//! The broker's memory allocator: mimalloc, per-thread heaps.
//!
//! Each shard allocates and frees small buffers for every request (a frame,
//! a batch, a reply, a task). With glibc's malloc, whose bins consolidate
//! on every allocation just above 1 KiB (the size of a one-record batch),
//! these cost far more of the broker's CPU than with mimalloc
//! (docs/design/allocator.md). Large fetch and produce buffers are reused
//! from its heaps as well, so they are not faulted in anew each time.
//!
//! mimalloc gives freed memory back to the system lazily: only when the
//! thread that freed it next allocates past what its heap holds. A shard
//! that goes quiet after a burst (large bodies that closed, answers that
//! were written) would keep the burst's resident memory for ever; each
//! shard therefore collects its heap every `PURGE_INTERVAL_MS`
//! ([`purge_loop`]), which returns what has been free for mimalloc's purge
//! delay.

use std::rc::Rc;
use std::time::Duration;

use crate::limits::PURGE_INTERVAL_MS;
use crate::shard::Shard;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's `mi_collect`: frees what this thread's heap no longer
    /// uses and purges freed memory whose purge delay has passed (with
    /// `force`, all of it at once).
    fn mi_collect(force: bool);
}

/// Collects this shard's heap every `PURGE_INTERVAL_MS` until shutdown.
pub async fn purge_loop(shard: Rc<Shard>) {
    while !shard.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(PURGE_INTERVAL_MS)).await;
        // SAFETY: mimalloc's collect of the calling thread's own heap; it
        // touches nothing Rust holds (freed memory only) and never blocks.
        unsafe { mi_collect(false) };
    }
}
