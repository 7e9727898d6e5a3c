//! Operating errors of the storage engine. Programmer errors are asserts.

use std::io;
use std::path::PathBuf;

/// Everything the storage engine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O call failed. The partition that saw it may be poisoned.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An earlier write or fsync failed; the partition refuses writes until
    /// the broker restarts and recovery has run.
    #[error("partition {path} refuses writes after an earlier failure: {reason}")]
    Poisoned { path: PathBuf, reason: String },
    /// A write could not be made for a reason that passes (no file
    /// descriptor free): nothing of it was kept, and the partition takes
    /// writes again; a retry may succeed.
    #[error("partition {path} did not write this batch: {reason}; nothing of it was kept, retry")]
    Transient { path: PathBuf, reason: String },
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
}

/// What an I/O call failed with, as an `io::Error` that keeps its OS error
/// code (which `poison.rs` tells failures apart by).
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
        crate::poison::os_error(self)
    }
}

/// Result alias of the storage crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
