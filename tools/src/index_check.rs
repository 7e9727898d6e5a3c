//! Checks of a segment's `.index` against its log (kafka-dump-log's
//! `--verify-index-only` / `--index-sanity-check`): the footer is valid,
//! the file's length and entries CRC match it, entries increase, their
//! timestamps never decrease, and each entry points at a batch start with
//! that batch's relative offset and the running maximum timestamp there.

use std::collections::BTreeMap;
use std::path::Path;

use es_format::index::{Footer, IndexEntry, ENTRY_BYTES, FOOTER_BYTES};
use es_format::Offset;

use crate::fail::Fail;

/// An index file as read, before it is compared with its log.
#[derive(Debug)]
pub struct IndexFile {
    pub footer: Option<Footer>,
    /// Entries by position (those that decode).
    pub entries: BTreeMap<u64, IndexEntry>,
    /// What is wrong with the file itself.
    pub errors: Vec<String>,
}

/// Reads `path`; `None` when there is no index.
pub fn read(path: &Path) -> Result<Option<IndexFile>, Fail> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Fail::io(path, e)),
    };
    let mut file = IndexFile {
        footer: Footer::decode(&bytes),
        entries: BTreeMap::new(),
        errors: Vec::new(),
    };
    let Some(footer) = file.footer else {
        file.errors.push("footer damaged (magic, version or CRC)".into());
        return Ok(Some(file));
    };
    let n = footer.entry_count as usize;
    let body = n.checked_mul(ENTRY_BYTES).and_then(|b| bytes.get(..b));
    let Some(body) = body.filter(|b| b.len() + FOOTER_BYTES == bytes.len()) else {
        file.errors.push(format!(
            "{} bytes, the footer says {n} entries ({} bytes)",
            bytes.len(),
            n.saturating_mul(ENTRY_BYTES).saturating_add(FOOTER_BYTES)
        ));
        return Ok(Some(file));
    };
    if crc32fast::hash(body) != footer.entries_crc {
        file.errors.push("entries CRC mismatch".into());
    }
    let mut prev: Option<IndexEntry> = None;
    for (i, chunk) in body.chunks_exact(ENTRY_BYTES).enumerate() {
        let field = |r: std::ops::Range<usize>| chunk.get(r).unwrap_or_default();
        let e = IndexEntry {
            relative_offset: u32::from_le_bytes(field(0..4).try_into().unwrap_or_default()),
            position: u32::from_le_bytes(field(4..8).try_into().unwrap_or_default()),
            max_timestamp_ms: i64::from_le_bytes(field(8..16).try_into().unwrap_or_default()),
        };
        if let Some(p) = prev {
            if e.relative_offset <= p.relative_offset || e.position <= p.position {
                file.errors
                    .push(format!("entry {i} does not increase: {p:?} then {e:?}"));
            }
            if e.max_timestamp_ms < p.max_timestamp_ms {
                file.errors.push(format!(
                    "entry {i}: its timestamp {} decreases",
                    e.max_timestamp_ms
                ));
            }
        }
        if e.position as u64 >= footer.log_bytes {
            file.errors
                .push(format!("entry {i} at position {} is past log_bytes", e.position));
        }
        file.entries.insert(e.position as u64, e);
        prev = Some(e);
    }
    Ok(Some(file))
}

/// Compares index entries with the batches a scan found, batch by batch.
#[derive(Debug)]
pub struct Matcher {
    base: Offset,
    entries: BTreeMap<u64, IndexEntry>,
    running_max: i64,
    pub errors: Vec<String>,
}

impl Matcher {
    pub fn new(base: Offset, index: Option<&IndexFile>) -> Matcher {
        Matcher {
            base,
            entries: index.map(|f| f.entries.clone()).unwrap_or_default(),
            running_max: i64::MIN,
            errors: Vec::new(),
        }
    }

    /// A batch the scan found at `pos`.
    pub fn batch(&mut self, base_offset: Offset, max_ts: i64, pos: u64) {
        self.running_max = self.running_max.max(max_ts);
        if let Some(e) = self.entries.remove(&pos) {
            let rel = base_offset.0.saturating_sub(self.base.0);
            if e.relative_offset as u64 != rel {
                self.errors.push(format!(
                    "entry at position {pos} says relative offset {}, the batch there has {rel}",
                    e.relative_offset
                ));
            }
            if e.max_timestamp_ms != self.running_max {
                self.errors.push(format!(
                    "entry at position {pos} says max timestamp {}, the log has {}",
                    e.max_timestamp_ms, self.running_max
                ));
            }
        }
    }

    /// After the scan: entries below `valid_end` that met no batch start.
    pub fn finish(mut self, valid_end: u64) -> Vec<String> {
        for pos in self.entries.keys().filter(|&&p| p < valid_end) {
            self.errors
                .push(format!("entry at position {pos} is not at a batch start"));
        }
        self.errors
    }
}
