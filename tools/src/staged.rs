//! A directory filled under a staging name, `<target>.restoring-<pid>`,
//! and renamed into place once complete (every file and directory
//! fsynced first, the parent after): a crash leaves the target absent or
//! complete. The staging dirs of runs that died are removed by the next.

use std::path::{Path, PathBuf};

use crate::datadir;
use crate::durable;
use crate::fail::Fail;

pub struct Staged {
    pub target: PathBuf,
    pub staging: PathBuf,
    parent: PathBuf,
}

impl Staged {
    /// `target` must not exist, or be empty.
    pub fn begin(target: &Path) -> Result<Staged, Fail> {
        if !datadir::names(target)?.is_empty() {
            return Err(Fail(format!(
                "{} exists and is not empty: restore into a new or empty dir",
                target.display()
            )));
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| Fail(format!("{}: not a directory name", target.display())))?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| Fail::io(&parent, e))?;
        remove_dead(&parent, &name)?;
        let staging = parent.join(format!("{name}.restoring-{}", std::process::id()));
        std::fs::create_dir(&staging).map_err(|e| Fail::io(&staging, e))?;
        Ok(Staged {
            target: target.to_path_buf(),
            staging,
            parent,
        })
    }

    /// fsyncs the staging tree, renames it to the target (an empty target
    /// dir is replaced), fsyncs the parent.
    pub fn commit(&self) -> Result<(), Fail> {
        durable::sync_tree(&self.staging)?;
        std::fs::rename(&self.staging, &self.target).map_err(|e| {
            Fail(format!(
                "renaming {} to {}: {e}",
                self.staging.display(),
                self.target.display()
            ))
        })?;
        durable::sync_dir(&self.parent)
    }

    /// Removes the staging dir (nothing was restored).
    pub fn abandon(&self) {
        let _ = std::fs::remove_dir_all(&self.staging);
    }
}

/// Removes `<name>.restoring-<pid>` dirs in `parent` whose process is gone.
fn remove_dead(parent: &Path, name: &str) -> Result<(), Fail> {
    remove_dead_runs(parent, &format!("{name}.restoring-"))
}

/// Removes `<prefix><pid>` dirs in `parent` whose process is gone.
pub fn remove_dead_runs(parent: &Path, prefix: &str) -> Result<(), Fail> {
    for n in datadir::names(parent)? {
        let Some(pid) = n.strip_prefix(prefix).and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: kill(2) with signal 0 sends nothing; it only asks whether the pid exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let dir = parent.join(&n);
            std::fs::remove_dir_all(&dir).map_err(|e| Fail::io(&dir, e))?;
        }
    }
    Ok(())
}
