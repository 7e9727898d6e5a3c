//! The wall clock that producer id expiry reads (`--producer-id-expiry-ms`):
//! when each producer id last wrote, when an id or an epoch was issued, and
//! the cut-off of each expiry sweep.
//!
//! Debug builds only, for broker/tests/producer_expiry.rs: with
//! `ES_TEST_CLOCK` set, the controller reads milliseconds to add to the
//! system clock from `<data-dir>/test-clock-offset-ms` at each cleanup tick
//! (before its expiry sweep), so a test moves the broker a day ahead
//! without waiting a day. Release builds read the system clock alone.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds added to the system clock (debug-build test hook; 0 otherwise).
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Milliseconds since the Unix epoch, as producer id expiry sees them.
pub fn now_ms() -> i64 {
    let system = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    system.saturating_add(OFFSET_MS.load(Ordering::Relaxed))
}

/// The test hook's file, in the data directory.
#[cfg(debug_assertions)]
const TEST_OFFSET_FILE: &str = "test-clock-offset-ms";

/// Debug builds: re-reads the test offset when `ES_TEST_CLOCK` is set (a
/// file that is missing or not a number leaves the clock as it is), and
/// says at info level when it changed, once it is in effect.
#[cfg(debug_assertions)]
pub async fn refresh_test_offset(data_dir: &Path) {
    if std::env::var_os("ES_TEST_CLOCK").is_none() {
        return;
    }
    let path = data_dir.join(TEST_OFFSET_FILE);
    if let Ok(Some(bytes)) = crate::topics::fsops::read_small(&path).await {
        if let Some(ms) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
        {
            if OFFSET_MS.swap(ms, Ordering::Relaxed) != ms {
                tracing::info!(offset_ms = ms, "ES_TEST_CLOCK: the clock moved");
            }
        }
    }
}

/// Debug builds: reads the test offset at start-up, before the shards run
/// (partitions opening stamp their producers with the clock).
#[cfg(debug_assertions)]
pub fn init_test_offset(data_dir: &Path) {
    if std::env::var_os("ES_TEST_CLOCK").is_none() {
        return;
    }
    let path = data_dir.join(TEST_OFFSET_FILE);
    let text = std::fs::read_to_string(path); // blocking-ok: start-up, before the shards run
    if let Some(ms) = text.ok().and_then(|s| s.trim().parse::<i64>().ok()) {
        OFFSET_MS.store(ms, Ordering::Relaxed);
        tracing::info!(offset_ms = ms, "ES_TEST_CLOCK: the clock starts moved");
    }
}

/// Release builds have no test hook.
#[cfg(not(debug_assertions))]
pub async fn refresh_test_offset(_data_dir: &Path) {}

/// Release builds have no test hook.
#[cfg(not(debug_assertions))]
pub fn init_test_offset(_data_dir: &Path) {}
