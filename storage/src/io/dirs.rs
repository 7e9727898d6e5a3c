//! Directory operations that io_uring lacks (listing, recursive create),
//! run on glommio's blocking pool so a shard never blocks on them.

use std::path::{Path, PathBuf};

use crate::{Offset, Result, StorageError};

/// Creates `dir` and its missing parents, durably: the parent of every
/// directory created is fsynced once it holds the new entry, so a power
/// loss cannot take the directory away with the files later made durable in
/// it. Runs on glommio's blocking pool.
pub async fn create_dir_all(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || create_dir_all_durable(&d).map(drop)) // blocking-ok: on the blocking pool
        .await
        .map_err(|e| StorageError::io(dir, e))
}

/// [`create_dir_all`] with std I/O, for the main thread before the shards
/// run and for offline tools: returns the directories it created, from the
/// outermost in.
pub fn create_dir_all_durable(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    create_dir_all_with(dir, &mut fsync_dir_std)
}

/// fsyncs a directory with std I/O (blocking).
fn fsync_dir_std(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all() // blocking-ok: callers run off the shards
}

/// Creates the missing directories of `dir`, outermost first, calling `sync`
/// on the parent of each right after creating it (the seam the tests
/// watch). A directory that another thread created first gets its parent
/// synced too: that thread may not have synced it yet.
fn create_dir_all_with(
    dir: &Path,
    sync: &mut dyn FnMut(&Path) -> std::io::Result<()>,
) -> std::io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut at = dir;
    loop {
        let found = std::fs::metadata(at); // blocking-ok: callers run off the shards
        match found {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", at.display()),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(at),
            Err(e) => return Err(e),
        }
        match at.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => at = parent,
            // The filesystem root, or the working directory of a relative path.
            _ => break,
        }
    }
    let mut created = Vec::new();
    for d in missing.into_iter().rev() {
        let made = std::fs::create_dir(d); // blocking-ok: callers run off the shards
        match made {
            Ok(()) => created.push(d.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(e),
        }
        sync(parent_or_cwd(d))?;
    }
    Ok(created)
}

/// The parent of `d`; `.` for a relative path of one component.
fn parent_or_cwd(d: &Path) -> &Path {
    match d.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// fsyncs a directory, so that files created, renamed or removed in it stay so.
pub async fn sync_dir(dir: &Path) -> Result<()> {
    let d = glommio::io::Directory::open(dir)
        .await
        .map_err(|e| StorageError::io(dir, e))?;
    d.sync().await.map_err(|e| StorageError::sync(dir, e))?;
    d.close().await.map_err(|e| StorageError::io(dir, e))
}

/// The names of the entries of `dir`, unsorted. A missing directory is
/// an error (`NotFound`).
pub async fn list_names(dir: &Path) -> Result<Vec<String>> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || -> std::io::Result<Vec<String>> {
            let mut out = Vec::new();
            let entries = std::fs::read_dir(&d)?; // blocking-ok: on the blocking pool
            for entry in entries {
                out.push(entry?.file_name().to_string_lossy().into_owned());
            }
            Ok(out)
        })
        .await
        .map_err(|e| StorageError::io(dir, e))
}

/// The segment base offsets found in a partition directory (from
/// `<base:020>.log` names), ascending. Other files are ignored.
pub async fn list_segments(dir: &Path) -> Result<Vec<Offset>> {
    let names = list_names(dir).await?;
    let mut bases: Vec<Offset> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort();
    Ok(bases)
}

/// `<base:020>.log` -> base, and `<base:020>.index` -> base: the naming
/// rule is es-format's, shared with the offline tools.
pub use es_format::names::{parse_index_name, parse_log_name};

/// Whether `path` names a directory entry (of any kind).
pub async fn exists(path: &Path) -> Result<bool> {
    let p = path.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            let found = std::fs::symlink_metadata(&p); // blocking-ok: on the blocking pool
            match found {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| StorageError::io(path, e))
}

/// Removes the empty directory `dir`.
pub async fn remove_empty_dir(dir: &Path) -> Result<()> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || std::fs::remove_dir(&d)) // blocking-ok: on the blocking pool
        .await
        .map_err(|e| StorageError::io(dir, e))
}

/// Removes a file; `Ok(false)` if it was not there. The caller syncs the
/// directory.
pub async fn remove_if_exists(path: &Path) -> Result<bool> {
    match glommio::io::remove(path).await.map_err(std::io::Error::from) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StorageError::io(path, e)),
    }
}

/// Renames a file; `Ok(false)` if the source was not there. The caller
/// syncs the directory.
pub async fn rename_if_exists(from: &Path, to: &Path) -> Result<bool> {
    match glommio::io::rename(from, to).await.map_err(std::io::Error::from) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StorageError::io(from, e)),
    }
}

/// Path of a segment's log file.
pub fn log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(es_format::names::log_name(base))
}

/// Path of a segment's index file.
pub fn index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(es_format::names::index_name(base))
}

/// Suffix of a compaction output not yet swapped in (`<base>.log.cleaned`,
/// `<base>.index.cleaned`).
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// Path of a compaction output's log before the swap.
pub fn cleaned_log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.log{CLEANED_SUFFIX}", base.0))
}

/// Path of a compaction output's index before the swap.
pub fn cleaned_index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.index{CLEANED_SUFFIX}", base.0))
}

/// Suffix of a segment log that has left the log and is being freed
/// (`<base>.log.deleting`, reclaim.rs).
pub const DELETING_SUFFIX: &str = ".deleting";

/// Path a deleted segment's log is renamed to before it is freed.
pub fn deleting_log_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}.log{DELETING_SUFFIX}", base.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every directory `create_dir_all` makes has its parent fsynced after
    /// it appears there; an existing directory costs no fsync.
    #[test]
    fn each_created_directory_has_its_parent_fsynced() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let leaf = root.join("data").join("topics").join("t").join("0");
        let mut synced: Vec<PathBuf> = Vec::new();
        let created = create_dir_all_with(&leaf, &mut |p: &Path| {
            fsync_dir_std(p)?;
            synced.push(p.to_path_buf());
            Ok(())
        })
        .unwrap();
        let want: Vec<PathBuf> = ["data", "data/topics", "data/topics/t", "data/topics/t/0"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        assert_eq!(created, want, "every missing directory, outermost first");
        let parents: Vec<PathBuf> = want.iter().map(|d| d.parent().unwrap().to_path_buf()).collect();
        assert_eq!(synced, parents, "the parent of each created directory is fsynced");
        assert!(leaf.is_dir());

        synced.clear();
        let again = create_dir_all_with(&leaf, &mut |p: &Path| {
            synced.push(p.to_path_buf());
            Ok(())
        })
        .unwrap();
        assert!(
            again.is_empty() && synced.is_empty(),
            "nothing created, nothing synced"
        );

        // One more level under an existing directory: only its parent.
        let deeper = leaf.join("x");
        let mut synced = Vec::new();
        create_dir_all_with(&deeper, &mut |p: &Path| {
            synced.push(p.to_path_buf());
            Ok(())
        })
        .unwrap();
        assert_eq!(synced, vec![leaf.clone()]);

        // A file in the way is an error, not a silent success.
        std::fs::write(root.join("f"), b"").unwrap(); // blocking-ok: a test
        assert!(create_dir_all_durable(&root.join("f").join("g")).is_err());
    }

    /// A failing fsync of a parent fails the create (it is not ignored).
    #[test]
    fn a_failed_parent_fsync_fails_the_create() {
        let tmp = tempfile::tempdir().unwrap();
        let got = create_dir_all_with(&tmp.path().join("a"), &mut |_: &Path| {
            Err(std::io::Error::other("injected"))
        });
        assert!(got.is_err());
    }

    /// A relative directory of one component has `.` synced.
    #[test]
    fn relative_parent_is_the_working_directory() {
        assert_eq!(parent_or_cwd(Path::new("data")), Path::new("."));
        assert_eq!(parent_or_cwd(Path::new("/data")), Path::new("/"));
    }

    #[test]
    fn names() {
        assert_eq!(parse_log_name("00000000000000000042.log"), Some(Offset(42)));
        assert_eq!(parse_log_name("42.log"), None);
        assert_eq!(parse_log_name("0000000000000000004x.log"), None);
        assert_eq!(parse_log_name("00000000000000000042.index"), None);
        assert_eq!(
            log_path(Path::new("/d"), Offset(7)),
            Path::new("/d/00000000000000000007.log")
        );
    }
}
