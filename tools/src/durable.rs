//! Writing files so that they survive a crash: every file and every
//! directory of a tree fsynced before the tree is renamed into place (then
//! its parent), as the broker writes its own. Large files are not fsynced
//! one by one as they are written (each fsync would idle the copy while
//! the disk catches up): their writeback is started at once
//! (`sync_file_range`), and `sync_tree` fsyncs them all before the rename.

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

/// Writes `bytes` to a new file at `path` (its directories created),
/// starting its writeback; `sync_tree` fsyncs it later.
pub fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), Fail> {
    let mut f = create(path)?;
    f.write_all(bytes).map_err(|e| Fail::io(path, e))?;
    start_writeback(&f);
    Ok(())
}

/// Starts writing `f`'s dirty pages back without waiting for them
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): the disk works while the
/// next file is copied. A hint: durability is the later fsync's.
pub fn start_writeback(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: sync_file_range on a descriptor we own and hold open for
    // the call; it reads no memory of ours.
    let _ = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

/// A file written front to back whose writeback is started every
/// [`WRITEBACK_STEP_BYTES`] (`sync_file_range(SYNC_FILE_RANGE_WRITE)` of
/// the range written since): the disk writes while the writer goes on
/// reading, hashing and checking, and the fsync at the end has little
/// left to wait for. Durability is still that fsync's.
pub struct Writeback {
    pub file: File,
    written: u64,
    started: u64,
}

impl Writeback {
    pub fn new(file: File) -> Writeback {
        Writeback {
            file,
            written: 0,
            started: 0,
        }
    }
}

impl Write for Writeback {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.started >= WRITEBACK_STEP_BYTES {
            use std::os::unix::io::AsRawFd;
            let (from, len) = (self.started as i64, (self.written - self.started) as i64);
            // SAFETY: sync_file_range on a descriptor we own and hold open
            // for the call; it reads no memory of ours.
            let _ = unsafe {
                libc::sync_file_range(self.file.as_raw_fd(), from, len, libc::SYNC_FILE_RANGE_WRITE)
            };
            self.started = self.written;
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Bytes between two writeback starts of a [`Writeback`] file: large
/// enough that the disk gets big requests, small enough that it starts
/// early.
const WRITEBACK_STEP_BYTES: u64 = 8 << 20;

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

/// fsyncs every file and directory under `root`, deepest first, then
/// `root`.
pub fn sync_tree(root: &Path) -> Result<(), Fail> {
    for entry in std::fs::read_dir(root).map_err(|e| Fail::io(root, e))? {
        let entry = entry.map_err(|e| Fail::io(root, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Fail::io(&path, e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Fail::io(&path, e))?;
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
