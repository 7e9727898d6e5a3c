//! One broker per data directory: an exclusive `flock` on
//! `<data-dir>/.lock`, held for the life of the process (the kernel drops it
//! when the process dies, even by kill -9). Taken at start-up, before any
//! shard runs.

use std::fs::File; // blocking-ok: used only at start-up, before the shards run
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Holds the lock while alive.
pub struct DataDirLock {
    _file: File,
}

pub fn lock(data_dir: &Path) -> Result<DataDirLock, String> {
    // Durably: the parent of each directory created is fsynced.
    es_storage::create_dir_all_durable(data_dir) // blocking-ok: start-up, before the shards run
        .map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
    let path = data_dir.join(".lock");
    let file = std::fs::OpenOptions::new() // blocking-ok: start-up, before the shards run
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a file descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(format!(
            "{} is in use by another es-broker (could not lock {}); stop it or use another --data-dir",
            data_dir.display(),
            path.display()
        ));
    }
    Ok(DataDirLock { _file: file })
}
