//! A segment's log read with std I/O, for es-format's scan: the same scan
//! the broker's recovery runs over its glommio file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use es_format::scan::Source;

use crate::limits::READ_CHUNK_BYTES;

/// A log file and a window on it: the bytes read last, by position.
pub struct FileSource {
    file: File,
    path: PathBuf,
    len: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    at: u64,
}

impl FileSource {
    pub fn open(path: &Path) -> std::io::Result<FileSource> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileSource {
            file,
            path: path.to_path_buf(),
            len,
            buf: Vec::new(),
            at: 0,
        })
    }

    /// `len` bytes at `pos` (fewer only where the file ends).
    pub fn read_at(&self, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        let done = self.read_into(pos, &mut buf)?;
        buf.truncate(done);
        Ok(buf)
    }

    /// Fills `buf` from `pos`; how much was read (less only where the
    /// file ends).
    fn read_into(&self, pos: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut done = 0;
        while let Some(rest) = buf.get_mut(done..) {
            if rest.is_empty() {
                break;
            }
            match self.file.read_at(rest, pos + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

impl Source for FileSource {
    type Error = std::io::Error;

    fn len(&self) -> u64 {
        self.len
    }

    async fn get(&mut self, pos: u64, want: usize) -> std::io::Result<&[u8]> {
        let left = self.len.saturating_sub(pos);
        let want = (want as u64).min(left) as usize;
        let held = pos >= self.at && pos + want as u64 <= self.at + self.buf.len() as u64;
        if !held {
            let read = want.max(READ_CHUNK_BYTES).min(left as usize);
            // The window's buffer is reused: no allocation nor zeroing
            // per chunk once it has its size.
            let mut buf = std::mem::take(&mut self.buf);
            buf.resize(read, 0);
            let got = self.read_into(pos, &mut buf)?;
            buf.truncate(got);
            self.buf = buf;
            self.at = pos;
            if self.buf.len() < want {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("{}: the file ended while it was read", self.path.display()),
                ));
            }
        }
        let from = usize::try_from(pos - self.at).unwrap_or(usize::MAX);
        Ok(self.buf.get(from..).unwrap_or_default())
    }
}
