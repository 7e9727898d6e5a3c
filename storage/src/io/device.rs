//! The disk's properties, read once per shard at start.
//!
//! glommio reads a block device's properties (block size, largest I/O)
//! from `/sys` the first time a thread opens a file for direct I/O on that
//! device, with descriptors of its own, and panics if it cannot open them.
//! A shard that met that first open with its descriptors used up (by
//! clients, say) would die from a write. So each shard makes that first
//! open at start, on the data directory, while descriptors are plentiful;
//! glommio keeps what it read for the life of the thread. Opens for direct
//! I/O later on catch the panic anyway (`writer.rs`, [`dma_open`]).

use std::path::Path;

use futures::FutureExt;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use crate::{Result, StorageError};

/// Bytes of the probe file: one page, so the probe read glommio makes on
/// a new device reads data, as on a segment.
const PROBE_BYTES: usize = 4096;

/// Makes this thread's first direct-I/O open on the device holding `dir`
/// (see the module doc): a probe file is written, opened with `O_DIRECT`,
/// and removed. Run on a shard before it opens any partition.
pub async fn read_device_properties(dir: &Path) -> Result<()> {
    let path = dir.join(format!(".direct-io-probe-{}", glommio::executor().id()));
    let io = |e: std::io::Error| StorageError::io(&path, e);
    let file = BufferedFile::create(&path).await.map_err(|e| io(e.into()))?;
    crate::io::files::write_all(&file, &path, vec![0; PROBE_BYTES], 0).await?;
    file.close().await.map_err(|e| io(e.into()))?;
    let opened = dma_open(&path, OpenOptions::new().read(true)).await;
    let removed = glommio::io::remove(&path).await.map_err(|e| io(e.into()));
    match opened {
        Ok(f) => {
            let _ = f.close().await;
        }
        // A filesystem without direct I/O refuses the open after glommio
        // read the device's properties: nothing more to do.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(io(e)),
    }
    removed
}

/// Opens `path` for direct I/O with `opts`, turning a panic inside glommio
/// (reading the device's properties from `/sys`) into an error.
pub(crate) async fn dma_open(path: &Path, opts: &OpenOptions) -> std::io::Result<DmaFile> {
    match std::panic::AssertUnwindSafe(opts.dma_open(path))
        .catch_unwind()
        .await
    {
        Ok(opened) => opened.map_err(crate::log::write_failure::os_error),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            Err(std::io::Error::other(format!(
                "glommio could not read the disk's properties from /sys: {what}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .unwrap()
            .run(async move {
                read_device_properties(&d).await.unwrap();
                // Again: the properties are known, the probe works the same.
                read_device_properties(&d).await.unwrap();
            });
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect(); // blocking-ok: a test
        assert!(left.is_empty(), "{left:?}");
    }
}
