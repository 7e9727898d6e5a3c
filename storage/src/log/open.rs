//! Opening a partition directory: listing its segments, trusting those
//! whose index matches their log, scanning the others (`recovery.rs`),
//! and refusing (or, where data loss is accepted, filling) the gaps.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::rc::Rc;

use glommio::io::BufferedFile;

use crate::cleanup::compaction::CompactionState;
use crate::cleanup::swap::{self};
use crate::format::index::IndexEntry;
use crate::io::dirs;
use crate::io::files;
use crate::log::faults::Faults;
use crate::log::fsync::FsyncBatcher;
use crate::log::recovery::{self, Quarantined, Shape};
use crate::log::segment::Segment;
use crate::log::watermark::Watermark;
use crate::tier::state::{ColdState, ColdTier};
use crate::write::early::EarlyState;
use crate::{LogConfig, Offset, Result, StorageError};

use super::partition::{Inner, LogState, OpenReport, PartitionLog};
use super::segment_set::SegmentSet;

impl PartitionLog {
    /// Opens (creating if needed) the partition log in `dir`, recovering it:
    /// sealed segments whose index matches their log are trusted without
    /// reading the log; the active segment and any other is scanned and
    /// trimmed after its last valid batch. Without a cold tier: a `tiered`
    /// policy then keeps segments instead of moving them.
    pub async fn open(
        dir: &Path,
        config: LogConfig,
        batcher: FsyncBatcher,
    ) -> Result<(PartitionLog, OpenReport)> {
        PartitionLog::open_with(dir, config, batcher, None).await
    }

    /// Like [`open`](PartitionLog::open), with a cold tier: its segments are
    /// listed, and offsets below the hot tier are read from it.
    pub async fn open_with(
        dir: &Path,
        config: LogConfig,
        batcher: FsyncBatcher,
        cold: Option<ColdTier>,
    ) -> Result<(PartitionLog, OpenReport)> {
        config.validate()?;
        // glommio opens with openat(-1, path): relative paths fail (EBADF).
        let dir = &std::path::absolute(dir).map_err(|e| StorageError::io(dir, e))?;
        dirs::create_dir_all(dir).await?;
        let leftovers = swap::recover(dir).await?;
        let bases = dirs::list_segments(dir).await?;
        let cold = match cold {
            Some(tier) => Some(ColdState::load(tier).await?),
            None => None,
        };
        let mut report = OpenReport {
            segments: bases.len().max(1),
            leftovers,
            cold_segments: cold.as_ref().map_or(0, |c| c.count()),
            ..Default::default()
        };
        let mut segments = BTreeMap::new();
        if bases.is_empty() {
            let mut seg = Segment::empty(dir, Offset(0));
            seg.file = Some(Rc::new(files::create_new(&seg.log_path).await?));
            seg.created = true;
            dirs::sync_dir(dir).await?;
            if let Some(parent) = dir.parent() {
                dirs::sync_dir(parent).await?;
            }
            segments.insert(seg.base, seg);
        }
        let mut prev_scan: Option<bool> = None; // the segment before: scanned, with offset gaps?
        for (i, &base) in bases.iter().enumerate() {
            let active = i + 1 == bases.len();
            if let Some((_, prev)) = segments.last_key_value() {
                let prev: &Segment = prev;
                if prev.next_offset > base {
                    return Err(StorageError::Corrupt {
                        path: dirs::log_path(dir, base),
                        position: 0,
                        reason: format!(
                            "segment starts at {base} but the one before ends at {}",
                            prev.next_offset
                        ),
                    });
                }
                if prev.next_offset < base {
                    let (from, to) = (prev.next_offset, base);
                    let filler = missing_segment(dir, from, to, prev_scan, &config, &mut report).await?;
                    if let Some(filler) = filler {
                        segments.insert(filler.base, filler);
                    }
                }
            }
            let next_base = bases.get(i + 1).copied();
            let shape = Shape {
                last: active,
                end: next_base,
            };
            let opened = open_segment(dir, base, shape, config.index_interval_bytes, &mut report).await?;
            prev_scan = opened.scanned_gaps;
            let mut seg = opened.seg;
            if active {
                if let Some(q) = &opened.quarantined {
                    // New records must not take the offsets lost: a segment
                    // that starts past them makes that survive a restart.
                    let fresh = roll_past_loss(dir, &mut seg, q.lost.to).await?;
                    segments.insert(seg.base, seg);
                    segments.insert(fresh.base, fresh);
                    continue;
                }
            }
            segments.insert(base, seg);
        }
        let next = segments
            .last_key_value()
            .map(|(_, s)| s.next_offset)
            .expect("one segment at least");
        let shared = Rc::new(LogState {
            dir: dir.to_path_buf(),
            config: RefCell::new(config),
            inner: RefCell::new(Inner {
                segments: SegmentSet::new(segments),
                next_offset: next,
                pending: VecDeque::new(),
                writer_running: false,
                failure: None,
                closed: false,
                rewinding: None,
                rewinds_begun: 0,
                early: EarlyState::default(),
                placed_index: 0,
                truncating: false,
            }),
            written: Watermark::new(next.0),
            durable: Watermark::new(next.0),
            written_index: Watermark::new(0),
            durable_index: Watermark::new(0),
            replicated: std::cell::Cell::new(false),
            committed: Watermark::new(0),
            cleanup_limit: std::cell::Cell::new(u64::MAX),
            holds: RefCell::default(),
            next_hold: std::cell::Cell::new(0),
            rewound: Watermark::new(0),
            batcher,
            maintenance: glommio::sync::Semaphore::new(1),
            cold,
            compaction: RefCell::new(CompactionState::default()),
            faults: Faults::default(),
            write_duration: metrics::histogram!("es_segment_write_duration_seconds"),
            damage_reported: RefCell::new(HashSet::new()),
            opened_next: next,
        });
        Ok((PartitionLog { shared }, report))
    }
}

/// A segment as [`open_segment`] opened it.
struct Opened {
    seg: Segment,
    /// `Some` when its log was scanned: whether its offsets had gaps
    /// (compaction leaves them), so its last batch may end before its
    /// offsets do.
    scanned_gaps: Option<bool>,
    quarantined: Option<Quarantined>,
}

/// Opens one segment found on disk: trusts it if its index footer matches
/// the log exactly (and, for the active segment, the index loads), else
/// scans it, trims a torn tail, quarantines corruption (or refuses) and,
/// unless active, seals it with a fresh index.
async fn open_segment(
    dir: &Path,
    base: Offset,
    shape: Shape,
    interval: u32,
    report: &mut OpenReport,
) -> Result<Opened> {
    let active = shape.last;
    let log_path = dirs::log_path(dir, base);
    let index_path = dirs::index_path(dir, base);
    let file = files::open_rw(&log_path).await?;
    let log_len = file
        .file_size()
        .await
        .map_err(|e| StorageError::io(&log_path, e))?;
    let trusted = |seg| Opened {
        seg,
        scanned_gaps: None,
        quarantined: None,
    };
    if let Some(footer) = files::read_index_footer(&index_path).await {
        if footer.log_bytes == log_len && footer.next_offset >= base {
            if !active {
                let _ = file.close().await;
                return Ok(trusted(Segment::from_footer(dir, base, footer)));
            }
            if let Some(ix) = files::read_index(&index_path, &footer).await {
                let mut seg = Segment::from_footer(dir, base, footer);
                let last: Option<IndexEntry> = ix.last();
                seg.resume(ix, last);
                seg.file = Some(Rc::new(file));
                return Ok(trusted(seg));
            }
        }
    }
    let (seg, recovered, gaps) = scan_segment(dir, base, file, shape, interval).await?;
    report.scanned.push((log_path, recovered.trimmed));
    if let Some(q) = &recovered.quarantined {
        report.quarantined.push(q.clone());
    }
    Ok(Opened {
        seg,
        scanned_gaps: Some(gaps),
        quarantined: recovered.quarantined,
    })
}

/// Rebuilds a segment from its log: scans it, trims a torn tail,
/// quarantines corruption (or refuses: `recovery.rs`), then seals it with
/// a fresh index, or, for the active segment (`shape.last`), removes any
/// stale index (it would describe a log that recovery may have cut and
/// that will grow again). Also returns whether its offsets had gaps.
async fn scan_segment(
    dir: &Path,
    base: Offset,
    file: BufferedFile,
    shape: Shape,
    interval: u32,
) -> Result<(Segment, recovery::Recovered, bool)> {
    let mut seg = Segment::empty(dir, base);
    let (recovered, scanned) = recovery::recover_segment(&file, &mut seg, interval, shape).await?;
    seg.created = true;
    if let Some(q) = &recovered.quarantined {
        // The offsets lost stay this segment's: none is given out again.
        seg.next_offset = seg.next_offset.max(q.lost.to);
    }
    if shape.last {
        match glommio::io::remove(&seg.index_path)
            .await
            .map_err(std::io::Error::from)
        {
            Ok(()) => dirs::sync_dir(dir).await?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::io(&seg.index_path, e)),
        }
        seg.file = Some(Rc::new(file));
    } else {
        let bytes = seg.index_file_bytes();
        files::save_index(dir, &seg.index_path, bytes).await?;
        seg.sealed = true;
        let _ = file.close().await;
    }
    Ok((seg, recovered, scanned.gaps))
}

/// After corruption was cut off the active segment `seg`: seals it, its
/// offsets reaching `to` (the lost ones included), and creates the empty
/// segment `to` that new records go to.
async fn roll_past_loss(dir: &Path, seg: &mut Segment, to: Offset) -> Result<Segment> {
    assert!(
        to > seg.base && to >= seg.next_offset,
        "the log moves past what it lost"
    );
    seg.next_offset = to;
    let bytes = seg.index_file_bytes();
    files::write_file_synced(&seg.index_path, bytes).await?;
    seg.sealed = true;
    let mut fresh = Segment::empty(dir, to);
    fresh.file = Some(Rc::new(files::create_new(&fresh.log_path).await?));
    fresh.created = true;
    dirs::sync_dir(dir).await?;
    Ok(fresh)
}

/// Offsets `from..to` lie between two segments and none holds them: a
/// segment file went missing (a segment's offsets always reach the next
/// one's base: rolls and compaction keep them so). Unless the segment
/// before was scanned and may have lost its last records to compaction
/// (`prev_scan`: its offsets had gaps, or the log is compacted), which
/// leaves such a gap legitimately, this is data loss: refused, or, where
/// recovery may drop data, reported and filled with an empty segment so
/// that no later start reports it again and no record takes those
/// offsets.
async fn missing_segment(
    dir: &Path,
    from: Offset,
    to: Offset,
    prev_scan: Option<bool>,
    config: &LogConfig,
    report: &mut OpenReport,
) -> Result<Option<Segment>> {
    if prev_scan.is_some_and(|gaps| gaps || config.cleanup.compact) {
        tracing::warn!(
            partition = %dir.display(),
            offsets = %format!("{from}..{to}"),
            "no segment holds these offsets; compaction may have dropped them"
        );
        return Ok(None);
    }
    metrics::counter!("es_storage_corruptions_total", "found" => "recovery").increment(1);
    let what = format!("no segment holds offsets {from}..{to}: a segment file is missing");
    if !recovery::accept_data_loss() {
        tracing::error!(
            partition = %dir.display(),
            offsets_lost = %format!("{from}..{to}"),
            "a segment is missing: refusing to open the partition (nothing changed)"
        );
        return Err(StorageError::DataLoss {
            path: dir.to_path_buf(),
            what,
        });
    }
    let mut seg = Segment::empty(dir, from);
    let file = files::create_new(&seg.log_path).await?;
    let _ = file.close().await;
    seg.created = true;
    seg.next_offset = to;
    let bytes = seg.index_file_bytes();
    files::write_file_synced(&seg.index_path, bytes).await?;
    dirs::sync_dir(dir).await?;
    seg.sealed = true;
    tracing::error!(
        partition = %dir.display(),
        offsets_lost = %format!("{from}..{to}"),
        filler = %seg.log_path.display(),
        "a segment is missing (data loss accepted): an empty segment takes its offsets"
    );
    report.missing.push((from, to));
    Ok(Some(seg))
}
