//! The archive `es-tools dump` writes and `verify` / `restore` read: one
//! tar stream (POSIX/GNU, crate `tar`), optionally gzip'd. Entry names
//! under `es-dump/`: `manifest.json` first, `trailer.json` last; the
//! trailer lists every other entry with its length and SHA-256, and a
//! digest of that list. docs/tools.md gives the layout.

use std::io::{Read, Write};

use ring::digest::{Context, SHA256};
use serde::{Deserialize, Serialize};

/// The archive format's name and version, in the manifest.
pub const FORMAT: &str = "es-dump";
pub const VERSION: u64 = 1;
/// Every entry's path starts with this.
pub const ROOT: &str = "es-dump/";
pub const MANIFEST: &str = "es-dump/manifest.json";
pub const TRAILER: &str = "es-dump/trailer.json";

/// One entry as the trailer lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntrySum {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// The trailer: last entry of every archive.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trailer {
    /// `complete`, or `failed` (a dump that stopped at corruption).
    pub status: String,
    pub entries: Vec<EntrySum>,
    pub totals: serde_json::Value,
    pub problems: Vec<serde_json::Value>,
    pub sha256_of_entries: String,
}

/// The digest of a trailer's entry list: SHA-256 of one line per entry,
/// `path TAB bytes TAB sha256 LF`, in order.
pub fn digest_of_entries(entries: &[EntrySum]) -> String {
    let mut h = Context::new(&SHA256);
    for e in entries {
        h.update(format!("{}\t{}\t{}\n", e.path, e.bytes, e.sha256).as_bytes());
    }
    hex(h.finish().as_ref())
}

pub fn hex(bytes: &[u8]) -> String {
    crate::show::hex(bytes)
}

/// A reader that hashes and counts what passes through it.
pub struct Hashing<R> {
    pub inner: R,
    hasher: crate::sha::Sha256Stream,
    pub bytes: u64,
}

impl<R> Hashing<R> {
    pub fn new(inner: R) -> Hashing<R> {
        Hashing {
            inner,
            hasher: crate::sha::Sha256Stream::new(),
            bytes: 0,
        }
    }

    /// The SHA-256 (hex) of everything read or written so far.
    pub fn finish(self) -> (u64, String) {
        (self.bytes, self.hasher.finish())
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = buf.get(..n).unwrap_or_default();
        self.hasher.update(got);
        self.bytes += n as u64;
        Ok(n)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(buf.get(..n).unwrap_or_default());
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A segment entry's path, parsed: `(tier, topic, partition, base)` of
/// `es-dump/topics/<t>/<p>/<base:020>.log` or `es-dump/cold/...`.
pub fn segment_path(path: &str) -> Option<(&str, &str, u32, es_format::Offset)> {
    let rest = path.strip_prefix(ROOT)?;
    let (tier, rest) = rest.split_once('/')?;
    if tier != "topics" && tier != "cold" {
        return None;
    }
    let mut parts = rest.split('/');
    let (topic, p, name) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base = es_format::names::parse_log_name(name)?;
    Some((tier, topic, p.parse().ok()?, base))
}

/// A topic name es accepts: 1-249 of `[A-Za-z0-9._-]`, not `.` or `..`
/// (docs/api.md): what may become a directory name on restore.
pub fn valid_topic(name: &str) -> bool {
    (1..=249).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_paths() {
        let p = "es-dump/topics/orders/2/00000000000000004096.log";
        assert_eq!(
            segment_path(p),
            Some(("topics", "orders", 2, es_format::Offset(4096)))
        );
        assert!(segment_path("es-dump/topics/orders/meta.json").is_none());
        assert!(segment_path("es-dump/x/orders/2/00000000000000004096.log").is_none());
        assert!(valid_topic("a.b-c_1") && !valid_topic("..") && !valid_topic("a/b"));
    }
}
