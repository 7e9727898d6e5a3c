//! Which failed writes leave a partition able to go on.
//!
//! A write that found no room (ENOSPC, EDQUOT) wrote nothing that counts,
//! and a write that could not get a file descriptor (EMFILE, ENFILE: to
//! create the next segment, open a writer or fsync the directory) wrote
//! nothing at all: the bytes before it are as they were, so the partition
//! refuses that write, cuts its log back to the last complete write and
//! takes the next one (`PartitionLog`'s rewind, which needs no new
//! descriptor). Every other failure poisons it: an EIO may have left
//! anything on the device, a failed fsync may have dropped dirty pages
//! (fsyncgate), and a file size limit will not pass.

use std::io;

use crate::StorageError;

/// What a failed write of the log was, for the decision and for the
/// `kind` label of `es_log_write_errors_total`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum WriteFailure {
    /// The filesystem is full (ENOSPC).
    NoSpace,
    /// A disk quota is reached (EDQUOT).
    Quota,
    /// The process or the system has no file descriptor left (EMFILE,
    /// ENFILE).
    Descriptors,
    /// An fsync failed.
    Fsync,
    /// Any other I/O error, or anything else.
    Io,
}

impl WriteFailure {
    /// Every kind, as the metric's label values.
    pub const LABELS: [&'static str; 5] = ["no_space", "quota", "descriptors", "fsync", "io"];

    pub fn of(e: &StorageError) -> WriteFailure {
        match e {
            StorageError::Io { source, .. } => WriteFailure::of_io(source),
            StorageError::Sync { .. } => WriteFailure::Fsync,
            _ => WriteFailure::Io,
        }
    }

    /// By errno where there is one, else by kind: an error glommio wrapped
    /// keeps its kind (storage keeps the errno too, `error.rs`), and
    /// running out of descriptors has no kind of its own.
    pub fn of_io(e: &io::Error) -> WriteFailure {
        if out_of_descriptors(e) {
            return WriteFailure::Descriptors;
        }
        match e.kind() {
            io::ErrorKind::StorageFull => WriteFailure::NoSpace,
            io::ErrorKind::QuotaExceeded => WriteFailure::Quota,
            _ => WriteFailure::Io,
        }
    }

    /// Whether the partition must stop taking writes until a restart.
    pub fn poisons(self) -> bool {
        matches!(self, WriteFailure::Fsync | WriteFailure::Io)
    }

    pub fn label(self) -> &'static str {
        match self {
            WriteFailure::NoSpace => "no_space",
            WriteFailure::Quota => "quota",
            WriteFailure::Descriptors => "descriptors",
            WriteFailure::Fsync => "fsync",
            WriteFailure::Io => "io",
        }
    }

    /// Counts it in `es_log_write_errors_total`.
    pub fn count(self) {
        metrics::counter!("es_log_write_errors_total", "kind" => self.label()).increment(1);
    }
}

/// Whether `e`, from a write (never an fsync), says only that the write
/// found no room: the disk is full or a quota is reached. For callers
/// outside the log (the broker's small files) that answer such a failure
/// as retriable.
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(
        WriteFailure::of_io(e),
        WriteFailure::NoSpace | WriteFailure::Quota
    )
}

/// Whether `e` says the process (`EMFILE`, `RLIMIT_NOFILE`) or the system
/// (`ENFILE`) has no file descriptor left.
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// [`out_of_descriptors`] of a storage error.
pub fn storage_out_of_descriptors(e: &StorageError) -> bool {
    matches!(e, StorageError::Io { source, .. } if out_of_descriptors(source))
}

/// A glommio error as the `io::Error` it carries, its OS error code kept
/// (glommio's own conversion keeps only the kind, which `EMFILE` lacks).
pub fn os_error<T>(e: glommio::GlommioError<T>) -> io::Error {
    match e {
        glommio::GlommioError::EnhancedIoError { source, .. } => source,
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: io::ErrorKind) -> StorageError {
        StorageError::Io {
            path: "p".into(),
            source: io::Error::from(kind),
        }
    }

    #[test]
    fn no_room_is_refused_everything_else_poisons() {
        let os = |errno| StorageError::Io {
            path: "p".into(),
            source: io::Error::from_raw_os_error(errno),
        };
        assert_eq!(WriteFailure::of(&os(libc::ENOSPC)), WriteFailure::NoSpace);
        assert_eq!(WriteFailure::of(&os(libc::EDQUOT)), WriteFailure::Quota);
        // glommio's wrapped errors keep the kind only.
        assert_eq!(
            WriteFailure::of(&io(io::ErrorKind::StorageFull)),
            WriteFailure::NoSpace
        );
        assert!(!WriteFailure::of(&os(libc::ENOSPC)).poisons());
        assert!(!WriteFailure::of(&os(libc::EDQUOT)).poisons());
        for errno in [libc::EMFILE, libc::ENFILE] {
            assert_eq!(WriteFailure::of(&os(errno)), WriteFailure::Descriptors);
            assert!(!WriteFailure::of(&os(errno)).poisons());
            assert!(!is_no_space(&io::Error::from_raw_os_error(errno)));
        }
        // A glommio error keeps its errno through `StorageError::io`.
        let enhanced = glommio::GlommioError::<()>::EnhancedIoError {
            source: io::Error::from_raw_os_error(libc::EMFILE),
            op: "Creating",
            path: None,
            fd: None,
        };
        let e = StorageError::io("/x", enhanced);
        assert!(storage_out_of_descriptors(&e));
        assert_eq!(WriteFailure::of(&e), WriteFailure::Descriptors);
        assert!(!storage_out_of_descriptors(&os(libc::EIO)));
        for errno in [libc::EIO, libc::EFBIG, libc::EROFS, libc::EBADF] {
            assert!(WriteFailure::of(&os(errno)).poisons(), "errno {errno}");
        }
        assert!(WriteFailure::of(&io(io::ErrorKind::WriteZero)).poisons());
        // A failed fsync poisons even when it says the disk is full.
        let sync = StorageError::Sync {
            path: "p".into(),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert_eq!(WriteFailure::of(&sync), WriteFailure::Fsync);
        assert!(WriteFailure::of(&sync).poisons());
        assert!(is_no_space(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(!is_no_space(&io::Error::from_raw_os_error(libc::EIO)));
        let labels: Vec<&str> = [
            WriteFailure::NoSpace,
            WriteFailure::Quota,
            WriteFailure::Descriptors,
            WriteFailure::Fsync,
            WriteFailure::Io,
        ]
        .iter()
        .map(|k| k.label())
        .collect();
        assert_eq!(labels, WriteFailure::LABELS);
    }
}
