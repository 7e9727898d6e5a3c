//! One segment scanned with es-format's scan (the broker's recovery rules)
//! over a std file, and the text forms its findings take in reports.

use std::path::Path;

use es_format::batch::BatchHeader;
use es_format::scan::{block_on_ready, scan, Scanned, Shape, Tail};
use es_format::Offset;

use crate::source::FileSource;

/// Scans the log at `path` (segment base `base`), handing each valid batch
/// and its position to `each`. Reads only.
pub fn scan_file(
    path: &Path,
    base: Offset,
    shape: Shape,
    each: impl FnMut(&BatchHeader, u64),
) -> std::io::Result<Scanned> {
    let mut src = FileSource::open(path)?;
    block_on_ready(scan(&mut src, base, shape, each))
}

/// What the end of a scan is called in reports.
pub fn tail_kind(tail: &Tail) -> &'static str {
    match tail {
        Tail::Clean => "clean",
        Tail::Padding => "padding",
        Tail::Torn(_) => "torn",
        Tail::Damaged { .. } => "corrupt",
    }
}

/// Bytes recovery would cut off the end of the log (a torn tail or a
/// writer's padding); 0 when clean or corrupt.
pub fn trimmed_bytes(s: &Scanned) -> u64 {
    match s.tail {
        Tail::Padding | Tail::Torn(_) => s.file_len - s.end,
        Tail::Clean | Tail::Damaged { .. } => 0,
    }
}

/// The base offset a segment file's name gives, else that of its first
/// batch header, else 0 (a file given by hand).
pub fn base_of(path: &Path) -> Offset {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(es_format::names::parse_log_name);
    named.unwrap_or_else(|| {
        FileSource::open(path)
            .and_then(|f| f.read_at(0, es_format::batch::HEADER_V2_BYTES))
            .ok()
            .and_then(|b| BatchHeader::parse(&b).ok())
            .map_or(Offset(0), |h| h.base_offset)
    })
}
