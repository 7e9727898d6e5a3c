//! One partition's segments scanned the way recovery scans them, with the
//! findings reported: corruption (a problem), a torn tail of the last hot
//! segment (a notice: recovery trims it), segments that overlap or leave
//! offsets missing, and what is wrong with their indexes.

use std::path::{Path, PathBuf};

use es_format::names::{index_name, log_name};
use es_format::scan::{Scanned, Shape, Tail};
use es_format::Offset;
use serde_json::json;

use crate::datadir::{rel, segments};
use crate::fail::Fail;
use crate::index_check::{self, Matcher};
use crate::report::Report;
use crate::segscan::{scan_file, trimmed_bytes};

/// The hot tier (`topics/`) or the cold (`cold/`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tier {
    Hot,
    Cold,
}

/// One segment as scanned.
#[derive(Debug)]
pub struct Seg {
    pub base: Offset,
    pub log: PathBuf,
    pub scanned: Scanned,
    pub batches: u64,
    pub records: u64,
    pub first_offset: Option<Offset>,
    pub last_offset: Option<Offset>,
    pub max_timestamp_ms: i64,
    pub first_timestamp_ms: Option<i64>,
    /// Where its offsets end: its index footer's when the index matches
    /// the log (compaction may drop a segment's last records), else the
    /// scan's.
    pub end_offset: Offset,
}

/// Which partition, for reports.
#[derive(Copy, Clone, Debug)]
pub struct Which<'a> {
    pub root: &'a Path,
    pub topic: &'a str,
    pub partition: u32,
    pub tier: Tier,
}

/// Scans every segment of the partition at `dir`. Cold segments count
/// only once listed (both files there and the index's `log_bytes` equal
/// to the log's length, as the cold store lists them).
pub fn scan(dir: &Path, w: Which<'_>, report: &mut Report) -> Result<Vec<Seg>, Fail> {
    let bases = segments(dir)?;
    let mut out: Vec<Seg> = Vec::new();
    for (i, &base) in bases.iter().enumerate() {
        let log = dir.join(log_name(base));
        let ipath = dir.join(index_name(base));
        let file_len = std::fs::metadata(&log).map_err(|e| Fail::io(&log, e))?.len();
        let index = index_check::read(&ipath)?;
        let footer = index.as_ref().and_then(|f| f.footer);
        let matches = footer.is_some_and(|f| f.log_bytes == file_len);
        let last = w.tier == Tier::Hot && i + 1 == bases.len();
        if w.tier == Tier::Cold && !matches {
            report.notice(
                "unlisted_cold_segment",
                json!({"file": rel(w.root, &log), "why": "no index matching its length: a copy cut short, which the broker ignores"}),
            );
            continue;
        }
        let end = match w.tier {
            Tier::Hot => bases.get(i + 1).copied(),
            Tier::Cold => footer.map(|f| f.next_offset),
        };
        let mut seg = Seg {
            base,
            log: log.clone(),
            scanned: Scanned {
                end: 0,
                file_len,
                tail: Tail::Clean,
                next_offset: base,
                gaps: false,
            },
            batches: 0,
            records: 0,
            first_offset: None,
            last_offset: None,
            max_timestamp_ms: i64::MIN,
            first_timestamp_ms: None,
            end_offset: base,
        };
        let mut matcher = Matcher::new(base, index.as_ref());
        let scanned = scan_file(&log, base, Shape { last, end }, |h, pos| {
            seg.batches += 1;
            seg.records += h.record_count as u64;
            seg.first_offset.get_or_insert(h.base_offset);
            seg.first_timestamp_ms.get_or_insert(h.first_timestamp_ms);
            seg.last_offset = Some(h.last_offset());
            seg.max_timestamp_ms = seg.max_timestamp_ms.max(h.max_timestamp_ms);
            matcher.batch(h.base_offset, h.max_timestamp_ms, pos);
        })
        .map_err(|e| Fail::io(&log, e))?;
        let file = rel(w.root, &log);
        match &scanned.tail {
            Tail::Clean | Tail::Padding => {}
            Tail::Torn(reason) => report.notice(
                "torn_tail",
                json!({"topic": w.topic, "partition": w.partition, "file": file, "position": scanned.end,
                       "trimmed_tail_bytes": trimmed_bytes(&scanned), "reason": reason,
                       "action": "recovery trims it at the next start; nothing acknowledged is lost"}),
            ),
            Tail::Damaged { reason, lost } => report.problem(
                "corrupt_batch",
                json!({"topic": w.topic, "partition": w.partition, "file": file, "position": scanned.end,
                       "expected_offset": lost.from.0, "error": reason, "lost": lost.to_string(),
                       "action": "the broker refuses to open this partition; --accept-data-loss quarantines the damage"}),
            ),
        }
        // The index, against the log.
        let index_file = rel(w.root, &ipath);
        match &index {
            None if last => {}
            None => report.notice(
                "missing_index",
                json!({"file": index_file, "action": "the broker scans the log and rebuilds it"}),
            ),
            Some(_) if last && !matches => report.notice(
                "stale_index",
                json!({"file": index_file, "why": "the active segment grew past it; recovery scans the log"}),
            ),
            Some(f) => {
                let mut errors = f.errors.clone();
                if let Some(ft) = f.footer {
                    if !matches {
                        errors.push(format!(
                            "log_bytes {} but the log has {file_len} bytes",
                            ft.log_bytes
                        ));
                    } else if ft.next_offset < scanned.next_offset {
                        errors.push(format!(
                            "next_offset {} is below the log's {}",
                            ft.next_offset, scanned.next_offset
                        ));
                    } else if scanned.tail == Tail::Clean && ft.max_timestamp_ms != seg.max_timestamp_ms {
                        errors.push(format!(
                            "max_timestamp_ms {} but the log's is {}",
                            ft.max_timestamp_ms, seg.max_timestamp_ms
                        ));
                    }
                }
                errors.extend(matcher.finish(scanned.end));
                for error in errors {
                    report.problem("bad_index", json!({"file": index_file, "error": error}));
                }
            }
        }
        seg.end_offset = match (&scanned.tail, footer.filter(|_| matches)) {
            // The damage is reported; its offsets are not missing too.
            (Tail::Damaged { lost, .. }, _) => lost.to.max(scanned.next_offset),
            (_, Some(f)) => f.next_offset.max(scanned.next_offset),
            (_, None) => scanned.next_offset,
        };
        seg.scanned = scanned;
        if let Some(prev) = out.last() {
            check_joint(prev, &seg, w, report);
        }
        out.push(seg);
    }
    Ok(out)
}

/// Consecutive segments: no overlap, and no offsets missing between them
/// (but a compacted segment, whose offsets have gaps, may end early).
fn check_joint(prev: &Seg, seg: &Seg, w: Which<'_>, report: &mut Report) {
    let (file, next_file) = (rel(w.root, &prev.log), rel(w.root, &seg.log));
    if prev.end_offset > seg.base {
        report.problem(
            "overlapping_segments",
            json!({"topic": w.topic, "partition": w.partition, "file": file, "next_file": next_file,
                   "error": format!("offsets reach {} past the next segment's base {}", prev.end_offset, seg.base)}),
        );
    } else if prev.end_offset < seg.base && !prev.scanned.gaps && w.tier == Tier::Hot {
        report.problem(
            "missing_offsets",
            json!({"topic": w.topic, "partition": w.partition, "file": file,
                   "error": format!("offsets {}..{} are in no segment", prev.end_offset, seg.base)}),
        );
    }
}
