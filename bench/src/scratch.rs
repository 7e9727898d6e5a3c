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

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
