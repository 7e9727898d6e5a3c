//! Operating errors of the storage engine. Programmer errors are asserts.

use std::io;
use std::path::PathBuf;

/// Everything the storage engine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O call failed. The partition that saw it may be poisoned
    /// (`write_failure.rs` says when).
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An fsync (of a file or a directory) failed: what it covered may be
    /// lost, whatever the error says, so the partition that saw it is
    /// poisoned (fsyncgate: the kernel may have dropped the dirty pages).
    #[error("fsync failed on {path}: {source}")]
    Sync {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A write found no room (the disk is full, a quota is reached) or no
    /// file descriptor: the batches it carried, and those queued behind
    /// them, were not kept and the log went back to its last complete
    /// write. The partition takes writes again at once; a retry succeeds
    /// once there is room (or a descriptor).
    #[error("partition {path} did not write the batch, nothing of it was kept: {reason}; retry")]
    Refused { path: PathBuf, reason: String },
    /// An earlier write or fsync failed; the partition refuses writes until
    /// the broker restarts and recovery has run.
    #[error("partition {path} refuses writes after an earlier failure: {reason}")]
    Poisoned { path: PathBuf, reason: String },
    /// What the caller waited for was cut off the log: a replicated log's
    /// uncommitted suffix was truncated (a new leader's log replaces it),
    /// its mark taken back to `at`. Read again from there.
    #[error("partition {path} was truncated at {at}: what was waited for is gone")]
    Truncated { path: PathBuf, at: u64 },
    /// The partition was closed (shutdown in progress).
    #[error("partition {path} is closed")]
    Closed { path: PathBuf },
    /// A read started below the first offset still stored (retention or
    /// tiering removed it, possibly while the read ran).
    #[error("offset {offset} is below the log start offset {log_start}")]
    OffsetOutOfRange { offset: u64, log_start: u64 },
    /// A test's fault-injection point was reached (see `FaultPoint`).
    #[error("fault injected at {0:?} (simulated crash)")]
    FaultInjected(crate::FaultPoint),
    /// A caller asked for something the log cannot do.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Bytes on disk fail their checksum or framing where they must be valid.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// Opening a partition found damage that only dropping acknowledged
    /// data would get past (corruption with intact batches after it, or in
    /// a sealed segment; a missing segment), and recovery was not allowed
    /// to drop data (`set_accept_data_loss`). Nothing was changed on disk.
    #[error(
        "refusing to open {path}: {what}; nothing was changed (allowing data loss, es-broker --accept-data-loss, copies the damage aside, cuts it off and goes on)"
    )]
    DataLoss { path: PathBuf, what: String },
}

impl StorageError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: impl IntoIoError) -> Self {
        StorageError::Io {
            path: path.into(),
            source: source.into_io_error(),
        }
    }

    /// Whether this failed for want of room (a write, or a create, found
    /// the disk full or a quota reached): retriable once space is freed.
    pub fn is_no_space(&self) -> bool {
        match self {
            StorageError::Io { source, .. } => crate::is_no_space(source),
            StorageError::Refused { .. } => true,
            _ => false,
        }
    }

    pub(crate) fn sync(path: impl Into<PathBuf>, source: impl IntoIoError) -> Self {
        StorageError::Sync {
            path: path.into(),
            source: source.into_io_error(),
        }
    }
}

/// What an I/O call failed with, as an `io::Error` that keeps its OS error
/// code (which `write_failure.rs` tells failures apart by).
pub(crate) trait IntoIoError {
    fn into_io_error(self) -> io::Error;
}

impl IntoIoError for io::Error {
    fn into_io_error(self) -> io::Error {
        self
    }
}

impl<T> IntoIoError for glommio::GlommioError<T> {
    fn into_io_error(self) -> io::Error {
        crate::log::write_failure::os_error(self)
    }
}

/// Result alias of the storage crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
