//! Reading an archive as a stream, once, for `verify` and `restore`: the
//! manifest must come first and be a version this tool knows, every
//! entry is hashed as it passes, and the trailer (last) must list exactly
//! the entries seen, with their lengths and SHA-256s, its own digest
//! right, and `status: complete`. Nothing here panics on any input.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::Value;

use crate::archive::{digest_of_entries, EntrySum, Hashing, Trailer, FORMAT, MANIFEST, TRAILER, VERSION};
use crate::fail::Fail;

use crate::limits::{ARCHIVE_BUFFER_BYTES, JSON_BYTES_MAX};

/// What a build without the cargo feature `zstd` says of zstd.
#[cfg(not(feature = "zstd"))]
pub const NO_ZSTD: &str = "this es-tools was built without zstd (cargo feature `zstd`, on by default): \
     build it with `--features zstd`, or use an external `zstd -d` / `zstd` in a pipe";

/// Opens `-` (stdin) or a file; a gzip'd archive (magic `1f 8b`) or a
/// zstd one (magic `28 b5 2f fd`) is decompressed on the fly.
pub fn open(input: &str) -> Result<Box<dyn Read>, Fail> {
    let raw: Box<dyn Read> = if input == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let path = Path::new(input);
        Box::new(std::fs::File::open(path).map_err(|e| Fail::io(path, e))?)
    };
    let mut buf = BufReader::with_capacity(ARCHIVE_BUFFER_BYTES, raw);
    let head = buf.fill_buf().map_err(|e| Fail(format!("{input}: {e}")))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(buf)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        #[cfg(feature = "zstd")]
        return zstd::stream::read::Decoder::with_buffer(buf)
            .map(|d| Box::new(d) as Box<dyn Read>)
            .map_err(|e| Fail(format!("{input}: starting zstd: {e}")));
        #[cfg(not(feature = "zstd"))]
        Err(Fail(format!("{input}: a zstd-compressed archive: {NO_ZSTD}")))
    } else {
        Ok(Box::new(buf))
    }
}

/// What one pass over an archive found.
#[derive(Debug, Default)]
pub struct Seen {
    pub manifest: Option<Value>,
    pub trailer: Option<Trailer>,
    pub entries: Vec<EntrySum>,
    /// What is wrong with the archive; empty when it verifies.
    pub problems: Vec<String>,
}

/// Reads `input` to its end. Each entry other than the manifest and the
/// trailer is handed to `each` (which may read it, or not: the rest is
/// read and hashed after); an `Err` from `each` is a problem and stops
/// the pass.
pub fn read(input: Box<dyn Read>, mut each: impl FnMut(&str, &mut dyn Read) -> Result<(), String>) -> Seen {
    let mut seen = Seen::default();
    let mut archive = tar::Archive::new(input);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            seen.problems.push(format!("not a tar archive: {e}"));
            return seen;
        }
    };
    let mut last = String::from("(none)");
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                seen.problems
                    .push(format!("archive damaged after entry {last}: {e}"));
                return seen;
            }
        };
        let path = match entry.path() {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(e) => {
                seen.problems
                    .push(format!("archive damaged after entry {last}: {e}"));
                return seen;
            }
        };
        let size = entry.size();
        if seen.trailer.is_some() {
            seen.problems.push(format!("entry {path} after the trailer"));
            return seen;
        }
        if seen.manifest.is_none() && path != MANIFEST {
            seen.problems.push(format!(
                "the first entry is {path}, not {MANIFEST}: not an es-tools dump"
            ));
            return seen;
        }
        let outcome = if path == TRAILER {
            read_json(&mut entry, &path, size).and_then(|v| {
                let t: Trailer =
                    serde_json::from_value(v).map_err(|e| format!("the trailer does not parse: {e}"))?;
                seen.trailer = Some(t);
                Ok(())
            })
        } else {
            let mut h = Hashing::new(&mut entry);
            let result = if path == MANIFEST {
                read_json(&mut h, &path, size).and_then(|v| {
                    check_manifest(&v)?;
                    seen.manifest = Some(v);
                    Ok(())
                })
            } else {
                each(&path, &mut h)
            };
            let drained = std::io::copy(&mut h, &mut std::io::sink());
            let (bytes, sha256) = h.finish();
            if bytes < size {
                seen.problems.push(format!(
                    "archive ends before its trailer: entry {path} is cut short ({bytes} of {size} bytes)"
                ));
                return seen;
            }
            seen.entries.push(EntrySum {
                path: path.clone(),
                bytes,
                sha256,
            });
            match (result, drained) {
                (Err(e), _) => Err(e),
                (Ok(()), Err(e)) => Err(format!("archive damaged in entry {path}: {e}")),
                (Ok(()), Ok(_)) => Ok(()),
            }
        };
        if let Err(e) = outcome {
            seen.problems.push(e);
            return seen;
        }
        last = path;
    }
    match &seen.trailer {
        None => seen
            .problems
            .push(format!("archive ends before its trailer (last entry: {last})")),
        Some(t) => compare(t, &seen.entries, &mut seen.problems),
    }
    seen
}

fn read_json(r: &mut dyn Read, path: &str, size: u64) -> Result<Value, String> {
    let mut bytes = Vec::new();
    r.take(JSON_BYTES_MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("archive damaged in entry {path}: {e}"))?;
    if (bytes.len() as u64) < size.min(JSON_BYTES_MAX) {
        return Err(format!(
            "archive ends before its trailer: entry {path} is cut short ({} of {size} bytes)",
            bytes.len()
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("entry {path} does not parse: {e}"))
}

fn check_manifest(v: &Value) -> Result<(), String> {
    if v.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(format!("the manifest's format is not {FORMAT:?}"));
    }
    match v.get("version").and_then(Value::as_u64) {
        Some(VERSION) => Ok(()),
        other => Err(format!(
            "unknown archive version {}: this es-tools reads version {VERSION}",
            other.map_or("(none)".into(), |n| n.to_string())
        )),
    }
}

/// The trailer against the entries seen.
fn compare(t: &Trailer, seen: &[EntrySum], problems: &mut Vec<String>) {
    if digest_of_entries(&t.entries) != t.sha256_of_entries {
        problems.push("the trailer's digest of its entries does not match them".into());
    }
    for (i, s) in seen.iter().enumerate() {
        match t.entries.get(i) {
            None => problems.push(format!("entry {} is not in the trailer", s.path)),
            Some(w) if w.path != s.path => {
                problems.push(format!("entry {} where the trailer lists {}", s.path, w.path))
            }
            Some(w) if w.bytes != s.bytes => problems.push(format!(
                "entry {}: {} bytes, the trailer says {}",
                s.path, s.bytes, w.bytes
            )),
            Some(w) if w.sha256 != s.sha256 => problems.push(format!(
                "entry {}: SHA-256 {} but the trailer says {}",
                s.path, s.sha256, w.sha256
            )),
            Some(_) => {}
        }
    }
    for w in t.entries.get(seen.len()..).unwrap_or_default() {
        problems.push(format!(
            "entry {} is in the trailer but not in the archive",
            w.path
        ));
    }
    if t.status != "complete" {
        problems.push(format!(
            "the dump did not complete: status {:?} ({} problems)",
            t.status,
            t.problems.len()
        ));
    }
}
