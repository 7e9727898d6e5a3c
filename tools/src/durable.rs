//! Writing files so that they survive a crash: each file fsynced once
//! written, and every directory of a tree fsynced before the tree is
//! renamed into place (then its parent), as the broker writes its own.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::fail::Fail;

/// Writes `bytes` to a new file at `path` (its directories created) and
/// fsyncs it.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), Fail> {
    let mut f = create(path)?;
    f.write_all(bytes).map_err(|e| Fail::io(path, e))?;
    f.sync_all().map_err(|e| Fail::io(path, e))
}

/// Creates a new file at `path`, its directories first.
pub fn create(path: &Path) -> Result<File, Fail> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Fail::io(dir, e))?;
    }
    File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Fail::io(path, e))
}

/// fsyncs `dir`.
pub fn sync_dir(dir: &Path) -> Result<(), Fail> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Fail::io(dir, e))
}

/// fsyncs every directory under `root`, deepest first, then `root`.
pub fn sync_tree(root: &Path) -> Result<(), Fail> {
    for entry in std::fs::read_dir(root).map_err(|e| Fail::io(root, e))? {
        let entry = entry.map_err(|e| Fail::io(root, e))?;
        if entry
            .file_type()
            .map_err(|e| Fail::io(&entry.path(), e))?
            .is_dir()
        {
            sync_tree(&entry.path())?;
        }
    }
    sync_dir(root)
}

/// Replaces the file at `path` with `bytes` atomically: `<path>.tmp`
/// written and fsynced, renamed over `path`, the directory fsynced. A
/// crash leaves the old file or the new one.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), Fail> {
    let dir = path
        .parent()
        .ok_or_else(|| Fail(format!("{}: no parent directory", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| Fail::io(dir, e))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .map_err(|e| Fail::io(&tmp, e));
    if let Err(f) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(f);
    }
    std::fs::rename(&tmp, path).map_err(|e| Fail::io(path, e))?;
    sync_dir(dir)
}
