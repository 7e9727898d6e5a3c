//! `RecentWrites`: the newest bytes of the active segment, kept in memory.
//! Lives on the shard that owns the partition, beside the segment's writer.
//!
//! The log writes with direct I/O (see `writer.rs`), so what it writes never
//! passes through the kernel's page cache. Two things then need these bytes
//! in memory:
//!
//! 1. the writer: direct I/O writes whole pages, so every write starts at
//!    the page holding the end of the log and rewrites that page's bytes,
//!    which come from here;
//! 2. readers that tail the log: what was just written is served from here
//!    instead of being read back from the disk.
//!
//! Invariant: the bytes from the page boundary at or below `end` up to
//! `end` are always held (eviction never crosses it), so the writer always
//! finds its partial page. Chunks are the writer's writes, back to back, so
//! a read inside one chunk is a shared slice and copies nothing.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::io::page_buf::page_floor;

#[derive(Debug)]
pub(crate) struct RecentWrites {
    /// (file position of the chunk's first byte, its bytes), back to back.
    chunks: VecDeque<(u64, Bytes)>,
    /// Position of the first byte held (== `end` when nothing is held).
    start: u64,
    /// Position after the last byte held: the segment's written length.
    end: u64,
    held_bytes: usize,
    /// Keep at most this many bytes, beyond the partial page.
    cap_bytes: usize,
    /// What the shard's budget (`recent_budget.rs`) counts for this one.
    pub(crate) charged_bytes: usize,
    /// In the budget's queue; written to since the budget last passed it.
    pub(crate) queued: bool,
    pub(crate) referenced: bool,
}

impl Drop for RecentWrites {
    fn drop(&mut self) {
        crate::write::recent_budget::uncharge(self.charged_bytes);
    }
}

impl RecentWrites {
    /// Nothing held yet; the segment's written bytes end at `end`.
    pub fn new(end: u64, cap_bytes: usize) -> RecentWrites {
        RecentWrites {
            chunks: VecDeque::new(),
            start: end,
            end,
            held_bytes: 0,
            cap_bytes,
            charged_bytes: 0,
            queued: false,
            referenced: false,
        }
    }

    /// Bytes held now.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    /// Appends the bytes written at `pos` (which must be `end`), then
    /// forgets the oldest chunks beyond the cap, never one that reaches
    /// into the page holding the new end.
    pub fn push(&mut self, pos: u64, bytes: Bytes) {
        assert_eq!(pos, self.end, "recent writes are back to back");
        if bytes.is_empty() {
            return;
        }
        if self.chunks.is_empty() {
            self.start = pos;
        }
        self.end = pos + bytes.len() as u64;
        self.held_bytes += bytes.len();
        self.chunks.push_back((pos, bytes));
        self.evict_beyond(self.cap_bytes);
    }

    /// Forgets every chunk it may: all but those reaching into the page
    /// holding the end (the shard's budget calls this on partitions it
    /// takes memory from).
    pub fn trim(&mut self) {
        self.evict_beyond(0);
    }

    /// Forgets the oldest chunks while more than `cap` bytes are held,
    /// never one that reaches into the page holding the end.
    fn evict_beyond(&mut self, cap: usize) {
        let keep_from = page_floor(self.end);
        while self.held_bytes > cap {
            let Some((at, front)) = self.chunks.front() else {
                break;
            };
            if at + front.len() as u64 > keep_from {
                break;
            }
            self.held_bytes -= front.len();
            self.chunks.pop_front();
            self.start = self.chunks.front().map_or(self.end, |(at, _)| *at);
        }
    }

    /// Holds nothing, the segment's written bytes now ending at `end`
    /// (a buffered writer: the page cache has them).
    pub fn forget_upto(&mut self, end: u64) {
        assert!(end >= self.end, "the written end only grows");
        self.chunks.clear();
        self.held_bytes = 0;
        self.start = end;
        self.end = end;
    }

    /// The held bytes from `pos` up to at most `len` bytes (fewer at the
    /// end): a shared slice when one chunk holds them all, else a copy.
    /// `pos` must be held (`start <= pos <= end`).
    pub fn read(&self, pos: u64, len: usize) -> Bytes {
        assert!(self.start <= pos && pos <= self.end, "read of bytes not held");
        let upto = (pos + len as u64).min(self.end);
        if upto == pos {
            return Bytes::new();
        }
        // The chunk holding `pos`: the last one starting at or before it.
        let first = self.chunks.partition_point(|(at, _)| *at <= pos) - 1;
        let (at, chunk) = &self.chunks[first];
        let chunk_end = at + chunk.len() as u64;
        if upto <= chunk_end {
            return chunk.slice((pos - at) as usize..(upto - at) as usize);
        }
        let mut out = Vec::with_capacity((upto - pos) as usize);
        self.copy_range(pos, upto, &mut out);
        Bytes::from(out)
    }

    /// Appends the held bytes `[from, to)` to `out`.
    pub fn copy_range(&self, from: u64, to: u64, out: &mut Vec<u8>) {
        assert!(
            self.start <= from && from <= to && to <= self.end,
            "copy of bytes not held"
        );
        if from == to {
            return;
        }
        let first = self.chunks.partition_point(|(at, _)| *at <= from) - 1;
        for (at, chunk) in self.chunks.range(first..) {
            if *at >= to {
                break;
            }
            let lo = from.max(*at) - at;
            let hi = to.min(at + chunk.len() as u64) - at;
            out.extend_from_slice(&chunk[lo as usize..hi as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::page_buf::PAGE_BYTES;

    fn filled(len: usize, seed: u8) -> Bytes {
        Bytes::from((0..len).map(|i| seed.wrapping_add(i as u8)).collect::<Vec<u8>>())
    }

    #[test]
    fn reads_within_one_chunk_share_it_and_across_chunks_copy() {
        let mut r = RecentWrites::new(0, 1 << 20);
        let a = filled(100, 1);
        let b = filled(50, 7);
        r.push(0, a.clone());
        r.push(100, b.clone());
        let inside = r.read(10, 20);
        assert_eq!(&inside[..], &a[10..30]);
        assert_eq!(inside.as_ptr(), a[10..].as_ptr(), "no copy inside one chunk");
        let across = r.read(90, 30);
        assert_eq!(&across[..10], &a[90..]);
        assert_eq!(&across[10..], &b[..20]);
        assert_eq!(r.read(140, 100).len(), 10, "fewer at the end");
        assert!(r.read(150, 10).is_empty());
    }

    #[test]
    fn eviction_keeps_the_cap_but_never_the_partial_page() {
        let mut r = RecentWrites::new(0, 1000);
        for i in 0..10u64 {
            r.push(i * 1000, filled(1000, i as u8));
        }
        // 10_000 bytes written: the page holding the end starts at 8192,
        // inside the chunk at 8000, so that chunk and the last stay.
        assert_eq!(r.start(), 8000);
        assert!(r.start() <= page_floor(r.end()));
        let mut out = Vec::new();
        r.copy_range(page_floor(r.end()), r.end(), &mut out);
        assert_eq!(out.len(), (10_000 - 8192) as usize);
        // Small writes: each chunk that ends below the page boundary goes.
        let mut r = RecentWrites::new(4096, 0);
        for i in 0..100u64 {
            r.push(4096 + i * 100, filled(100, 3));
            assert!(r.start() <= page_floor(r.end()));
            assert!(r.end() - r.start() < PAGE_BYTES + 100);
        }
    }

    #[test]
    fn starts_where_the_segment_ends() {
        let mut r = RecentWrites::new(12_345, 10);
        assert_eq!((r.start(), r.end()), (12_345, 12_345));
        assert!(r.read(12_345, 10).is_empty());
        r.push(12_345, filled(5, 0));
        assert_eq!(r.read(12_346, 10).len(), 4);
    }
}
