//! The cold tier of one partition: which of its segments live in the
//! [`ColdStore`], and reading batches from them. Lives on the partition's
//! shard, inside its `PartitionLog`.
//!
//! Offsets below the hot tier's first segment are served from here; the
//! cold segments cover `[cold start, hot start)` (a crash between the cold
//! copy and the hot delete may leave a segment in both tiers; the hot copy
//! is then the one read).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::rc::Rc;

use crate::batch::BatchHeader;
use crate::format::index::{Footer, SparseIndex};
use crate::read::scan;
use crate::read::scan::{ByteSource, Damage, RawBatch, Scan};
use crate::tier::cold::{ColdSegmentInfo, ColdStore};
use crate::{Offset, Result};

/// A cold store and the name of this partition in it (`<topic>/<partition>`),
/// handed to `PartitionLog::open_with`.
#[derive(Clone)]
pub struct ColdTier {
    pub store: Rc<dyn ColdStore>,
    pub partition: String,
}

/// What the partition knows of its cold segments.
pub(crate) struct ColdState {
    pub store: Rc<dyn ColdStore>,
    pub partition: String,
    pub segments: RefCell<BTreeMap<Offset, ColdSegment>>,
}

#[derive(Clone)]
pub(crate) struct ColdSegment {
    pub info: ColdSegmentInfo,
    /// Loaded on first read; empty when the stored index is damaged (reads
    /// then scan that segment from byte 0).
    pub index: Option<Rc<SparseIndex>>,
}

/// One step of a read in the cold tier.
pub(crate) enum ColdStep {
    /// No cold segment holds the offset (it is below them all).
    NotCovered,
    /// The segment was deleted (cold retention) while it was read: look again.
    Vanished,
    /// Batches read from the segment holding the offset; `stopped` when one
    /// at or past `upto` was met; `next`: where the read goes on.
    Read {
        batches: Vec<RawBatch>,
        stopped: bool,
        next: Offset,
        /// Where the read met bytes that are not a valid batch, if it did.
        damaged: Option<Damage>,
        /// The batch the read stopped before, over its limit: its length.
        over_limit: Option<usize>,
    },
}

struct ColdSource<'a> {
    store: &'a dyn ColdStore,
    partition: &'a str,
    base: Offset,
}

impl ByteSource for ColdSource<'_> {
    async fn read_at(&self, pos: u64, len: usize) -> Result<bytes::Bytes> {
        Ok(self.store.read(self.partition, self.base, pos, len).await?.into())
    }
}

impl ColdState {
    /// Lists what the store holds for the partition.
    pub async fn load(tier: ColdTier) -> Result<ColdState> {
        let listed = tier.store.list(&tier.partition).await?;
        let segments = listed
            .into_iter()
            .map(|info| (info.base, ColdSegment { info, index: None }))
            .collect();
        Ok(ColdState {
            store: tier.store,
            partition: tier.partition,
            segments: RefCell::new(segments),
        })
    }

    /// The first cold base, if any.
    pub fn first(&self) -> Option<Offset> {
        self.segments.borrow().keys().next().copied()
    }

    /// Bytes of all cold segments.
    pub fn bytes(&self) -> u64 {
        self.segments.borrow().values().map(|s| s.info.log_bytes).sum()
    }

    pub fn count(&self) -> usize {
        self.segments.borrow().len()
    }

    /// Reads batches holding offsets from `cursor` (below `hot_start`) up to
    /// `upto`, from the cold segment that holds `cursor`.
    pub async fn read(
        &self,
        cursor: Offset,
        budget: usize,
        limit: usize,
        upto: Offset,
        hot_start: Offset,
    ) -> Result<ColdStep> {
        let (seg, next) = {
            let segs = self.segments.borrow();
            let Some((_, seg)) = segs.range(..=cursor).next_back() else {
                return Ok(ColdStep::NotCovered);
            };
            let next = segs
                .range((Bound::Excluded(seg.info.base), Bound::Unbounded))
                .next()
                .map_or(hot_start, |(b, _)| (*b).min(hot_start));
            (seg.clone(), next)
        };
        let base = seg.info.base;
        let index = match seg.index {
            Some(ix) => ix,
            None => {
                let ix = Rc::new(self.load_index(&seg.info).await);
                if let Some(s) = self.segments.borrow_mut().get_mut(&base) {
                    s.index = Some(ix.clone());
                }
                ix
            }
        };
        let rel = cursor.0.saturating_sub(base.0).min(u32::MAX as u64) as u32;
        let start = index.floor(rel).map_or(0, |e| e.position as u64);
        let src = ColdSource {
            store: &*self.store,
            partition: &self.partition,
            base,
        };
        let path = PathBuf::from(format!("cold:{}/{:020}.log", self.partition, base.0));
        let mut stopped = false;
        let got = scan::read_batches_limited(
            &src,
            &path,
            start,
            seg.info.log_bytes,
            budget,
            limit,
            |h: &BatchHeader| {
                if h.base_offset >= upto {
                    stopped = true;
                    Scan::Stop
                } else if h.next_offset() <= cursor || h.is_control() {
                    // No reader for clients takes a control batch.
                    Scan::Skip
                } else {
                    Scan::Take
                }
            },
        )
        .await;
        let vanished = || !self.segments.borrow().contains_key(&base);
        match got {
            Ok(read) if read.damaged.is_some() && vanished() => Ok(ColdStep::Vanished),
            Ok(read) => Ok(ColdStep::Read {
                batches: read.batches,
                stopped,
                next,
                damaged: read.damaged,
                over_limit: read.over_limit,
            }),
            Err(_) if vanished() => Ok(ColdStep::Vanished),
            Err(e) => Err(e),
        }
    }

    async fn load_index(&self, info: &ColdSegmentInfo) -> SparseIndex {
        let loaded = match self.store.read_index(&self.partition, info.base).await {
            Ok(bytes) => Footer::decode(&bytes)
                .filter(|f| f.log_bytes == info.log_bytes)
                .and_then(|f| SparseIndex::decode_entries(&bytes, &f)),
            Err(e) => {
                tracing::warn!(partition = %self.partition, base = info.base.0, error = %e, "cold index unreadable");
                None
            }
        };
        loaded.unwrap_or_else(|| {
            tracing::warn!(
                partition = %self.partition,
                base = info.base.0,
                "cold index damaged; reads scan that segment from its start"
            );
            SparseIndex::default()
        })
    }
}
