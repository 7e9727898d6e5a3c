//! Unit tests only: runs a future on a fresh glommio executor, as a shard
//! would, with a timer ticking beside it as every shard has (under heavy
//! load a bare test executor has been seen asleep in io_uring with its
//! work done; a tick bounds that, as storage/tests/common does).

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// Runs `fut` to its end on a new executor on this thread.
pub fn run<T>(fut: impl Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor (needs io_uring and >= 512 KiB memlock)")
        .run(async move {
            let running = Rc::new(Cell::new(true));
            let ticking = running.clone();
            glommio::spawn_local(async move {
                while ticking.get() {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
            })
            .detach();
            let out = fut.await;
            running.set(false);
            out
        })
}
