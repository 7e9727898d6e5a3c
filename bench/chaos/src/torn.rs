//! The torn-tail fault: while a node is down, damage the end of a
//! partition's active segment beyond anything a client saw, as a crash
//! before the fsync would leave it: cut it inside or between its last
//! batches, or append zeros or garbage. Recovery must trim it and lose
//! nothing acknowledged.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use es_protocol::batch::HEADER_BYTES;

use crate::rng::Rng;

/// Most bytes appended by one tear.
const APPEND_BYTES_MAX: u64 = 8192;

/// The active segment of a partition directory: the `.log` file named by
/// the highest base offset (20 digits).
pub fn active_segment(dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let name = name.to_str()?;
        let Some(stem) = name.strip_suffix(".log") else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(base) = stem.parse::<u64>() else { continue };
        if best.as_ref().is_none_or(|(b, _)| base > *b) {
            best = Some((base, entry.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// A batch in a segment: its byte range and its last offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSpan {
    pub start: u64,
    pub end: u64,
    pub first_offset: u64,
    pub last_offset: u64,
}

/// The batches of a segment from its start, up to the first bytes that
/// are not a whole batch header with a plausible length (the checksums
/// are the broker's business: this only finds the boundaries).
pub fn batches(bytes: &[u8]) -> Vec<BatchSpan> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let le = |b: &[u8], from: usize, n: usize| -> Option<u64> {
        let s = b.get(from..from + n)?;
        Some(s.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    };
    while let (Some(base), Some(len), Some(delta)) =
        (le(bytes, at, 8), le(bytes, at + 8, 4), le(bytes, at + 24, 4))
    {
        let len = len as usize;
        if len < HEADER_BYTES || at + len > bytes.len() {
            break;
        }
        out.push(BatchSpan {
            start: at as u64,
            end: (at + len) as u64,
            first_offset: base,
            last_offset: base + delta,
        });
        at += len;
    }
    out
}

/// What a tear did, for the nemesis log.
#[derive(Debug, PartialEq, Eq)]
pub struct Tear {
    pub segment: PathBuf,
    pub action: String,
    /// The file's length before and after.
    pub from: u64,
    pub to: u64,
}

/// Where a cut may go: past every batch holding an offset at or below
/// `seen` (the highest any client saw).
pub fn cut_floor(spans: &[BatchSpan], seen: Option<u64>) -> u64 {
    let Some(seen) = seen else { return 0 };
    spans
        .iter()
        .filter(|s| s.first_offset <= seen)
        .map(|s| s.end)
        .max()
        .unwrap_or(0)
}

/// Tears the active segment of the partition in `dir`, never below
/// `seen`; with `may_cut` false it only appends (zeros or garbage).
///
/// A replica of a cluster must not lose a batch it has on disk: it may
/// have acknowledged it to its leader (it was fsynced), and a commit
/// counted on it survives only while it keeps it. What clients saw is no
/// bound there (a batch can be committed before any client sees it), so
/// a cluster run (`may_cut` false) tears only past the last valid batch:
/// the torn write a crash leaves of an append nobody acknowledged. The
/// soak's seed 13 cut a committed batch on a leader, which then lost it
/// (an `inconsistent-offsets` of the harness's own making).
pub fn tear(dir: &Path, seen: Option<u64>, may_cut: bool, rng: &mut Rng) -> Result<Tear, String> {
    let segment = active_segment(dir).ok_or_else(|| format!("{}: no segment", dir.display()))?;
    let mut bytes = Vec::new();
    OpenOptions::new()
        .read(true)
        .open(&segment)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", segment.display()))?;
    let spans = batches(&bytes);
    let valid_end = spans.last().map_or(0, |s| s.end);
    let floor = cut_floor(&spans, seen);
    let from = bytes.len() as u64;
    let file = OpenOptions::new()
        .write(true)
        .open(&segment)
        .map_err(|e| format!("{}: {e}", segment.display()))?;
    let (action, to) = if may_cut && floor < valid_end && rng.chance(60) {
        // Cut somewhere after the floor: inside a batch or between two.
        let to = rng.range(floor + 1, valid_end - 1).max(floor);
        file.set_len(to)
            .map_err(|e| format!("{}: {e}", segment.display()))?;
        (
            format!("cut at byte {to} (valid batches end at {valid_end}, seen up to byte {floor})"),
            to,
        )
    } else {
        let n = rng.range(1, APPEND_BYTES_MAX);
        let zeros = rng.chance(50);
        let junk: Vec<u8> = (0..n)
            .map(|_| if zeros { 0 } else { rng.next_u64() as u8 })
            .collect();
        let mut f = OpenOptions::new()
            .append(true)
            .open(&segment)
            .map_err(|e| format!("{}: {e}", segment.display()))?;
        f.write_all(&junk)
            .map_err(|e| format!("{}: {e}", segment.display()))?;
        let what = if zeros { "zeros" } else { "garbage" };
        (format!("appended {n} bytes of {what}"), from + n)
    };
    file.sync_all()
        .map_err(|e| format!("{}: {e}", segment.display()))?;
    Ok(Tear {
        segment,
        action,
        from,
        to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_protocol::batch::{encode, RecordRef};

    /// A segment of three batches: offsets 10-11, 12, 13-15.
    fn segment() -> Vec<u8> {
        let rec = |value: &'static [u8]| RecordRef {
            offset: 0,
            timestamp_ms: 1,
            key: None,
            value,
        };
        let mut out = Vec::new();
        encode(10, &[rec(b"a"), rec(b"b")], &mut out);
        encode(12, &[rec(b"c")], &mut out);
        encode(13, &[rec(b"d"), rec(b"e"), rec(b"f")], &mut out);
        out
    }

    #[test]
    fn batches_are_found_and_trailing_bytes_ignored() {
        let mut bytes = segment();
        let spans = batches(&bytes);
        assert_eq!(spans.len(), 3);
        assert_eq!(
            spans.iter().map(|s| s.last_offset).collect::<Vec<_>>(),
            [11, 12, 15]
        );
        assert_eq!(spans[2].end, bytes.len() as u64);
        bytes.extend_from_slice(&[0u8; 100]);
        assert_eq!(batches(&bytes), spans);
        bytes.truncate(spans[2].end as usize - 1);
        assert_eq!(batches(&bytes).len(), 2);
    }

    #[test]
    fn the_cut_floor_keeps_every_batch_with_a_seen_offset() {
        let spans = batches(&segment());
        assert_eq!(cut_floor(&spans, None), 0);
        assert_eq!(cut_floor(&spans, Some(9)), 0);
        assert_eq!(cut_floor(&spans, Some(10)), spans[0].end);
        assert_eq!(cut_floor(&spans, Some(12)), spans[1].end);
        // Offset 13 lies in the last batch: all of it stays.
        assert_eq!(cut_floor(&spans, Some(13)), spans[2].end);
    }

    #[test]
    fn a_tear_never_cuts_what_was_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.log");
        std::fs::write(dir.path().join("00000000000000000000.log"), b"older").unwrap();
        std::fs::write(dir.path().join("00000000000000000010.index"), b"x").unwrap();
        let original = segment();
        let keep = batches(&original)[1].end as usize;
        for seed in 0..200 {
            std::fs::write(&path, &original).unwrap();
            let t = tear(dir.path(), Some(12), true, &mut Rng::fork(seed, 0)).unwrap();
            assert_eq!(t.segment, path);
            let now = std::fs::read(&path).unwrap();
            assert_eq!(now.len() as u64, t.to, "{}", t.action);
            assert!(now.len() >= keep, "{}", t.action);
            assert_eq!(now[..keep], original[..keep], "{}", t.action);
        }
    }

    #[test]
    fn a_cluster_tear_keeps_every_valid_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.log");
        let original = segment();
        let valid_end = batches(&original).last().unwrap().end as usize;
        for seed in 0..200 {
            std::fs::write(&path, &original).unwrap();
            let t = tear(dir.path(), None, false, &mut Rng::fork(seed, 0)).unwrap();
            let now = std::fs::read(&path).unwrap();
            assert!(now.len() > original.len(), "{}", t.action);
            assert_eq!(now[..valid_end], original[..valid_end], "{}", t.action);
        }
    }
}
