//! The broker-wide count of consumer groups against `--groups-max`: a
//! group is reserved before its first commit is written, released when it
//! is deleted or expires. Shared by the shards; atomics only.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{ApiError, ErrorCode};

/// The broker-wide count of groups against `--groups-max`, shared by the
/// shards (atomics only).
#[derive(Debug)]
pub struct GroupCount {
    live: AtomicUsize,
    max: usize,
}

impl GroupCount {
    pub fn new(live: usize, max: usize) -> GroupCount {
        GroupCount {
            live: AtomicUsize::new(live),
            max,
        }
    }

    /// Room for one more group, or `too_many_groups`.
    pub fn reserve(&self, group: &str) -> Result<(), ApiError> {
        let mut live = self.live.load(Ordering::Acquire);
        loop {
            if live >= self.max {
                return Err(too_many_groups(group, self.max));
            }
            match self
                .live
                .compare_exchange_weak(live, live + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(()),
                Err(now) => live = now,
            }
        }
    }

    /// One group more, past the limit if need be (a commit whose group was
    /// forgotten between its check and its fsync is applied all the same).
    pub fn add(&self) {
        self.live.fetch_add(1, Ordering::AcqRel);
    }

    /// A group (or a reservation) gone.
    pub fn release(&self) {
        let before = self.live.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "more groups released than counted");
    }
}

pub fn too_many_groups(group: &str, max: usize) -> ApiError {
    ApiError::new(
        ErrorCode::TooManyGroups,
        format!(
            "group {group:?} would be one more than the broker's {max} groups (--groups-max): \
             delete groups that are no longer used, or raise the limit"
        ),
    )
}
