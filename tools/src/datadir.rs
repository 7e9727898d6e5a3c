//! A data dir as the broker lays it out (DESIGN.md, docs/storage.md): the
//! lock, topics and their partitions, segments, the cold tier.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use es_format::names::parse_log_name;
use es_format::Offset;

use crate::fail::Fail;

/// Holds the data dir's lock while alive.
pub struct DirLock {
    _file: File,
}

/// Takes the broker's own lock on `<dir>/.lock` (`flock(LOCK_EX |
/// LOCK_NB)`, broker/src/shard/lock.rs): a running broker holds it, and
/// holding it keeps a broker from starting meanwhile. The file is opened
/// for reading only (created, empty, if the dir has none).
pub fn lock(dir: &Path) -> Result<DirLock, Fail> {
    if !dir.is_dir() {
        return Err(Fail(format!("{} is not a directory", dir.display())));
    }
    let path = dir.join(".lock");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Fail::io(&path, e))?,
        Err(e) => return Err(Fail::io(&path, e)),
    };
    // SAFETY: flock on a file descriptor we own, open for the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(Fail(format!(
            "{} is in use by a running es-broker; stop it (es-tools works on a stopped broker's data dir)",
            dir.display()
        )));
    }
    Ok(DirLock { _file: file })
}

/// The names in `dir`, sorted; none if it does not exist.
pub fn names(dir: &Path) -> Result<Vec<String>, Fail> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Fail::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Fail::io(dir, e))?;
        out.push(entry.file_name().to_string_lossy().into_owned());
    }
    out.sort();
    Ok(out)
}

/// The topics under `<data>/topics`: directories, sorted by name.
pub fn topics(data: &Path) -> Result<Vec<String>, Fail> {
    let root = data.join("topics");
    Ok(names(&root)?
        .into_iter()
        .filter(|n| root.join(n).is_dir())
        .collect())
}

/// The partition directories of a topic dir (decimal names), ascending.
pub fn partitions(topic_dir: &Path) -> Result<Vec<u32>, Fail> {
    let mut out: Vec<u32> = names(topic_dir)?
        .iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty())
        .filter(|n| topic_dir.join(n).is_dir())
        .filter_map(|n| n.parse().ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// The segment bases of a partition dir (`<base:020>.log`), ascending.
pub fn segments(dir: &Path) -> Result<Vec<Offset>, Fail> {
    let mut out: Vec<Offset> = names(dir)?.iter().filter_map(|n| parse_log_name(n)).collect();
    out.sort();
    Ok(out)
}

/// `path` relative to `root` for reports (`topics/orders/2/…log`).
pub fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// The cold tier's root: `--cold-dir`, else `<data>/cold`.
pub fn cold_root(data: &Path, cold: Option<&Path>) -> PathBuf {
    cold.map_or_else(|| data.join("cold"), Path::to_path_buf)
}

/// The name of a pending compaction swap's manifest (docs/storage.md).
pub const COMPACTION_SWAP: &str = "compaction.swap";
