//! What `dump` will write, decided before its first byte (the manifest
//! comes first and lists every segment with its length): the selected
//! topics and partitions, each segment scanned as recovery scans it and
//! cut to its last valid batch, and what `--on-corrupt` makes of damage.

use std::path::{Path, PathBuf};

use es_format::scan::Tail;
use es_format::Offset;
use serde_json::{json, Value};

use crate::datadir::{self, rel, COMPACTION_SWAP};
use crate::fail::Fail;
use crate::partition::{self, Seg, Tier, Which};
use crate::report::Report;

/// `--on-corrupt`: what a bad batch that is not a torn tail does.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnCorrupt {
    /// Stop: the archive's trailer says `failed`.
    Fail,
    /// Keep the segment up to the bad batch, go on with the next segment.
    Skip,
    /// End the partition at the last good batch.
    Truncate,
}

/// Which topics and partitions.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub topics: Vec<String>,
    pub topic_prefix: Option<String>,
    pub partitions: Vec<u32>,
    pub range: crate::dump_range::Range,
}

impl Selection {
    fn topic(&self, t: &str) -> bool {
        (self.topics.is_empty() || self.topics.iter().any(|x| x == t))
            && self.topic_prefix.as_deref().is_none_or(|p| t.starts_with(p))
    }
    fn partition(&self, p: u32) -> bool {
        self.partitions.is_empty() || self.partitions.contains(&p)
    }
}

/// One segment to write: `bytes` bytes from `start` (0 but where a range
/// cut its front: `dump_range.rs`). `seg`'s summary is that of those bytes.
#[derive(Debug)]
pub struct SegPlan {
    pub seg: Seg,
    /// The base offset of the file (`seg.base` becomes the entry's name,
    /// which a range may move to the first batch kept).
    pub file_base: Offset,
    pub start: u64,
    pub bytes: u64,
    /// With `--exact`, the first and last batch as re-encoded (`dump_exact.rs`).
    pub head: Option<crate::dump_exact::Reencoded>,
    pub tail: Option<crate::dump_exact::Reencoded>,
}

/// One partition to write.
#[derive(Debug)]
pub struct PartPlan {
    pub topic: String,
    pub partition: u32,
    pub hot: Vec<SegPlan>,
    pub cold: Vec<SegPlan>,
    pub gaps: Vec<(Offset, Offset)>,
    pub trimmed_tail_bytes: u64,
}

/// One topic to write.
#[derive(Debug)]
pub struct TopicPlan {
    pub name: String,
    pub meta: Value,
    pub partitions: Vec<PartPlan>,
}

/// The whole dump.
#[derive(Debug, Default)]
pub struct Plan {
    pub topics: Vec<TopicPlan>,
    /// Corruption found (and, with `fail`, the reason the dump stops).
    pub problems: Vec<Value>,
}

pub fn plan(
    data: &Path,
    cold_root: Option<PathBuf>,
    sel: &Selection,
    on_corrupt: OnCorrupt,
) -> Result<Plan, Fail> {
    let mut out = Plan::default();
    for topic in datadir::topics(data)?.into_iter().filter(|t| sel.topic(t)) {
        let tdir = data.join("topics").join(&topic);
        let meta_path = tdir.join("meta.json");
        let meta: Value = match std::fs::read(&meta_path) {
            Ok(b) => match serde_json::from_slice(&b) {
                Ok(v) => v,
                Err(e) => {
                    out.problems
                        .push(json!({"kind": "bad_json", "file": rel(data, &meta_path),
                                             "error": format!("does not parse: {e}")}));
                    continue;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // deleted, or never created
            Err(e) => return Err(Fail::io(&meta_path, e)),
        };
        let mut tp = TopicPlan {
            name: topic.clone(),
            meta,
            partitions: Vec::new(),
        };
        for p in datadir::partitions(&tdir)?
            .into_iter()
            .filter(|&p| sel.partition(p))
        {
            let hot_dir = tdir.join(p.to_string());
            let cold_dir = cold_root.as_ref().map(|c| c.join(&topic).join(p.to_string()));
            for d in std::iter::once(&hot_dir).chain(cold_dir.as_ref()) {
                if d.join(COMPACTION_SWAP).exists() {
                    return Err(Fail(format!(
                        "an interrupted compaction swap is pending in {}: start es-broker once to finish it",
                        d.display()
                    )));
                }
            }
            let mut pp = PartPlan {
                topic: topic.clone(),
                partition: p,
                hot: Vec::new(),
                cold: Vec::new(),
                gaps: Vec::new(),
                trimmed_tail_bytes: 0,
            };
            let mut scratch = Report::default();
            let which = |tier| Which {
                root: data,
                topic: &topic,
                partition: p,
                tier,
            };
            if let Some(cd) = &cold_dir {
                let segs = partition::scan(cd, which(Tier::Cold), &mut scratch)?;
                pp.cold = cut(
                    data,
                    segs,
                    &mut pp.gaps,
                    &mut out.problems,
                    which(Tier::Cold),
                    on_corrupt,
                );
            }
            let segs = partition::scan(&hot_dir, which(Tier::Hot), &mut scratch)?;
            if let Some(last) = segs.last() {
                if matches!(last.scanned.tail, Tail::Torn(_) | Tail::Padding) {
                    pp.trimmed_tail_bytes = last.scanned.file_len - last.scanned.end;
                }
            }
            pp.hot = cut(
                data,
                segs,
                &mut pp.gaps,
                &mut out.problems,
                which(Tier::Hot),
                on_corrupt,
            );
            if !sel.range.is_all() {
                // Cold and hot in offset order; each kept segment stays in its tier.
                let mut all = std::mem::take(&mut pp.cold);
                all.append(&mut pp.hot);
                let kept = crate::dump_range::apply(&sel.range, all).map_err(|e| Fail::io(&hot_dir, e))?;
                for s in kept {
                    if s.seg.log.starts_with(&hot_dir) {
                        pp.hot.push(s);
                    } else {
                        pp.cold.push(s);
                    }
                }
            }
            tp.partitions.push(pp);
            if on_corrupt == OnCorrupt::Fail && !out.problems.is_empty() {
                out.topics.push(tp);
                return Ok(out);
            }
        }
        out.topics.push(tp);
    }
    Ok(out)
}

/// Each segment cut to its valid batches; at damage, what `on_corrupt`
/// says (the problem recorded either way).
fn cut(
    data: &Path,
    segs: Vec<Seg>,
    gaps: &mut Vec<(Offset, Offset)>,
    problems: &mut Vec<Value>,
    w: Which<'_>,
    on_corrupt: OnCorrupt,
) -> Vec<SegPlan> {
    let mut out = Vec::new();
    let next_bases: Vec<Option<Offset>> = segs.iter().skip(1).map(|s| Some(s.base)).chain([None]).collect();
    for (mut seg, next_base) in segs.into_iter().zip(next_bases) {
        let bytes = seg.scanned.end;
        let Tail::Damaged { reason, lost } = &seg.scanned.tail else {
            out.push(SegPlan {
                file_base: seg.base,
                seg,
                start: 0,
                bytes,
                head: None,
                tail: None,
            });
            continue;
        };
        let action = match on_corrupt {
            OnCorrupt::Fail => "the dump stops",
            OnCorrupt::Skip => "kept up to the bad batch; the offsets lost are a gap",
            OnCorrupt::Truncate => "the partition ends at the last good batch",
        };
        problems.push(
            json!({"kind": "corrupt_batch", "topic": w.topic, "partition": w.partition,
            "file": rel(data, &seg.log), "position": seg.scanned.end, "expected_offset": lost.from.0,
            "error": reason, "action": action}),
        );
        let to = next_base.map_or(lost.to, |b| b.max(lost.from));
        let stop = on_corrupt != OnCorrupt::Skip;
        if stop {
            seg.end_offset = seg.scanned.next_offset;
        } else {
            gaps.push((lost.from, to));
        }
        out.push(SegPlan {
            file_base: seg.base,
            seg,
            start: 0,
            bytes,
            head: None,
            tail: None,
        });
        if stop {
            break;
        }
    }
    out
}
