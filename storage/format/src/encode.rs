//! Writing batches. [`Draft`] is the one writer of the layout: room for
//! the header, then each record, then the header and checksum over them.
//! [`encode`] (the log's records), [`encode_kept`] (what compaction keeps),
//! [`encode_refs`] (borrowed records) and
//! [`BatchBuilder`](crate::batch::BatchBuilder) are built on it.

use crate::builder::BatchBuilder;
use crate::header::{BatchHeader, RaftStamp};
use crate::layout::{CRC_FIELD, HEADER_BYTES, HEADER_V2_BYTES, RECORD_OVERHEAD_BYTES};
use crate::limits::BATCH_BYTES_MAX;
use crate::{Offset, ProducerStamp, Record, RecordRef, StoredRecord};

/// The encoded size of a batch holding `records`.
pub fn encoded_len(records: &[Record]) -> usize {
    HEADER_BYTES
        + records
            .iter()
            .map(|r| record_len(r.key.as_deref(), &r.value))
            .sum::<usize>()
}

fn record_len(key: Option<&[u8]>, value: &[u8]) -> usize {
    RECORD_OVERHEAD_BYTES + key.map_or(0, <[u8]>::len) + value.len()
}

/// Encodes `records` (at least one) as a batch whose first record gets
/// `base_offset`, appending the bytes to `out`.
pub fn encode(base_offset: Offset, records: &[Record], producer: ProducerStamp, out: &mut Vec<u8>) {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let len = encoded_len(records);
    assert!(len <= BATCH_BYTES_MAX, "caller checks the batch size");
    let mut draft = Draft::begin(out, len);
    for (delta, r) in records.iter().enumerate() {
        draft.push(out, delta as u32, r.timestamp_ms, r.key.as_deref(), &r.value);
    }
    draft.finish(out, base_offset, producer);
    debug_assert_eq!(out.len() - draft.start, len);
}

/// Encodes `records` (at least one) as a version 2 batch of the Raft entry
/// `stamp` (a data batch: `stamp.control` must be false), appending the
/// bytes to `out`.
pub fn encode_v2(
    base_offset: Offset,
    records: &[Record],
    producer: ProducerStamp,
    stamp: RaftStamp,
    out: &mut Vec<u8>,
) {
    assert!(!records.is_empty(), "a batch holds at least one record");
    assert!(!stamp.control, "a data batch");
    let len = encoded_len(records) + HEADER_V2_BYTES - HEADER_BYTES;
    assert!(len <= BATCH_BYTES_MAX, "caller checks the batch size");
    let mut draft = Draft::begin_v2(out, len, stamp);
    for (delta, r) in records.iter().enumerate() {
        draft.push(out, delta as u32, r.timestamp_ms, r.key.as_deref(), &r.value);
    }
    draft.finish(out, base_offset, producer);
    debug_assert_eq!(out.len() - draft.start, len);
}

/// Encodes a zero-width control batch at `base_offset` (the offset the
/// next record will get) for the Raft entry `(term, index)`: `kind`
/// (`layout::CONTROL_BLANK`, `CONTROL_MEMBERSHIP`) then `body`. It ends its
/// entry (a control entry is one batch).
pub fn encode_control(base_offset: Offset, term: u64, index: u64, kind: u8, body: &[u8], out: &mut Vec<u8>) {
    let len = HEADER_V2_BYTES + 1 + body.len();
    assert!(len <= BATCH_BYTES_MAX, "caller checks the body size");
    let start = out.len();
    out.resize(start + HEADER_V2_BYTES, 0);
    out.push(kind);
    out.extend_from_slice(body);
    let header = BatchHeader {
        base_offset,
        batch_len: len as u32,
        crc: 0,
        record_count: 0,
        last_offset_delta: 0,
        first_timestamp_ms: 0,
        max_timestamp_ms: 0,
        producer: ProducerStamp::NONE,
        raft: Some(RaftStamp {
            term,
            index,
            control: true,
            entry_end: true,
        }),
    };
    let Some(batch) = out.get_mut(start..) else {
        return;
    };
    if let Some(room) = batch.get_mut(..HEADER_V2_BYTES) {
        room.copy_from_slice(&header.to_bytes_v2());
    }
    let crc = crate::checksum::checksum(batch);
    if let Some(field) = batch.get_mut(CRC_FIELD) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
}

/// A control batch's kind and body (`None` for a data batch or one too
/// short to have a kind).
pub fn control_body<'a>(header: &BatchHeader, batch: &'a [u8]) -> Option<(u8, &'a [u8])> {
    if !header.is_control() {
        return None;
    }
    let body = batch.get(HEADER_V2_BYTES..header.batch_len as usize)?;
    let (&kind, rest) = body.split_first()?;
    Some((kind, rest))
}

/// A version 1 batch as version 2 (a copy: the header grows by 16 bytes),
/// with Raft stamp `stamp`; a version 2 batch is copied and restamped.
/// `batch` must have passed [`check`](crate::batch::check).
pub fn upgrade(batch: &[u8], stamp: RaftStamp) -> Vec<u8> {
    let Ok(h) = BatchHeader::parse(batch) else {
        return batch.to_vec();
    };
    let records = batch
        .get(h.header_len()..h.batch_len as usize)
        .unwrap_or_default();
    let len = HEADER_V2_BYTES + records.len();
    let mut out = Vec::with_capacity(len);
    let header = BatchHeader {
        batch_len: len as u32,
        crc: 0,
        raft: Some(stamp),
        ..h
    };
    out.extend_from_slice(&header.to_bytes_v2());
    out.extend_from_slice(records);
    let crc = crate::checksum::checksum(&out);
    if let Some(field) = out.get_mut(CRC_FIELD) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// Re-encodes what is left of a batch after compaction: `records` (at least
/// one, offsets strictly increasing, all at or after `base_offset` and
/// within `u32` of it) keep their offsets, so deltas may have gaps. The
/// batch keeps its base offset and producer stamp; its last offset delta
/// becomes the last kept record's, and the timestamps are recomputed.
pub fn encode_kept(
    base_offset: Offset,
    records: &[StoredRecord],
    producer: ProducerStamp,
    out: &mut Vec<u8>,
) {
    encode_kept_with(base_offset, records, producer, None, out)
}

/// [`encode_kept`] for a version 2 batch: the rewritten batch keeps the
/// Raft stamp `stamp` (a data batch's: `stamp.control` must be false).
pub fn encode_kept_v2(
    base_offset: Offset,
    records: &[StoredRecord],
    producer: ProducerStamp,
    stamp: RaftStamp,
    out: &mut Vec<u8>,
) {
    assert!(!stamp.control, "a data batch");
    encode_kept_with(base_offset, records, producer, Some(stamp), out)
}

fn encode_kept_with(
    base_offset: Offset,
    records: &[StoredRecord],
    producer: ProducerStamp,
    raft: Option<RaftStamp>,
    out: &mut Vec<u8>,
) {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let header = if raft.is_some() {
        HEADER_V2_BYTES
    } else {
        HEADER_BYTES
    };
    let len = header
        + records
            .iter()
            .map(|r| record_len(r.key.as_deref(), &r.value))
            .sum::<usize>();
    assert!(
        len <= BATCH_BYTES_MAX,
        "a kept batch is no larger than the original"
    );
    let mut draft = Draft::begin_with(out, len, raft);
    let mut prev: Option<u32> = None;
    for r in records {
        let d = r.offset.0 - base_offset.0;
        assert!(d <= u32::MAX as u64, "a kept record stays within its batch");
        let d = d as u32;
        if let Some(p) = prev {
            assert!(d > p, "kept offsets strictly increase");
        }
        prev = Some(d);
        draft.push(out, d, r.timestamp_ms, r.key.as_deref(), &r.value);
    }
    draft.finish(out, base_offset, producer);
    debug_assert_eq!(out.len() - draft.start, len);
}

/// Appends one batch holding `records` (offsets `base_offset`, +1, ...;
/// their own `offset` fields are ignored) without a producer id: the
/// protocol's `batch::encode`.
pub fn encode_refs(base_offset: u64, records: &[RecordRef<'_>], out: &mut Vec<u8>) {
    let mut b = BatchBuilder::default();
    for r in records {
        b.push(r.key, r.value, r.timestamp_ms);
    }
    out.extend_from_slice(
        &b.finish(base_offset, None)
            .expect("a batch holds at least one record"),
    );
}

/// A batch being written at the end of a buffer: room for its header from
/// `start`, then the records pushed so far, and what the header will say
/// of them.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Draft {
    /// Where the batch starts in the buffer.
    pub start: usize,
    /// Version 2: the batch's Raft stamp (and a 72-byte header).
    raft: Option<RaftStamp>,
    pub count: u32,
    last_delta: u32,
    first_ts: i64,
    max_ts: i64,
}

impl Draft {
    /// Starts a batch at the end of `out` with room for its header, and
    /// room reserved for `len` bytes in all.
    pub(crate) fn begin(out: &mut Vec<u8>, len: usize) -> Draft {
        Self::begin_with(out, len, None)
    }

    /// Like [`begin`](Self::begin), for a version 2 batch of `stamp`'s entry.
    pub(crate) fn begin_v2(out: &mut Vec<u8>, len: usize, stamp: RaftStamp) -> Draft {
        Self::begin_with(out, len, Some(stamp))
    }

    fn begin_with(out: &mut Vec<u8>, len: usize, raft: Option<RaftStamp>) -> Draft {
        let header = if raft.is_some() {
            HEADER_V2_BYTES
        } else {
            HEADER_BYTES
        };
        let start = out.len();
        out.reserve(len.max(header));
        out.resize(start + header, 0);
        Draft {
            start,
            raft,
            count: 0,
            last_delta: 0,
            first_ts: 0,
            max_ts: i64::MIN,
        }
    }

    /// Appends one record in the layout of `layout.rs`. Deltas increase
    /// (the caller's invariant).
    pub(crate) fn push(
        &mut self,
        out: &mut Vec<u8>,
        offset_delta: u32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: &[u8],
    ) {
        if self.count == 0 {
            self.first_ts = timestamp_ms;
        }
        self.max_ts = self.max_ts.max(timestamp_ms);
        self.last_delta = offset_delta;
        self.count += 1;
        out.extend_from_slice(&offset_delta.to_le_bytes());
        out.extend_from_slice(&timestamp_ms.to_le_bytes());
        match key {
            Some(k) => {
                out.extend_from_slice(&(k.len() as i32).to_le_bytes());
                out.extend_from_slice(k);
            }
            None => out.extend_from_slice(&(-1i32).to_le_bytes()),
        }
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value);
    }

    /// Writes the header (the batch ends `out`) and then the checksum over
    /// it all. At least one record was pushed (the caller's invariant).
    pub(crate) fn finish(&self, out: &mut [u8], base_offset: Offset, producer: ProducerStamp) {
        debug_assert!(self.count > 0, "a batch holds at least one record");
        let Some(batch) = out.get_mut(self.start..) else {
            return;
        };
        let header = BatchHeader {
            base_offset,
            batch_len: batch.len() as u32,
            crc: 0,
            record_count: self.count,
            last_offset_delta: self.last_delta,
            first_timestamp_ms: self.first_ts,
            max_timestamp_ms: self.max_ts,
            producer,
            raft: self.raft,
        };
        if self.raft.is_some() {
            if let Some(room) = batch.get_mut(..HEADER_V2_BYTES) {
                room.copy_from_slice(&header.to_bytes_v2());
            }
        } else if let Some(room) = batch.get_mut(..HEADER_BYTES) {
            room.copy_from_slice(&header.to_bytes());
        }
        let crc = crate::checksum::checksum(batch);
        if let Some(field) = batch.get_mut(CRC_FIELD) {
            field.copy_from_slice(&crc.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::batch::*;
    use crate::Offset;
    use proptest::prelude::*;

    fn rec(key: Option<&[u8]>, value: &[u8], ts: i64) -> Record {
        Record {
            key: key.map(|k| k.to_vec()),
            value: value.to_vec(),
            timestamp_ms: ts,
        }
    }

    #[test]
    fn round_trip() {
        let records = vec![
            rec(Some(b"k"), b"hello", 5),
            rec(None, b"", 3),
            rec(Some(b""), b"x", 9),
        ];
        let stamp = ProducerStamp {
            producer_id: 7,
            epoch: 2,
            base_sequence: 40,
        };
        let mut buf = Vec::new();
        encode(Offset(100), &records, stamp, &mut buf);
        assert_eq!(buf.len(), encoded_len(&records));
        let h = check(&buf).unwrap();
        assert_eq!(h.base_offset, Offset(100));
        assert_eq!(h.record_count, 3);
        assert_eq!(h.next_offset(), Offset(103));
        assert_eq!(h.first_timestamp_ms, 5);
        assert_eq!(h.max_timestamp_ms, 9);
        assert_eq!(h.producer, stamp);
        let got = crate::batch::records(&h, &buf).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].offset, Offset(101));
        assert_eq!(got[1].key, None);
        assert_eq!(got[2].key, Some(vec![]));
        assert_eq!(got[0].value, b"hello");
    }

    #[test]
    fn kept_records_keep_their_offsets() {
        let records = vec![
            rec(Some(b"a"), b"1", 5),
            rec(Some(b"b"), b"2", 7),
            rec(Some(b"a"), b"3", 6),
            rec(Some(b"c"), b"", 4),
        ];
        let mut buf = Vec::new();
        encode(Offset(10), &records, ProducerStamp::NONE, &mut buf);
        let h = check(&buf).unwrap();
        let all = crate::batch::records(&h, &buf).unwrap();
        let kept = vec![all[1].clone(), all[2].clone()];
        let mut out = Vec::new();
        encode_kept(Offset(10), &kept, ProducerStamp::NONE, &mut out);
        let h2 = check(&out).unwrap();
        assert_eq!(h2.base_offset, Offset(10));
        assert_eq!(h2.record_count, 2);
        assert_eq!(h2.last_offset_delta, 2);
        assert_eq!(h2.next_offset(), Offset(13));
        assert_eq!((h2.first_timestamp_ms, h2.max_timestamp_ms), (7, 7));
        assert_eq!(crate::batch::records(&h2, &out).unwrap(), kept);
        // A gap before the first kept record is allowed too.
        let mut out = Vec::new();
        encode_kept(Offset(10), &all[3..], ProducerStamp::NONE, &mut out);
        let h3 = check(&out).unwrap();
        assert_eq!(crate::batch::records(&h3, &out).unwrap()[0].offset, Offset(13));
    }

    #[test]
    fn kept_records_of_a_version_2_batch_keep_its_stamp() {
        let records = vec![
            rec(Some(b"a"), b"1", 5),
            rec(Some(b"b"), b"2", 7),
            rec(Some(b"a"), b"3", 6),
        ];
        let stamp = RaftStamp {
            term: 4,
            index: 9,
            control: false,
            entry_end: true,
        };
        let mut buf = Vec::new();
        encode_v2(Offset(10), &records, ProducerStamp::NONE, stamp, &mut buf);
        let h = check(&buf).unwrap();
        let all = crate::batch::records(&h, &buf).unwrap();
        let mut out = Vec::new();
        encode_kept_v2(Offset(10), &all[1..], ProducerStamp::NONE, stamp, &mut out);
        let h2 = check(&out).unwrap();
        assert_eq!(h2.raft, Some(stamp));
        assert_eq!((h2.base_offset, h2.next_offset()), (Offset(10), Offset(13)));
        assert_eq!(crate::batch::records(&h2, &out).unwrap(), all[1..].to_vec());
        // Everything kept: the batch it was.
        let mut same = Vec::new();
        encode_kept_v2(Offset(10), &all, ProducerStamp::NONE, stamp, &mut same);
        assert_eq!(same, buf);
    }

    #[test]
    fn every_writer_gives_the_same_bytes() {
        let owned = vec![
            rec(Some(b"k"), b"v", 4),
            rec(None, b"", 2),
            rec(Some(b""), b"w", 9),
        ];
        let stamp = ProducerStamp {
            producer_id: 3,
            epoch: 1,
            base_sequence: 8,
        };
        let mut by_encode = Vec::new();
        encode(Offset(5), &owned, stamp, &mut by_encode);
        let mut b = BatchBuilder::default();
        for r in &owned {
            b.push(r.key.as_deref(), &r.value, r.timestamp_ms);
        }
        let by_builder = b.finish(5, Some((3, 1, 8))).unwrap();
        assert_eq!(by_builder, by_encode);
        let stored = records(&check(&by_encode).unwrap(), &by_encode).unwrap();
        let mut by_kept = Vec::new();
        encode_kept(Offset(5), &stored, stamp, &mut by_kept);
        assert_eq!(by_kept, by_encode);
        let refs: Vec<RecordRef<'_>> = owned
            .iter()
            .map(|r| RecordRef {
                offset: 0,
                timestamp_ms: r.timestamp_ms,
                key: r.key.as_deref(),
                value: &r.value,
            })
            .collect();
        let mut by_refs = vec![0xee];
        encode_refs(5, &refs, &mut by_refs);
        let mut unstamped = Vec::new();
        encode(Offset(5), &owned, ProducerStamp::NONE, &mut unstamped);
        assert_eq!(&by_refs[1..], &unstamped[..], "appended after what `out` held");
        assert!(
            BatchBuilder::default().finish(0, None).is_none(),
            "no record, no batch"
        );
    }

    proptest! {
        #[test]
        fn encode_decode(recs in proptest::collection::vec(
            (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
             proptest::collection::vec(any::<u8>(), 0..64), any::<i64>()), 1..20),
            base in 0u64..1u64<<60)
        {
            let input: Vec<Record> = recs.into_iter()
                .map(|(key, value, timestamp_ms)| Record { key, value, timestamp_ms }).collect();
            let mut buf = Vec::new();
            encode(Offset(base), &input, ProducerStamp::NONE, &mut buf);
            let h = check(&buf).unwrap();
            let got = records(&h, &buf).unwrap();
            prop_assert_eq!(got.len(), input.len());
            for (i, (g, r)) in got.iter().zip(&input).enumerate() {
                prop_assert_eq!(g.offset, Offset(base + i as u64));
                prop_assert_eq!(&g.key, &r.key);
                prop_assert_eq!(&g.value, &r.value);
                prop_assert_eq!(g.timestamp_ms, r.timestamp_ms);
            }
        }
    }
}
