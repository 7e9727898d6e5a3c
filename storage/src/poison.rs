//! Which failures poison a partition, and which pass.
//!
//! A failed write or fsync poisons (fsyncgate: the kernel may have dropped
//! the dirty pages, so nothing short of recovery can say what the file
//! holds). A failure to get a file descriptor does not: the call that
//! needed one (opening a segment, creating the next one, fsyncing a
//! directory) did nothing, so the operation fails, the bytes placed after
//! the written end are given back (`rewind.rs`), and the partition takes
//! writes again as soon as a descriptor is free.

use std::io;

use crate::StorageError;

/// Whether `e` must poison the partition that met it. `false` only for
/// errors that leave every file as it was.
pub(crate) fn poisons(e: &StorageError) -> bool {
    match e {
        StorageError::Io { source, .. } => !out_of_descriptors(source),
        _ => true,
    }
}

/// Whether `e` says the process (`EMFILE`, `RLIMIT_NOFILE`) or the system
/// (`ENFILE`) has no file descriptor left.
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// A glommio error as the `io::Error` it carries, its OS error code kept
/// (glommio's own conversion keeps only the kind, which `EMFILE` lacks).
pub fn os_error<T>(e: glommio::GlommioError<T>) -> io::Error {
    match e {
        glommio::GlommioError::EnhancedIoError { source, .. } => source,
        other => other.into(),
    }
}

/// [`out_of_descriptors`] of a storage error.
pub fn storage_out_of_descriptors(e: &StorageError) -> bool {
    matches!(e, StorageError::Io { source, .. } if out_of_descriptors(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_descriptor_passes() {
        let io = |errno| StorageError::io("/x", io::Error::from_raw_os_error(errno));
        assert!(!poisons(&io(libc::EMFILE)));
        assert!(!poisons(&io(libc::ENFILE)));
        assert!(poisons(&io(libc::EIO)));
        assert!(poisons(&io(libc::ENOSPC)));
        assert!(poisons(&StorageError::Invalid("x".into())));
        assert!(storage_out_of_descriptors(&io(libc::EMFILE)));
        assert!(!storage_out_of_descriptors(&io(libc::EIO)));
        let enhanced = glommio::GlommioError::<()>::EnhancedIoError {
            source: io::Error::from_raw_os_error(libc::EMFILE),
            op: "Creating",
            path: None,
            fd: None,
        };
        assert!(out_of_descriptors(&os_error(enhanced)));
        assert!(!poisons(&StorageError::io(
            "/x",
            glommio::GlommioError::<()>::EnhancedIoError {
                source: io::Error::from_raw_os_error(libc::EMFILE),
                op: "Creating",
                path: None,
                fd: None,
            }
        )));
    }
}
