//! The run's temporary directory (broker data, disk-test files), removed
//! when the run ends.

use std::path::{Path, PathBuf};

pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// A new directory under `base` (default: the system temp directory).
    pub fn create(base: Option<&Path>) -> Result<Scratch, String> {
        let base = base.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let path = base.join(format!(
            "es-bench-{}-{}",
            std::process::id(),
            crate::payload::unix_nanos()
        ));
        std::fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(Scratch { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Waits for the filesystem under `dir` to finish with files just removed:
/// their blocks are freed (and, mounted with `discard`, discarded) when
/// the journal next commits, which would otherwise land on whatever phase
/// or round runs next; `syncfs(2)` commits it now. Best effort.
pub fn settle_filesystem(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        // SAFETY: `d` is an open descriptor for the call's duration.
        unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d)) };
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Some(parent) = self.path.parent() {
            // The next run on this disk starts on a settled filesystem.
            settle_filesystem(parent);
        }
    }
}
