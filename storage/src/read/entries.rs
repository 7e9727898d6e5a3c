//! Reading a replicated partition's log by position: the batches of a Raft
//! entry where its log store found it, and every batch of the hot tier with
//! its place, from which that store builds its entry table at open.

use crate::batch::BatchHeader;
use crate::log::partition::PartitionLog;
use crate::read::scan::{self, FileSource, RawBatch, Scan};
use crate::{Offset, Result, StorageError};

/// A batch and where it lies: its segment's base and its position there.
#[derive(Clone, Debug)]
pub struct PlacedBatch {
    pub segment: Offset,
    pub position: u64,
    pub header: BatchHeader,
}

impl PartitionLog {
    /// The whole, checked batches in `[position, end)` of segment `base`
    /// (batch boundaries), read from recent writes or the page cache.
    pub async fn read_at(&self, base: Offset, position: u64, end: u64) -> Result<Vec<RawBatch>> {
        let shared = self.shared();
        let Some((file, path, _, written, _, recent)) = shared.reader(base, |_| position).await? else {
            return Err(StorageError::Invalid(format!(
                "segment {base} of {} is gone",
                shared.dir.display()
            )));
        };
        let src = FileSource {
            file: &file,
            path: &path,
            recent: recent.as_deref(),
        };
        let end = end.min(written);
        let (batches, damaged) =
            scan::read_batches(&src, &path, position, end, usize::MAX, |_| Scan::Take).await?;
        if let Some(d) = damaged {
            shared.report_damage(&d);
            return Err(d.error());
        }
        Ok(batches)
    }

    /// Every written batch of the hot tier, in log order, with where it
    /// lies. Reads the whole hot tier: a replicated log's store calls it
    /// once, at open.
    pub async fn placed_batches(&self) -> Result<Vec<PlacedBatch>> {
        let bases: Vec<Offset> = self.shared().segments().iter().map(|s| s.base).collect();
        let mut out = Vec::new();
        for base in bases {
            let mut position = 0;
            for b in self.read_at(base, 0, u64::MAX).await? {
                out.push(PlacedBatch {
                    segment: base,
                    position,
                    header: b.header,
                });
                position += b.header.batch_len as u64;
            }
        }
        Ok(out)
    }
}
