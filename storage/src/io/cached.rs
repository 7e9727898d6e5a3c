//! Reads served from the page cache without a round trip through io_uring.
//!
//! `preadv2(RWF_NOWAIT)` copies what the page cache holds straight into the
//! caller's buffer and never waits for the disk: pages that are not cached
//! end the read short (or fail it with `EAGAIN`), and the caller reads the
//! rest through glommio as usual. So a read of cached bytes costs one
//! kernel copy into the buffer that is sent on, instead of a copy into a
//! glommio buffer, a copy out of it, and a trip through the ring; and it
//! never blocks the shard.

use std::os::fd::AsRawFd;

/// Appends to `out` up to `len` bytes at `pos` that the page cache holds,
/// stopping at the first byte it does not hold (or at the end of the
/// file). Returns how many bytes were appended; 0 when nothing was cached
/// or the kernel cannot read without waiting. An error is not reported
/// here: the caller's glommio read that follows meets it and reports it.
pub(crate) fn read_cached(file: &impl AsRawFd, pos: u64, len: usize, out: &mut Vec<u8>) -> usize {
    let Ok(mut at) = libc::off_t::try_from(pos) else {
        return 0;
    };
    out.reserve(len);
    let mut got = 0usize;
    while got < len {
        let spare = out.spare_capacity_mut();
        let want = (len - got).min(spare.len());
        let iov = libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: want,
        };
        // SAFETY: `iov` describes `want` bytes of `out`'s spare capacity,
        // which the kernel may write; only the `n` bytes it reports written
        // are then counted as initialised.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        if n <= 0 {
            break;
        }
        let n = n as usize;
        // SAFETY: the kernel initialised `n` (<= `want`) bytes past the
        // current length.
        unsafe { out.set_len(out.len() + n) };
        got += n;
        at += n as libc::off_t;
        // Short: the next page is not cached (or the file ends). Stop here
        // rather than ask again: the miss may have started a readahead, and
        // what follows is read through glommio either way.
        if n < want {
            break;
        }
    }
    got
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File; // blocking-ok: tests only, off the executor
    use std::io::Write;
    use std::path::Path;

    const FILE_BYTES: usize = 1 << 20;
    /// The middle of the file dropped from the page cache.
    const HOLE: std::ops::Range<usize> = (256 << 10)..(512 << 10);

    fn data() -> Vec<u8> {
        (0..FILE_BYTES as u32).map(|i| (i % 251) as u8).collect()
    }

    /// A file of [`data`], all of it in the page cache but [`HOLE`].
    fn file_with_hole(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap(); // blocking-ok: test setup, off the executor
        f.write_all(&data()).unwrap();
        f.sync_all().unwrap();
        // Dropped whole, then read back: pages cached by reads can be
        // dropped a range at a time (those written may sit in larger folios).
        drop_pages(&f, 0..0);
        std::fs::read(&path).unwrap(); // blocking-ok: test setup, off the executor
        drop_pages(&f, HOLE);
        path
    }

    /// The offset of the first page of `f`'s first `len` bytes that the page
    /// cache does not hold (`mincore` over a mapping, which faults nothing
    /// in), or `None` when all are cached.
    fn first_uncached(f: &File, len: usize) -> Option<usize> {
        let page = 4096;
        // SAFETY: a read-only shared mapping of `len` bytes of an open
        // file, unmapped below; its memory is never read.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let mut resident = vec![0u8; len.div_ceil(page)];
        // SAFETY: `map` is a mapping of `len` bytes; `resident` has one byte
        // per page of it.
        let rc = unsafe { libc::mincore(map, len, resident.as_mut_ptr()) };
        // SAFETY: the mapping made above, of `len` bytes.
        unsafe { libc::munmap(map, len) };
        assert_eq!(rc, 0);
        resident.iter().position(|r| r & 1 == 0).map(|i| i * page)
    }

    /// Drops `range` of `f` from the page cache (`0..0`: all of it).
    fn drop_pages(f: &File, range: std::ops::Range<usize>) {
        // SAFETY: advice on an open descriptor; no memory is touched.
        let rc = unsafe {
            libc::posix_fadvise(
                f.as_raw_fd(),
                range.start as i64,
                range.len() as i64,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        assert_eq!(rc, 0);
    }

    #[test]
    fn reads_cached_bytes_and_stops_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &data()[..100_000]).unwrap(); // blocking-ok: test setup, off the executor
        let f = File::open(&path).unwrap(); // blocking-ok: test setup, off the executor
        let mut out = vec![7u8];
        assert_eq!(read_cached(&f, 10, 1000, &mut out), 1000);
        assert_eq!(out[0], 7);
        assert_eq!(&out[1..], &data()[10..1010]);
        // Past the end: what is there, then nothing.
        let mut out = Vec::new();
        assert_eq!(read_cached(&f, 99_990, 100, &mut out), 10);
        assert_eq!(out, &data()[99_990..100_000]);
        assert_eq!(read_cached(&f, 200_000, 100, &mut Vec::new()), 0);
    }

    /// A read from a file partly dropped from the page cache returns a
    /// correct prefix of it, never bytes from elsewhere; `read_exact` reads
    /// the rest through io_uring, whole and in order. Where the prefix ends
    /// is not asserted: a `RWF_NOWAIT` miss may start a readahead that
    /// completes before the kernel checks the page again (more likely on a
    /// loaded machine, where the reader is preempted), so the kernel does
    /// not promise to stop at the first page that was not cached.
    #[test]
    fn a_partly_cached_file_reads_a_correct_prefix_and_read_exact_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_with_hole(dir.path());
        let f = File::open(&path).unwrap(); // blocking-ok: test setup, off the executor
        assert!(
            first_uncached(&f, FILE_BYTES).is_some(),
            "some page of the hole was dropped"
        );
        let mut out = Vec::new();
        let got = read_cached(&f, 0, FILE_BYTES, &mut out);
        assert!(got <= FILE_BYTES, "read {got} bytes of a {FILE_BYTES}-byte file");
        assert_eq!(out, &data()[..got]);
        drop(f);
        // The same read through `read_exact`: the cached part, then the
        // rest through io_uring, whole and in order.
        let path = file_with_hole(dir.path());
        let got = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .unwrap()
            .run(async {
                let file = glommio::io::BufferedFile::open(&path).await.unwrap();
                crate::io::files::read_exact(&file, &path, 1000, FILE_BYTES)
                    .await
                    .unwrap()
            });
        assert_eq!(got, &data()[1000..]);
    }
}
