//! The record batch: the unit es writes, checksums, indexes and reads.
//!
//! Byte layout (all integers little-endian), `HEADER_BYTES` = 56:
//!
//! ```text
//! off size field
//!   0   8  base_offset        u64  offset of the first record
//!   8   4  batch_len          u32  bytes of the whole batch, header included
//!  12   4  crc                u32  CRC-32 (IEEE, crc32fast) of bytes [0,12) ++ [16,batch_len)
//!  16   1  magic              u8   format version, = 1
//!  17   1  attributes         u8   reserved, = 0
//!  18   2  producer_epoch     i16  -1 without a producer id
//!  20   4  record_count       u32  >= 1
//!  24   4  last_offset_delta  u32  offset of the last record - base_offset
//!  28   4  base_sequence      i32  sequence of the first record, -1 without a producer id
//!  32   8  first_timestamp    i64  ms since the Unix epoch, of the first record
//!  40   8  max_timestamp      i64  largest record timestamp in the batch
//!  48   8  producer_id        i64  -1 without a producer id
//!  56      records, record_count times:
//!            offset_delta u32, timestamp i64, key_len i32 (-1 = no key), key,
//!            value_len u32, value
//! ```
//!
//! The checksum covers every byte but its own, so a flipped bit anywhere
//! (base offset and length included) is caught.

use crate::record::{ProducerStamp, Record, StoredRecord};
use crate::Offset;

/// Size of the fixed batch header.
pub const HEADER_BYTES: usize = 56;
/// Fixed bytes per record besides its key and value.
pub const RECORD_OVERHEAD_BYTES: usize = 20;
/// Format version written in `magic`.
pub const MAGIC: u8 = 1;
/// Largest batch the format accepts (64 MiB). This is a property of the file
/// format, not a tunable: recovery uses it to reject a garbage length, so it
/// must never shrink. Request limits in the broker are far smaller.
pub const BATCH_BYTES_MAX: usize = 64 << 20;

/// Why bytes are not a valid batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// More bytes are needed to hold the header or the whole batch.
    #[error("incomplete batch: need {needed} bytes, have {have}")]
    Incomplete { needed: usize, have: usize },
    /// The bytes can never be a valid batch.
    #[error("malformed batch: {0}")]
    Malformed(String),
}

/// The parsed fixed header of a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: Offset,
    pub batch_len: u32,
    pub crc: u32,
    pub record_count: u32,
    pub last_offset_delta: u32,
    pub first_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
    pub producer: ProducerStamp,
}

impl BatchHeader {
    /// The offset after the last record of this batch.
    pub fn next_offset(&self) -> Offset {
        self.base_offset.plus(self.last_offset_delta as u64 + 1)
    }

    /// The offset of the last record in this batch.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(self.last_offset_delta as u64)
    }

    /// Parses and sanity-checks a header from the start of `buf`. Does not
    /// verify the checksum (that needs the whole batch: see [`check`]).
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_BYTES {
            return Err(BatchError::Incomplete {
                needed: HEADER_BYTES,
                have: buf.len(),
            });
        }
        let h = BatchHeader {
            base_offset: Offset(u64_at(buf, 0)),
            batch_len: u32_at(buf, 8),
            crc: u32_at(buf, 12),
            record_count: u32_at(buf, 20),
            last_offset_delta: u32_at(buf, 24),
            first_timestamp_ms: u64_at(buf, 32) as i64,
            max_timestamp_ms: u64_at(buf, 40) as i64,
            producer: ProducerStamp {
                producer_id: u64_at(buf, 48) as i64,
                epoch: u16::from_le_bytes([buf[18], buf[19]]) as i16,
                base_sequence: u32_at(buf, 28) as i32,
            },
        };
        if buf[16] != MAGIC {
            return Err(BatchError::Malformed(format!("unknown magic {}", buf[16])));
        }
        let len = h.batch_len as usize;
        if !(HEADER_BYTES + RECORD_OVERHEAD_BYTES..=BATCH_BYTES_MAX).contains(&len) {
            return Err(BatchError::Malformed(format!("batch length {len} out of range")));
        }
        if h.record_count == 0 || h.record_count as u64 > h.last_offset_delta as u64 + 1 {
            return Err(BatchError::Malformed(format!(
                "record count {} does not fit last offset delta {}",
                h.record_count, h.last_offset_delta
            )));
        }
        if h.base_offset
            .0
            .checked_add(h.last_offset_delta as u64 + 1)
            .is_none()
        {
            return Err(BatchError::Malformed("offset overflow".into()));
        }
        Ok(h)
    }
}

/// Checks that `buf` starts with one whole, checksum-valid batch and returns
/// its header. Records inside are validated lazily by [`records`].
pub fn check(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    check_summed(buf, None)
}

/// [`check`], given the checksum of `buf`'s covered bytes if it was
/// computed as they arrived (`batch_buf.rs`): used when the batch is all of
/// `buf`, instead of reading it again.
fn check_summed(buf: &[u8], summed: Option<u32>) -> Result<BatchHeader, BatchError> {
    let h = BatchHeader::parse(buf)?;
    let len = h.batch_len as usize;
    if buf.len() < len {
        return Err(BatchError::Incomplete {
            needed: len,
            have: buf.len(),
        });
    }
    let actual = match summed {
        Some(sum) if len == buf.len() => sum,
        _ => checksum(&buf[..len]),
    };
    if actual != h.crc {
        return Err(BatchError::Malformed(format!(
            "checksum mismatch: stored {:#010x}, computed {actual:#010x}",
            h.crc
        )));
    }
    Ok(h)
}

/// The checksum a batch stores: CRC-32 of every byte but the checksum's
/// own (`[12, 16)`).
pub(crate) fn checksum(batch: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&batch[..12]);
    hasher.update(&batch[16..]);
    hasher.finalize()
}

/// The encoded size of a batch holding `records`.
pub fn encoded_len(records: &[Record]) -> usize {
    HEADER_BYTES
        + records
            .iter()
            .map(|r| RECORD_OVERHEAD_BYTES + r.key.as_ref().map_or(0, |k| k.len()) + r.value.len())
            .sum::<usize>()
}

/// Encodes `records` (at least one) as a batch whose first record gets
/// `base_offset`, appending the bytes to `out`.
pub fn encode(base_offset: Offset, records: &[Record], producer: ProducerStamp, out: &mut Vec<u8>) {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let start = out.len();
    let len = encoded_len(records);
    assert!(len <= BATCH_BYTES_MAX, "caller checks the batch size");
    out.reserve(len);
    let timestamps = records.iter().map(|r| r.timestamp_ms);
    put_header(
        out,
        base_offset,
        len,
        records.len(),
        (records.len() - 1) as u32,
        producer,
        timestamps,
    );
    for (delta, r) in records.iter().enumerate() {
        put_record(out, delta as u32, r.timestamp_ms, r.key.as_deref(), &r.value);
    }
    debug_assert_eq!(out.len() - start, len);
    let crc = checksum(&out[start..]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
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
    assert!(!records.is_empty(), "a batch holds at least one record");
    let start = out.len();
    let len = HEADER_BYTES
        + records
            .iter()
            .map(|r| RECORD_OVERHEAD_BYTES + r.key.as_ref().map_or(0, |k| k.len()) + r.value.len())
            .sum::<usize>();
    assert!(
        len <= BATCH_BYTES_MAX,
        "a kept batch is no larger than the original"
    );
    let delta = |r: &StoredRecord| -> u32 {
        let d = r.offset.0 - base_offset.0;
        assert!(d <= u32::MAX as u64, "a kept record stays within its batch");
        d as u32
    };
    let last_delta = delta(records.last().expect("not empty"));
    out.reserve(len);
    let timestamps = records.iter().map(|r| r.timestamp_ms);
    put_header(
        out,
        base_offset,
        len,
        records.len(),
        last_delta,
        producer,
        timestamps,
    );
    let mut prev: Option<u32> = None;
    for r in records {
        let d = delta(r);
        if let Some(p) = prev {
            assert!(d > p, "kept offsets strictly increase");
        }
        prev = Some(d);
        put_record(out, d, r.timestamp_ms, r.key.as_deref(), &r.value);
    }
    debug_assert_eq!(out.len() - start, len);
    let crc = checksum(&out[start..]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
}

/// Appends a batch header in the layout of the module doc, with the CRC
/// field zeroed (filled once the records follow). The first and largest
/// timestamps come from `timestamps` (at least one).
fn put_header(
    out: &mut Vec<u8>,
    base_offset: Offset,
    len: usize,
    count: usize,
    last_delta: u32,
    producer: ProducerStamp,
    mut timestamps: impl Iterator<Item = i64>,
) {
    let first_ts = timestamps.next().expect("a batch holds at least one record");
    let max_ts = timestamps.fold(first_ts, i64::max);
    out.extend_from_slice(&base_offset.0.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // crc, filled below
    out.push(MAGIC);
    out.push(0);
    out.extend_from_slice(&producer.epoch.to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out.extend_from_slice(&last_delta.to_le_bytes());
    out.extend_from_slice(&producer.base_sequence.to_le_bytes());
    out.extend_from_slice(&first_ts.to_le_bytes());
    out.extend_from_slice(&max_ts.to_le_bytes());
    out.extend_from_slice(&producer.producer_id.to_le_bytes());
}

/// Appends one record in the layout of the module doc.
fn put_record(out: &mut Vec<u8>, offset_delta: u32, timestamp_ms: i64, key: Option<&[u8]>, value: &[u8]) {
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

/// Decodes the records of a checked batch (`batch` is exactly one batch, as
/// returned by [`check`]). Fails on framing that does not add up, so a batch
/// that passes its checksum but was built wrongly is still refused.
pub fn records(header: &BatchHeader, batch: &[u8]) -> Result<Vec<StoredRecord>, BatchError> {
    let mut out = Vec::with_capacity(header.record_count as usize);
    walk(header, batch, |delta, ts, key, value| {
        out.push(StoredRecord {
            offset: header.base_offset.plus(delta as u64),
            timestamp_ms: ts,
            key: key.map(<[u8]>::to_vec),
            value: value.to_vec(),
        })
    })?;
    Ok(out)
}

/// Checks a batch a producer built, for appending as it is: one whole,
/// checksum-valid batch whose records are framed right and numbered 0, 1,
/// ... without gaps. Returns its header and whether a record has no key.
pub fn check_produced(buf: &[u8]) -> Result<(BatchHeader, bool), BatchError> {
    check_produced_summed(buf, None)
}

/// [`check_produced`], given the checksum of `buf`'s covered bytes if it
/// was computed as they arrived (`BatchBuf::received_checksum`).
pub(crate) fn check_produced_summed(
    buf: &[u8],
    summed: Option<u32>,
) -> Result<(BatchHeader, bool), BatchError> {
    let h = check_summed(buf, summed)?;
    if h.batch_len as usize != buf.len() {
        return Err(BatchError::Malformed(format!(
            "{} bytes after the batch",
            buf.len() - h.batch_len as usize
        )));
    }
    if h.last_offset_delta + 1 != h.record_count {
        return Err(BatchError::Malformed(
            "a produced batch numbers its records 0, 1, ... without gaps".into(),
        ));
    }
    let mut keyless = false;
    walk(&h, buf, |_, _, key, _| keyless |= key.is_none())?;
    Ok((h, keyless))
}

/// Gives a checked batch (its stored checksum right) its base offset and
/// the checksum that goes with it, without reading the rest of the batch:
/// CRC-32 is linear, so changing the first 8 covered bytes changes the
/// checksum by the CRC of their difference shifted past the other
/// `batch_len - 12` covered bytes (zlib's `crc32_combine`), whatever those
/// bytes are.
pub fn rebase(batch: &mut [u8], base: Offset) {
    let old: [u8; 8] = batch[0..8].try_into().expect("a checked batch has a header");
    let new = base.0.to_le_bytes();
    if old == new {
        return;
    }
    let stored = u32::from_le_bytes(batch[12..16].try_into().expect("header"));
    // Same-length inputs: the CRC's initial value and final xor cancel.
    let delta = crc32fast::hash(&old) ^ crc32fast::hash(&new);
    let mut shifted = crc32fast::Hasher::new_with_initial_len(delta, 0);
    // Covered bytes after the offset: batch_len and everything after the
    // checksum field.
    shifted.combine(&crc32fast::Hasher::new_with_initial_len(
        0,
        (batch.len() - 12) as u64,
    ));
    let crc = stored ^ shifted.finalize();
    batch[0..8].copy_from_slice(&new);
    batch[12..16].copy_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(crc, checksum(batch), "rebased checksum");
}

/// Walks the records of a checked batch, checking their framing, calling
/// `f(offset_delta, timestamp, key, value)` for each.
fn walk<'a>(
    header: &BatchHeader,
    batch: &'a [u8],
    mut f: impl FnMut(u32, i64, Option<&'a [u8]>, &'a [u8]),
) -> Result<(), BatchError> {
    let mut pos = HEADER_BYTES;
    let end = header.batch_len as usize;
    let bad = |what: &str| BatchError::Malformed(format!("record framing: {what}"));
    let mut prev_delta: Option<u32> = None;
    for _ in 0..header.record_count {
        let fixed = take(batch, &mut pos, end, 16).ok_or_else(|| bad("truncated record"))?;
        let delta = u32_at(fixed, 0);
        let ts = u64_at(fixed, 4) as i64;
        let key_len = u32_at(fixed, 12) as i32;
        if delta > header.last_offset_delta || prev_delta.is_some_and(|p| delta <= p) {
            return Err(bad("offset deltas must increase and stay within the batch"));
        }
        prev_delta = Some(delta);
        let key = match key_len {
            -1 => None,
            n if n < 0 => return Err(bad("negative key length")),
            n => Some(take(batch, &mut pos, end, n as usize).ok_or_else(|| bad("key"))?),
        };
        let vlen = take(batch, &mut pos, end, 4).ok_or_else(|| bad("value length"))?;
        let vlen = u32_at(vlen, 0) as usize;
        let value = take(batch, &mut pos, end, vlen).ok_or_else(|| bad("value"))?;
        f(delta, ts, key, value);
    }
    if pos != end || prev_delta != Some(header.last_offset_delta) {
        return Err(bad("the last record must end the batch"));
    }
    Ok(())
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, end: usize, n: usize) -> Option<&'a [u8]> {
    let stop = pos.checked_add(n)?;
    if stop > end || stop > buf.len() {
        return None;
    }
    let s = &buf[*pos..stop];
    *pos = stop;
    Some(s)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let got = super::records(&h, &buf).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].offset, Offset(101));
        assert_eq!(got[1].key, None);
        assert_eq!(got[2].key, Some(vec![]));
        assert_eq!(got[0].value, b"hello");
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let mut buf = Vec::new();
        encode(
            Offset(3),
            &[rec(Some(b"key"), b"value", 1)],
            ProducerStamp::NONE,
            &mut buf,
        );
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(check(&bad).is_err(), "flip at byte {i} not detected");
        }
    }

    #[test]
    fn every_truncation_is_incomplete_or_malformed() {
        let mut buf = Vec::new();
        encode(Offset(0), &[rec(None, b"abc", 1)], ProducerStamp::NONE, &mut buf);
        for cut in 0..buf.len() {
            assert!(matches!(check(&buf[..cut]), Err(BatchError::Incomplete { .. })));
        }
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
        let all = super::records(&h, &buf).unwrap();
        let kept = vec![all[1].clone(), all[2].clone()];
        let mut out = Vec::new();
        encode_kept(Offset(10), &kept, ProducerStamp::NONE, &mut out);
        let h2 = check(&out).unwrap();
        assert_eq!(h2.base_offset, Offset(10));
        assert_eq!(h2.record_count, 2);
        assert_eq!(h2.last_offset_delta, 2);
        assert_eq!(h2.next_offset(), Offset(13));
        assert_eq!((h2.first_timestamp_ms, h2.max_timestamp_ms), (7, 7));
        assert_eq!(super::records(&h2, &out).unwrap(), kept);
        // A gap before the first kept record is allowed too.
        let mut out = Vec::new();
        encode_kept(Offset(10), &all[3..], ProducerStamp::NONE, &mut out);
        let h3 = check(&out).unwrap();
        assert_eq!(super::records(&h3, &out).unwrap()[0].offset, Offset(13));
    }

    proptest! {
        #[test]
        fn rebase_gives_the_checksum_a_full_pass_would(
            recs in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..300), any::<i64>()), 1..12),
            from in any::<u64>(), to in any::<u64>(),
        ) {
            let input: Vec<Record> = recs.into_iter()
                .map(|(value, timestamp_ms)| Record { key: None, value, timestamp_ms }).collect();
            let mut buf = Vec::new();
            encode(Offset(from), &input, ProducerStamp::NONE, &mut buf);
            rebase(&mut buf, Offset(to));
            let mut full = buf.clone();
            let crc = checksum(&full);
            full[12..16].copy_from_slice(&crc.to_le_bytes());
            prop_assert_eq!(&buf, &full);
            let h = check(&buf).unwrap();
            prop_assert_eq!(h.base_offset, Offset(to));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(h) = check(&bytes) {
                let _ = records(&h, &bytes);
            }
        }

        #[test]
        fn arbitrary_header_with_valid_crc_never_panics(
            body in proptest::collection::vec(any::<u8>(), 0..256),
            count in 1u32..8, delta in 0u32..8,
        ) {
            // A correctly checksummed batch whose records are garbage.
            let len = HEADER_BYTES + body.len();
            let mut buf = vec![0u8; HEADER_BYTES];
            buf[8..12].copy_from_slice(&(len as u32).to_le_bytes());
            buf[16] = MAGIC;
            buf[20..24].copy_from_slice(&count.to_le_bytes());
            buf[24..28].copy_from_slice(&delta.to_le_bytes());
            buf.extend_from_slice(&body);
            let crc = checksum(&buf);
            buf[12..16].copy_from_slice(&crc.to_le_bytes());
            if let Ok(h) = check(&buf) {
                let _ = records(&h, &buf);
            }
        }

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
