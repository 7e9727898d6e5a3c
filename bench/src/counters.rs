//! Running totals of a phase, shared by its threads and read by the
//! progress line.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Counters {
    records: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
}

/// Counters at one moment.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub records: u64,
    pub bytes: u64,
    pub requests: u64,
}

impl Counters {
    /// One request done, carrying `records` records of `bytes` value bytes.
    pub fn add(&self, records: u64, bytes: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn totals(&self) -> Totals {
        Totals {
            records: self.records.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }
}
