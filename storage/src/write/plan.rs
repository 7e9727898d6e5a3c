//! The plan of a direct write: where each of its pages comes from. A
//! batch received into page-aligned memory at the in-page offset where it
//! lands (`batch_buf.rs`) is written from that memory; every other page
//! is filled by copying (from the batches, and from `RecentWrites` for the
//! bytes of earlier writes in the first page). The writer (`writer.rs`)
//! carries the plan out. Lives on the shard that owns the partition.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use glommio::io::DmaFile;

use crate::io::disk_threads::{PageBuf, ThreadedFile, WriteBuf};
use crate::io::page_buf::{page_floor, PAGE_BYTES};
use crate::write::batch_buf::{BatchBuf, Pages};
use crate::write::direct_buf::DirectBuf;
use crate::write::recent::RecentWrites;

/// A batch of a direct write once the write's position is known: in
/// memory of its own, laid out as the file's pages (`batch_buf.rs`), or
/// anywhere, then copied into the write's buffers.
pub(super) enum Placed {
    Pages(Pages),
    Buf(BatchBuf),
}

impl AsRef<[u8]> for Placed {
    fn as_ref(&self) -> &[u8] {
        match self {
            Placed::Pages(pages) => pages.as_ref(),
            Placed::Buf(buf) => buf,
        }
    }
}

impl Placed {
    pub(super) fn into_bytes(self) -> bytes::Bytes {
        match self {
            Placed::Pages(pages) => bytes::Bytes::from_owner(pages),
            Placed::Buf(buf) => buf.into_bytes(),
        }
    }
}

/// `parts`, written back to back from `pos`, each as [`Placed`]: a batch
/// received in page-aligned memory at the in-page offset where it lands
/// (`pages`: only disk threads write from such memory) gets its first
/// page's earlier bytes (the log's, held in `recent`, or the batches' of
/// this write before it) and is written as it lies. Counted
/// (`es_paged_batch_writes_total`: how often a batch received where its
/// log was expected to end landed there).
pub(super) fn place(
    parts: Vec<BatchBuf>,
    pos: u64,
    recent: &RefCell<RecentWrites>,
    pages: bool,
) -> Vec<Placed> {
    let mut placed: Vec<Placed> = Vec::with_capacity(parts.len());
    let mut at = pos;
    for part in parts {
        let len = part.len() as u64;
        if !pages || part.in_page_head().is_none() {
            placed.push(Placed::Buf(part));
            at += len;
            continue;
        }
        // The bytes before it in its page: the log's, then this write's.
        // Taken as pages if it lies after them (`into_pages` checks).
        let floor = page_floor(at);
        let mut before = vec![0; (at - floor) as usize];
        file_bytes(recent, &placed, pos, floor, &mut before);
        let outcome = match part.into_pages(&before) {
            Ok(p) => {
                placed.push(Placed::Pages(p));
                "in_place"
            }
            Err(part) => {
                placed.push(Placed::Buf(part));
                "copied"
            }
        };
        metrics::counter!("es_paged_batch_writes_total", "outcome" => outcome).increment(1);
        at += len;
    }
    placed
}

/// The bytes before `pos` in its page: earlier writes', held in `recent`.
fn earlier_bytes(recent: &RefCell<RecentWrites>, pos: u64) -> Vec<u8> {
    let floor = page_floor(pos);
    let mut held = Vec::with_capacity((pos - floor) as usize);
    recent.borrow().copy_range(floor, pos, &mut held);
    assert_eq!(held.len() as u64, pos - floor, "the partial page is held whole");
    held
}

/// Fills `out` with the file's bytes from `from` on (page aligned, inside
/// a write of `placed` at `pos`): bytes of earlier writes before `pos`
/// (held in `recent`), then the batches', then zeros past their end.
fn file_bytes(
    recent: &RefCell<RecentWrites>,
    placed: &[impl AsRef<[u8]>],
    pos: u64,
    from: u64,
    out: &mut [u8],
) {
    assert!(
        from >= page_floor(pos),
        "a write starts at the page holding its position"
    );
    let end = pos + placed.iter().map(|p| p.as_ref().len() as u64).sum::<u64>();
    let from_parts = from.max(pos);
    let skip = (from_parts - from) as usize;
    if from < from_parts {
        out[..skip].copy_from_slice(&earlier_bytes(recent, from_parts));
    }
    let data = (end.min(from + out.len() as u64).max(from_parts) - from) as usize;
    copy_out(placed, (from_parts - pos) as usize, &mut out[skip..data]);
    out[data..].fill(0);
}

/// Where each page of a direct write of `placed` at `pos` comes from: the
/// file pages of a batch in memory of its own are written from there (a
/// page two batches share, from the later one's first page, which holds
/// the earlier one's last bytes), every other page is filled by copying.
pub(super) struct Plan<'a> {
    placed: &'a [Placed],
    pos: u64,
    /// File pages `[from, to)` written from the pages of `placed[i]`, whose
    /// first page is file page `base`: in order, disjoint, page aligned.
    shared: Vec<OwnPagesRun>,
}

/// File pages `[from, to)` of a write that come from `placed[part]`'s own
/// memory, whose first page is file page `base`.
struct OwnPagesRun {
    from: u64,
    to: u64,
    part: usize,
    base: u64,
}

/// Some consecutive file pages of a write (see [`Plan::pieces`]).
enum Piece<'a> {
    /// Pages `range` of a batch's own memory.
    Shared {
        pages: &'a Arc<PageBuf>,
        range: Range<usize>,
    },
    /// The file pages `[from, to)`, copied ([`Plan::fill`]).
    Copied { from: u64, to: u64 },
}

impl<'a> Plan<'a> {
    pub(super) fn new(placed: &'a [Placed], pos: u64) -> Plan<'a> {
        let mut shared = Vec::new();
        let mut at = pos;
        for (i, part) in placed.iter().enumerate() {
            let next = at + part.as_ref().len() as u64;
            if let Placed::Pages(_) = part {
                let from = page_floor(at);
                let to = if i + 1 == placed.len() || next.is_multiple_of(PAGE_BYTES) {
                    next.next_multiple_of(PAGE_BYTES)
                } else {
                    page_floor(next)
                };
                if from < to {
                    shared.push(OwnPagesRun {
                        from,
                        to,
                        part: i,
                        base: from,
                    });
                }
            }
            at = next;
        }
        Plan { placed, pos, shared }
    }

    /// The buffer of the file pages `[from, to)` (page aligned, inside the
    /// write): pages of batches as they lie where the plan has them,
    /// copies elsewhere.
    pub(super) fn buffer(
        &self,
        file: &DmaFile,
        threads: &Option<ThreadedFile>,
        recent: &RefCell<RecentWrites>,
        from: u64,
        to: u64,
    ) -> DirectBuf {
        if threads.is_none() {
            return DirectBuf::filled(file, threads, (to - from) as usize, |out| {
                self.fill(recent, from, out)
            });
        }
        let pieces = self.pieces(from, to);
        // Every copied run of this write in one buffer of its own, as a
        // write of copies only had (so a write takes at most one of the
        // shard's kept buffers however its batches alternate).
        let copied: usize = pieces
            .iter()
            .map(|p| match p {
                Piece::Copied { from, to } => (to - from) as usize,
                Piece::Shared { .. } => 0,
            })
            .sum();
        let staging = (copied > 0).then(|| {
            let mut buf = PageBuf::for_write(copied);
            let mut at = 0;
            for p in &pieces {
                if let Piece::Copied { from, to } = p {
                    let n = (to - from) as usize;
                    self.fill(recent, *from, &mut buf[at..at + n]);
                    at += n;
                }
            }
            Arc::new(buf)
        });
        let mut at = 0;
        let bufs = pieces
            .into_iter()
            .map(|piece| match piece {
                Piece::Shared { pages, range } => WriteBuf::shared(pages, range),
                Piece::Copied { from, to } => {
                    let n = (to - from) as usize;
                    let staged = staging.as_ref().expect("copied runs have a buffer");
                    at += n;
                    WriteBuf::shared(staged, at - n..at)
                }
            })
            .collect();
        DirectBuf::Thread(WriteBuf::joined(bufs))
    }

    /// The file pages `[from, to)` (page aligned) in pieces, in order:
    /// pages of a batch's own memory, and runs of pages to copy.
    fn pieces(&self, from: u64, to: u64) -> Vec<Piece<'a>> {
        let mut pieces = Vec::new();
        let mut at = from;
        while at < to {
            let next = self.shared.iter().find(|s| s.to > at);
            match next {
                Some(s) if s.from <= at => {
                    let upto = s.to.min(to);
                    let Placed::Pages(pages) = &self.placed[s.part] else {
                        unreachable!("shared pages are a paged batch's");
                    };
                    pieces.push(Piece::Shared {
                        pages: &pages.pages,
                        range: (at - s.base) as usize..(upto - s.base) as usize,
                    });
                    at = upto;
                }
                _ => {
                    let upto = next.map_or(to, |s| s.from.min(to));
                    pieces.push(Piece::Copied { from: at, to: upto });
                    at = upto;
                }
            }
        }
        pieces
    }

    /// Fills `out` with the file's bytes from `from` (page aligned) on:
    /// bytes of earlier writes before `pos` (held in `recent`), then this
    /// write's, then zeros after its end.
    fn fill(&self, recent: &RefCell<RecentWrites>, from: u64, out: &mut [u8]) {
        file_bytes(recent, self.placed, self.pos, from, out);
    }
}

/// Copies `out.len()` bytes of the concatenation of `parts`, from byte
/// `from` on, into `out`.
fn copy_out(parts: &[impl AsRef<[u8]>], mut from: usize, out: &mut [u8]) {
    let mut filled = 0;
    for part in parts {
        let part = part.as_ref();
        if filled == out.len() {
            break;
        }
        if from >= part.len() {
            from -= part.len();
            continue;
        }
        let n = (part.len() - from).min(out.len() - filled);
        out[filled..filled + n].copy_from_slice(&part[from..from + n]);
        filled += n;
        from = 0;
    }
    assert_eq!(filled, out.len(), "parts hold the bytes asked for");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReceivingBatch;

    const PAGE: usize = PAGE_BYTES as usize;

    /// How a part of a test write arrives.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Kind {
        /// In its own pages, at the in-page offset where it lands.
        Right,
        /// In its own pages, somewhere else in the page.
        Wrong,
        /// In an ordinary buffer.
        Heap,
    }

    fn bytes(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + seed * 13 + i / 4096) as u8).collect()
    }

    /// The file bytes the plan's pieces give for pages `[from, to)`.
    fn image(plan: &Plan<'_>, recent: &RefCell<RecentWrites>, from: u64, to: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in plan.pieces(from, to) {
            match piece {
                Piece::Shared { pages, range } => out.extend_from_slice(&pages[range]),
                Piece::Copied { from, to } => {
                    let mut page = vec![0xAA; (to - from) as usize];
                    plan.fill(recent, from, &mut page);
                    out.extend_from_slice(&page);
                }
            }
        }
        out
    }

    #[test]
    fn batches_in_their_own_pages_are_written_from_there_as_a_copy_would_be() {
        let cases: &[&[(Kind, usize)]] = &[
            &[(Kind::Right, 70_000)],
            &[
                (Kind::Right, 70_000),
                (Kind::Right, 65_536),
                (Kind::Right, 81_920),
            ],
            &[(Kind::Right, 8 * PAGE), (Kind::Right, 70_001)],
            &[(Kind::Right, 70_000), (Kind::Heap, 300), (Kind::Right, 66_000)],
            &[(Kind::Heap, 5000), (Kind::Right, 66_000), (Kind::Heap, 10)],
            &[
                (Kind::Right, 70_000),
                (Kind::Wrong, 66_000),
                (Kind::Right, 66_000),
            ],
            &[(Kind::Heap, 100), (Kind::Heap, 200)],
            // Shorter than a page, within one and across a boundary.
            &[(Kind::Right, 300), (Kind::Right, 3000), (Kind::Right, 70_000)],
            &[(Kind::Right, 3000)],
        ];
        for pos in [0u64, 1000, 4000, 4095, 3 * PAGE as u64 + 17] {
            for &parts in cases {
                check_plan(pos, parts);
            }
        }
    }

    /// A write of `parts` at `pos`: the plan's pages equal a copy of the
    /// bytes, whole and cut anywhere; batches in their own pages at the
    /// right offset are written from there, nothing copied when all are.
    fn check_plan(pos: u64, parts: &[(Kind, usize)]) {
        let what = format!("at {pos}: {parts:?}");
        let floor = page_floor(pos);
        let earlier = bytes(99, (pos - floor) as usize);
        let recent = RefCell::new(RecentWrites::new(floor, 1 << 20));
        if !earlier.is_empty() {
            recent
                .borrow_mut()
                .push(floor, bytes::Bytes::from(earlier.clone()));
        }
        let mut expected = earlier.clone();
        let mut bufs = Vec::new();
        let mut at = pos;
        for (i, &(kind, len)) in parts.iter().enumerate() {
            let b = bytes(i, len);
            expected.extend_from_slice(&b);
            let in_page = (at % PAGE_BYTES) as usize;
            bufs.push(match kind {
                Kind::Heap => BatchBuf::from(b),
                Kind::Right | Kind::Wrong => {
                    let shift = if kind == Kind::Wrong { 8 } else { 0 };
                    let mut r = ReceivingBatch::new(in_page + shift, len);
                    r.extend_from_slice(&b);
                    r.finish()
                }
            });
            at += len as u64;
        }
        let end = at;
        expected.resize((end.next_multiple_of(PAGE_BYTES) - floor) as usize, 0);

        let placed = place(bufs, pos, &recent, true);
        let kinds: Vec<bool> = placed.iter().map(|p| matches!(p, Placed::Pages(_))).collect();
        let want: Vec<bool> = parts.iter().map(|(k, _)| *k == Kind::Right).collect();
        assert_eq!(kinds, want, "written as they lie: {what}");
        let plan = Plan::new(&placed, pos);
        let to = end.next_multiple_of(PAGE_BYTES);
        assert_eq!(image(&plan, &recent, floor, to), expected, "whole: {what}");
        // Any run of pages, as a write cut in pieces takes them.
        for cut in [PAGE as u64, 5 * PAGE as u64, 17 * PAGE as u64] {
            let cut = (floor + cut).min(to);
            let (a, b) = ((cut - floor) as usize, expected.len());
            assert_eq!(
                image(&plan, &recent, floor, cut),
                expected[..a],
                "head to {cut}: {what}"
            );
            assert_eq!(
                image(&plan, &recent, cut, to),
                expected[a..b],
                "tail from {cut}: {what}"
            );
        }
        // Copied pages: only where no batch of its own covers them.
        let copied: u64 = plan
            .pieces(floor, to)
            .iter()
            .map(|p| match p {
                Piece::Copied { from, to } => to - from,
                Piece::Shared { .. } => 0,
            })
            .sum();
        if want.iter().all(|&w| w) {
            assert_eq!(copied, 0, "nothing copied: {what}");
        }
        if !want.iter().any(|&w| w) {
            assert_eq!(copied, to - floor, "all copied: {what}");
        }
        // The recent bytes are the batches, wherever they lie.
        let mut got = Vec::new();
        for p in placed {
            got.extend_from_slice(&p.into_bytes());
        }
        assert_eq!(got, expected[earlier.len()..(end - floor) as usize], "{what}");
    }

    proptest::proptest! {
        #[test]
        fn any_mix_of_batches_is_planned_as_a_copy_would_be(
            pos in 0u64..3 * PAGE_BYTES,
            parts in proptest::collection::vec((0..3u8, 1usize..20_000), 1..6),
        ) {
            let parts: Vec<(Kind, usize)> = parts
                .into_iter()
                .map(|(k, len)| ([Kind::Right, Kind::Wrong, Kind::Heap][k as usize], len))
                .collect();
            check_plan(pos, &parts);
        }
    }

    #[test]
    fn a_paged_batch_through_io_uring_is_copied() {
        let recent = RefCell::new(RecentWrites::new(0, 1 << 20));
        let mut r = ReceivingBatch::new(0, 70_000);
        r.extend_from_slice(&bytes(1, 70_000));
        let placed = place(vec![r.finish()], 0, &recent, false);
        assert!(matches!(placed[..], [Placed::Buf(_)]));
        assert!(Plan::new(&placed, 0).shared.is_empty());
    }
}
