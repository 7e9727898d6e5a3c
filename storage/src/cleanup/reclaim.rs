//! Giving a deleted segment's disk space back a step at a time.
//!
//! Unlinking a large file frees all its blocks in one go, and the
//! filesystem's journal commit that follows (with online discard, the TRIM
//! of every freed extent) holds up every fsync on the disk meanwhile, and
//! with it every produce acknowledgement. So a segment that has already
//! left the log (its `.log` renamed to `.log.deleting` and the directory
//! fsynced) is shrunk from its end `RECLAIM_STEP_BYTES` at a time, with a
//! short pause between steps, and only then unlinked (RocksDB deletes
//! large files in chunks for the same reason). What it was measured to
//! save: docs/design/stepwise-reclaim.md.
//!
//! A crash part-way leaves a `.deleting` file, which the next open removes
//! (`swap::recover`): nothing reads it, it is not a segment.

use std::path::Path;
use std::time::Duration;

use glommio::io::OpenOptions;

use crate::io::dirs;
use crate::io::segment_files::Held;
use crate::limits::{READERS_POLL_MS, RECLAIM_READERS_WAIT_MS, RECLAIM_STEP_BYTES, RECLAIM_STEP_PAUSE_US};
use crate::{Result, StorageError};

/// Frees the file at `path` (a segment's log already renamed out of the
/// log) step by step, then unlinks it. `held` is the segment's read handle,
/// if it had one open: reads in progress keep clones of it, and the file
/// is not shrunk while they do. Once `hurry()` says so (the partition is
/// closing), what is left is unlinked at once: a close or a shutdown does
/// not wait for the steps.
pub(crate) async fn release(path: &Path, held: Option<Held>, hurry: impl Fn() -> bool) -> Result<()> {
    if let Some(handle) = held {
        if !readers_done(&handle, &hurry).await {
            drop(handle);
            dirs::remove_if_exists(path).await?;
            return Ok(());
        }
        // Ours alone now: closed before the file shrinks.
        handle.close().await;
    }
    shrink(path, &hurry).await?;
    dirs::remove_if_exists(path).await?;
    Ok(())
}

/// Frees every file of `dir` (a flat directory nothing reads any more: a
/// deleted partition's) step by step, unlinks them, then removes `dir`.
/// A missing `dir` is fine.
pub async fn free_dir(dir: &Path) -> Result<()> {
    let names = match dirs::list_names(dir).await {
        Ok(names) => names,
        Err(StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    for name in names {
        release(&dir.join(name), None, || false).await?;
    }
    dirs::remove_empty_dir(dir).await
}

/// Waits until `handle` is the only clone left; `false` if readers still
/// hold it after `RECLAIM_READERS_WAIT_MS`, or once `hurry()`.
async fn readers_done(handle: &Held, hurry: &impl Fn() -> bool) -> bool {
    wait_until(|| handle.others() == 0, hurry).await
}

/// Waits until `done()` (reads of a file about to shrink have finished);
/// `false` if it is not after `RECLAIM_READERS_WAIT_MS`, or once `hurry()`.
pub(crate) async fn wait_until(done: impl Fn() -> bool, hurry: &impl Fn() -> bool) -> bool {
    let mut waited = 0;
    while !done() {
        if waited >= RECLAIM_READERS_WAIT_MS || hurry() {
            return false;
        }
        glommio::timer::sleep(Duration::from_millis(READERS_POLL_MS)).await;
        waited += READERS_POLL_MS;
    }
    true
}

/// Truncates the file at `path` from its end down to nothing, a step at a
/// time, or until `hurry()`. A file already gone is fine.
async fn shrink(path: &Path, hurry: &impl Fn() -> bool) -> Result<()> {
    let file = match OpenOptions::new().write(true).buffered_open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e = std::io::Error::from(e);
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(());
            }
            return Err(StorageError::io(path, e));
        }
    };
    let shrunk = async {
        let mut len = file.file_size().await?;
        while len > 0 && !hurry() {
            len = len.saturating_sub(RECLAIM_STEP_BYTES);
            file.truncate(len).await?;
            if len > 0 {
                glommio::timer::sleep(Duration::from_micros(RECLAIM_STEP_PAUSE_US)).await;
            }
        }
        Ok::<(), glommio::GlommioError<()>>(())
    }
    .await;
    let _ = file.close().await;
    shrunk.map_err(|e| StorageError::io(path, std::io::Error::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::io::BufferedFile;
    use std::rc::Rc;

    fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move { f().await })
            .unwrap()
            .join()
            .unwrap();
    }

    async fn write_file(path: &Path, len: usize) {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .buffered_open(path)
            .await
            .unwrap();
        f.write_at(vec![7u8; len], 0).await.unwrap();
        f.close().await.unwrap();
    }

    #[test]
    fn releases_a_file_larger_than_a_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log.deleting");
        let p = path.clone();
        run(move || async move {
            write_file(&p, (RECLAIM_STEP_BYTES as usize) * 3 + 1234).await;
            release(&p, None, || false).await.unwrap();
            // Already gone: still fine.
            release(&p, None, || false).await.unwrap();
        });
        assert!(!path.exists());
    }

    #[test]
    fn a_hurry_unlinks_what_is_left_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("y.log.deleting");
        let p = path.clone();
        run(move || async move {
            write_file(&p, 64 * RECLAIM_STEP_BYTES as usize).await;
            // A reader that never lets go, and a close under way: no
            // waiting for either.
            let handle = Rc::new(BufferedFile::open(&p).await.unwrap());
            let _reader = handle.clone();
            let asked = std::cell::Cell::new(0);
            release(&p, Some(Held::Active(handle)), || {
                asked.set(asked.get() + 1);
                true
            })
            .await
            .unwrap();
            assert_eq!(asked.get(), 1, "asked once, then unlinked whole");
        });
        assert!(!path.exists());
    }

    #[test]
    fn frees_a_whole_directory() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("0");
        std::fs::create_dir(&part).unwrap(); // blocking-ok: test setup, before the executor runs
        let p = part.clone();
        run(move || async move {
            write_file(
                &p.join("00000000000000000000.log"),
                2 * RECLAIM_STEP_BYTES as usize + 5,
            )
            .await;
            write_file(&p.join("00000000000000000000.index"), 100).await;
            free_dir(&p).await.unwrap();
            // Already gone: still fine.
            free_dir(&p).await.unwrap();
        });
        assert!(!part.exists());
    }

    #[test]
    fn waits_for_readers_before_shrinking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log.deleting");
        let p = path.clone();
        run(move || async move {
            write_file(&p, 3 * RECLAIM_STEP_BYTES as usize).await;
            let handle = Rc::new(BufferedFile::open(&p).await.unwrap());
            let reader = handle.clone();
            let read = glommio::spawn_local(async move {
                // A read in progress: the whole file is still there for it.
                glommio::timer::sleep(Duration::from_millis(30)).await;
                let bytes = reader.read_at(0, 3 * RECLAIM_STEP_BYTES as usize).await.unwrap();
                assert_eq!(bytes.len(), 3 * RECLAIM_STEP_BYTES as usize);
                drop(reader);
            });
            release(&p, Some(Held::Active(handle)), || false).await.unwrap();
            read.await;
        });
        assert!(!path.exists());
    }
}
