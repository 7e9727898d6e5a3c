//! `dump --exact`: the two boundary batches of a range re-encoded with
//! only the records in it, by es-format's `encode_kept` (the compaction
//! re-encoder): they keep their base offset and producer stamp, and the
//! decoder allows the gaps this leaves inside a batch, as after compaction.
//! Every batch between them is kept as stored.

use std::io::Read;

use es_format::batch::{check, encode_kept, records, BatchHeader, HEADER_V2_BYTES};
use es_format::Offset;

use crate::dump_plan::SegPlan;
use crate::dump_range::{each_batch, Range};
use crate::source::FileSource;

/// A boundary batch as re-encoded: it replaces `replaces` bytes of the
/// segment (the batch as stored) with `bytes` (empty: no record of it is
/// in the range).
#[derive(Debug, Clone)]
pub struct Reencoded {
    pub replaces: u64,
    pub bytes: Vec<u8>,
    /// The first record kept, if any.
    pub first_offset: Option<Offset>,
}

/// What a segment's entry is: the re-encoded first batch, the stored
/// bytes between, the re-encoded last batch.
impl SegPlan {
    /// The entry's length.
    pub fn entry_len(&self) -> u64 {
        let cut = |r: &Option<Reencoded>| r.as_ref().map_or(0, |r| r.replaces);
        let add = |r: &Option<Reencoded>| r.as_ref().map_or(0, |r| r.bytes.len() as u64);
        self.bytes - cut(&self.head) - cut(&self.tail) + add(&self.head) + add(&self.tail)
    }

    /// The entry's bytes, from the segment file.
    pub fn entry_reader(&self) -> std::io::Result<impl Read + '_> {
        let mut file = std::fs::File::open(&self.seg.log)?;
        let skip = self.head.as_ref().map_or(0, |r| r.replaces);
        let mid = self.bytes - skip - self.tail.as_ref().map_or(0, |r| r.replaces);
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(self.start + skip))?;
        let head = self.head.as_ref().map_or(&[][..], |r| r.bytes.as_slice());
        let tail = self.tail.as_ref().map_or(&[][..], |r| r.bytes.as_slice());
        Ok(head.chain(file.take(mid)).chain(tail))
    }
}

/// Re-encodes the first and the last batch of `segs` (a range's kept
/// segments, in offset order) with only the records in `range`.
pub fn apply(range: &Range, segs: &mut [SegPlan]) -> std::io::Result<()> {
    let n = segs.len();
    let last_pos = match segs.last() {
        Some(s) => last_batch(s)?,
        None => return Ok(()),
    };
    for (i, s) in segs.iter_mut().enumerate() {
        let first = i == 0;
        let last = i + 1 == n;
        if !first && !last {
            continue;
        }
        let (fh, fbytes) = batch_at(s, s.start)?;
        if first && last && last_pos == Some(s.start) {
            s.head = Some(keep(range, &fh, &fbytes)?);
        } else {
            if first {
                s.head = Some(keep(range, &fh, &fbytes)?);
            }
            if let (true, Some(p)) = (last, last_pos) {
                let (lh, lbytes) = batch_at(s, p)?;
                s.tail = Some(keep(range, &lh, &lbytes)?);
            }
        }
        restat(s)?;
    }
    Ok(())
}

/// The batch at `pos` of `s`'s file: its header and bytes.
fn batch_at(s: &SegPlan, pos: u64) -> std::io::Result<(BatchHeader, Vec<u8>)> {
    let f = FileSource::open(&s.seg.log)?;
    let bad = |e: es_format::BatchError| std::io::Error::other(format!("{}: {e}", s.seg.log.display()));
    // Enough for either version's header; no batch is shorter.
    let h = BatchHeader::parse(&f.read_at(pos, HEADER_V2_BYTES)?).map_err(bad)?;
    if h.raft.is_some() {
        // Cutting a Raft entry's batch would need its stamp and its
        // entry's end kept (docs/design/raft-storage.md, what is left).
        return Err(std::io::Error::other(format!(
            "{}: --exact does not cut a replicated partition's batches (version 2); dump the range without --exact",
            s.seg.log.display()
        )));
    }
    let bytes = f.read_at(pos, h.batch_len as usize)?;
    Ok((check(&bytes).map_err(bad)?, bytes))
}

/// Where the last batch kept of `s` starts.
fn last_batch(s: &SegPlan) -> std::io::Result<Option<u64>> {
    let mut last = None;
    each_batch(s, |pos, _| last = Some(pos))?;
    Ok(last)
}

/// The batch `h` (`bytes`) with only its records in `range`.
fn keep(range: &Range, h: &BatchHeader, bytes: &[u8]) -> std::io::Result<Reencoded> {
    let all = records(h, bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let kept: Vec<_> = all
        .into_iter()
        .filter(|r| range.holds(r.offset.0, r.timestamp_ms))
        .collect();
    let mut out = Vec::new();
    if !kept.is_empty() {
        encode_kept(h.base_offset, &kept, h.producer, &mut out);
    }
    Ok(Reencoded {
        replaces: h.batch_len as u64,
        bytes: out,
        first_offset: kept.first().map(|r| r.offset),
    })
}

/// `s`'s summary made that of its entry's batches.
fn restat(s: &mut SegPlan) -> std::io::Result<()> {
    let mut st = crate::dump_range::Stats::default();
    if let Some(Some(h)) = s.head.as_ref().map(|r| check(&r.bytes).ok()) {
        st.add(&h);
    }
    let from = s.start + s.head.as_ref().map_or(0, |r| r.replaces);
    let to = s.start + s.bytes - s.tail.as_ref().map_or(0, |r| r.replaces);
    each_batch(s, |pos, h| {
        if pos >= from && pos + h.batch_len as u64 <= to {
            st.add(h);
        }
    })?;
    if let Some(Some(h)) = s.tail.as_ref().map(|r| check(&r.bytes).ok()) {
        st.add(&h);
    }
    st.apply(s, true);
    if let Some(first) = s.head.as_ref().and_then(|r| r.first_offset) {
        s.seg.first_offset = Some(first);
    }
    Ok(())
}
