//! Record batches: how a FetchOk carries records.
//!
//! The broker sends batches exactly as it stored them (no decode, no
//! re-encode), so this is the broker's on-disk batch format. Unlike the rest
//! of the protocol its integers are **little-endian**. `HEADER_BYTES` = 56:
//!
//! ```text
//! off size field
//!   0   8  base_offset        u64  offset of the first record
//!   8   4  batch_len          u32  bytes of the whole batch, header included
//!  12   4  crc                u32  CRC-32 (IEEE) of bytes [0,12) ++ [16,batch_len)
//!  16   1  magic              u8   = 1
//!  17   1  attributes         u8   = 0
//!  18   2  producer_epoch     i16  -1 without a producer id
//!  20   4  record_count       u32  >= 1
//!  24   4  last_offset_delta  u32  offset of the last record - base_offset
//!  28   4  base_sequence      i32  -1 without a producer id
//!  32   8  first_timestamp    i64  ms since the Unix epoch
//!  40   8  max_timestamp      i64
//!  48   8  producer_id        i64  -1 without a producer id
//!  56      records, record_count times:
//!            offset_delta u32, timestamp i64, key_len i32 (-1 = no key), key,
//!            value_len u32, value
//! ```
//!
//! [`validate`] checks a run of batches once (checksums and record framing);
//! after that [`Records`] walks it without allocating and cannot fail.

use crate::DecodeError;

/// Size of the fixed batch header.
pub const HEADER_BYTES: usize = 56;
/// Fixed bytes per record besides its key and value.
pub const RECORD_OVERHEAD_BYTES: usize = 20;
/// The batch format version.
pub const MAGIC: u8 = 1;

/// One record inside a batch, borrowed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// What [`validate`] found.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub batches: u32,
    /// Records with offsets in the `[from, below)` window given to `validate`.
    pub records: u32,
}

/// Checks that `bytes` is exactly `batches` whole batches, each with a good
/// checksum and record framing that adds up, with offsets increasing from
/// batch to batch. Counts the records in `[from, below)`.
pub fn validate(bytes: &[u8], batches: u32, from: u64, below: u64) -> Result<Summary, DecodeError> {
    scan([bytes], batches, from, below, true)
}

/// Like [`validate`] without the checksums: for batches whose checksums the
/// caller verified already (a broker serving what its storage checked).
pub fn validate_framing(bytes: &[u8], batches: u32, from: u64, below: u64) -> Result<Summary, DecodeError> {
    scan([bytes], batches, from, below, false)
}

/// Like [`validate_framing`] over batches held in several buffers, each of
/// them whole batches, to be sent back to back (a broker's reply made of
/// the buffers its storage read).
pub fn validate_framing_parts<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
    batches: u32,
    from: u64,
    below: u64,
) -> Result<Summary, DecodeError> {
    scan(parts, batches, from, below, false)
}

fn scan<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
    batches: u32,
    from: u64,
    below: u64,
    crc: bool,
) -> Result<Summary, DecodeError> {
    let mut summary = Summary::default();
    let mut next_base = 0u64;
    let mut extra = 0usize;
    for bytes in parts {
        let mut pos = 0usize;
        while pos < bytes.len() {
            if summary.batches == batches {
                extra += bytes.len() - pos;
                break;
            }
            let i = summary.batches;
            let rest = &bytes[pos..];
            let bad = |why: String| DecodeError::malformed(format!("record batch {i}: {why}"));
            if rest.len() < HEADER_BYTES {
                return Err(bad(format!(
                    "{} bytes left, a header needs {HEADER_BYTES}",
                    rest.len()
                )));
            }
            let base = u64_at(rest, 0);
            let len = u32_at(rest, 8) as usize;
            if rest[16] != MAGIC {
                return Err(bad(format!("unknown magic {}", rest[16])));
            }
            if len < HEADER_BYTES + RECORD_OVERHEAD_BYTES || len > rest.len() {
                return Err(bad(format!(
                    "length {len} does not fit the {} bytes left",
                    rest.len()
                )));
            }
            let batch = &rest[..len];
            let stored = u32_at(batch, 12);
            let actual = if crc { checksum(batch) } else { stored };
            if stored != actual {
                return Err(bad(format!(
                    "checksum mismatch: sent {stored:#010x}, computed {actual:#010x}"
                )));
            }
            if base < next_base {
                return Err(bad(format!("base offset {base} goes backwards")));
            }
            let count = u32_at(batch, 20);
            let last_delta = u32_at(batch, 24);
            next_base = base
                .checked_add(last_delta as u64 + 1)
                .ok_or_else(|| bad("offset overflow".into()))?;
            let mut prev: Option<u32> = None;
            let mut at = HEADER_BYTES;
            for _ in 0..count {
                let rec = walk(batch, at).ok_or_else(|| bad("record framing does not add up".into()))?;
                if rec.delta > last_delta || prev.is_some_and(|p| rec.delta <= p) {
                    return Err(bad("offset deltas must increase within the batch".into()));
                }
                prev = Some(rec.delta);
                at = rec.end;
                let offset = base + rec.delta as u64;
                if offset >= from && offset < below {
                    summary.records += 1;
                }
            }
            if count == 0 || at != len || prev != Some(last_delta) {
                return Err(bad("the last record must end the batch".into()));
            }
            pos += len;
            summary.batches += 1;
        }
    }
    if summary.batches < batches {
        return Err(DecodeError::malformed(format!(
            "record batch {}: 0 bytes left, a header needs {HEADER_BYTES}",
            summary.batches
        )));
    }
    if extra > 0 {
        return Err(DecodeError::malformed(format!(
            "{extra} bytes after the last record batch"
        )));
    }
    Ok(summary)
}

/// The records of validated batches with offsets in `[from, below)`.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    /// Start of the current batch, and of the next record in it.
    batch: usize,
    at: usize,
    from: u64,
    below: u64,
}

impl<'a> Records<'a> {
    /// `bytes` must have passed [`validate`]; anything else ends the walk early.
    pub fn new(bytes: &'a [u8], from: u64, below: u64) -> Records<'a> {
        Records {
            bytes,
            batch: 0,
            at: HEADER_BYTES,
            from,
            below,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = RecordRef<'a>;

    fn next(&mut self) -> Option<RecordRef<'a>> {
        loop {
            let batch = self.bytes.get(self.batch..)?;
            if batch.len() < HEADER_BYTES {
                return None;
            }
            let len = (u32_at(batch, 8) as usize).min(batch.len());
            let batch = &batch[..len];
            if self.at >= len {
                self.batch += len.max(1);
                self.at = HEADER_BYTES;
                continue;
            }
            let rec = walk(batch, self.at)?;
            self.at = rec.end;
            let offset = u64_at(batch, 0).wrapping_add(rec.delta as u64);
            if offset < self.from || offset >= self.below {
                continue;
            }
            return Some(RecordRef {
                offset,
                timestamp_ms: rec.timestamp_ms,
                key: rec.key,
                value: rec.value,
            });
        }
    }
}

/// Builds one batch record by record (a producer's side of ProduceBatch):
/// offsets deltas 0, 1, ...; `finish` writes the header and checksum.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: u32,
    first_ts: i64,
    max_ts: i64,
}

impl Default for BatchBuilder {
    fn default() -> BatchBuilder {
        BatchBuilder::with_capacity(0)
    }
}

impl BatchBuilder {
    /// A builder whose buffer holds `bytes` of records before growing.
    pub fn with_capacity(bytes: usize) -> BatchBuilder {
        let mut buf = Vec::with_capacity(HEADER_BYTES + bytes);
        buf.resize(HEADER_BYTES, 0);
        BatchBuilder {
            buf,
            count: 0,
            first_ts: 0,
            max_ts: i64::MIN,
        }
    }

    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp_ms: i64) {
        if self.count == 0 {
            self.first_ts = timestamp_ms;
        }
        self.max_ts = self.max_ts.max(timestamp_ms);
        self.buf.extend_from_slice(&self.count.to_le_bytes());
        self.buf.extend_from_slice(&timestamp_ms.to_le_bytes());
        match key {
            Some(k) => {
                self.buf.extend_from_slice(&(k.len() as i32).to_le_bytes());
                self.buf.extend_from_slice(k);
            }
            None => self.buf.extend_from_slice(&(-1i32).to_le_bytes()),
        }
        self.buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(value);
        self.count += 1;
    }

    pub fn record_count(&self) -> u32 {
        self.count
    }

    /// Bytes of the batch so far, header included.
    pub fn len_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The batch at `base_offset`, stamped with an idempotent producer's
    /// `(producer_id, epoch, base_sequence)` or none; `None` if no record
    /// was pushed.
    pub fn finish(self, base_offset: u64, producer: Option<(i64, i16, i32)>) -> Option<Vec<u8>> {
        if self.count == 0 {
            return None;
        }
        let (id, epoch, sequence) = producer.unwrap_or((-1, -1, -1));
        let mut b = self.buf;
        let len = b.len() as u32;
        b[0..8].copy_from_slice(&base_offset.to_le_bytes());
        b[8..12].copy_from_slice(&len.to_le_bytes());
        b[16] = MAGIC;
        b[17] = 0;
        b[18..20].copy_from_slice(&epoch.to_le_bytes());
        b[20..24].copy_from_slice(&self.count.to_le_bytes());
        b[24..28].copy_from_slice(&(self.count - 1).to_le_bytes());
        b[28..32].copy_from_slice(&sequence.to_le_bytes());
        b[32..40].copy_from_slice(&self.first_ts.to_le_bytes());
        b[40..48].copy_from_slice(&self.max_ts.to_le_bytes());
        b[48..56].copy_from_slice(&id.to_le_bytes());
        let crc = checksum(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        Some(b)
    }
}

/// Appends one batch holding `records` (offsets `base_offset`, +1, ...) in
/// the format above, without a producer id.
pub fn encode(base_offset: u64, records: &[RecordRef<'_>], out: &mut Vec<u8>) {
    let mut b = BatchBuilder::default();
    for r in records {
        b.push(r.key, r.value, r.timestamp_ms);
    }
    out.extend_from_slice(
        &b.finish(base_offset, None)
            .expect("a batch holds at least one record"),
    );
}

/// The producer stamp of a batch header: `(producer_id, epoch,
/// base_sequence)`, or `None` for -1.
pub fn producer_of(batch: &[u8]) -> Option<(i64, i16, i32)> {
    if batch.len() < HEADER_BYTES {
        return None;
    }
    let id = u64_at(batch, 48) as i64;
    (id != -1).then(|| {
        (
            id,
            i16::from_le_bytes([batch[18], batch[19]]),
            u32_at(batch, 28) as i32,
        )
    })
}

/// Records in a batch header.
pub fn record_count_of(batch: &[u8]) -> u32 {
    if batch.len() < HEADER_BYTES {
        0
    } else {
        u32_at(batch, 20)
    }
}

/// One record's fields and where it ends.
struct Walked<'a> {
    delta: u32,
    timestamp_ms: i64,
    key: Option<&'a [u8]>,
    value: &'a [u8],
    end: usize,
}

/// Reads the record at `at` inside `batch`; `None` if it runs past the end.
fn walk(batch: &[u8], at: usize) -> Option<Walked<'_>> {
    let fixed = batch.get(at..at.checked_add(16)?)?;
    let delta = u32_at(fixed, 0);
    let timestamp_ms = u64_at(fixed, 4) as i64;
    let key_len = u32_at(fixed, 12) as i32;
    let mut pos = at + 16;
    let key = match key_len {
        -1 => None,
        n if n < 0 => return None,
        n => {
            let k = batch.get(pos..pos.checked_add(n as usize)?)?;
            pos += n as usize;
            Some(k)
        }
    };
    let vlen = u32_at(batch.get(pos..pos.checked_add(4)?)?, 0) as usize;
    pos += 4;
    let value = batch.get(pos..pos.checked_add(vlen)?)?;
    Some(Walked {
        delta,
        timestamp_ms,
        key,
        value,
        end: pos + vlen,
    })
}

fn checksum(batch: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&batch[..12]);
    hasher.update(&batch[16..]);
    hasher.finalize()
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

    fn rec<'a>(key: Option<&'a [u8]>, value: &'a [u8], ts: i64) -> RecordRef<'a> {
        RecordRef {
            offset: 0,
            timestamp_ms: ts,
            key,
            value,
        }
    }

    fn two_batches() -> Vec<u8> {
        let mut out = Vec::new();
        encode(10, &[rec(Some(b"k"), b"a", 1), rec(None, b"", 2)], &mut out);
        encode(12, &[rec(Some(b""), b"ccc", 3)], &mut out);
        out
    }

    #[test]
    fn walks_what_it_encodes_within_the_window() {
        let bytes = two_batches();
        assert_eq!(
            validate(&bytes, 2, 0, u64::MAX).unwrap(),
            Summary {
                batches: 2,
                records: 3
            }
        );
        let all: Vec<_> = Records::new(&bytes, 0, u64::MAX).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(
            (all[0].offset, all[0].key, all[0].value),
            (10, Some(&b"k"[..]), &b"a"[..])
        );
        assert_eq!((all[1].offset, all[1].key, all[1].timestamp_ms), (11, None, 2));
        assert_eq!(
            (all[2].offset, all[2].key, all[2].value),
            (12, Some(&b""[..]), &b"ccc"[..])
        );
        let window: Vec<u64> = Records::new(&bytes, 11, 12).map(|r| r.offset).collect();
        assert_eq!(window, vec![11]);
        assert_eq!(validate(&bytes, 2, 11, 12).unwrap().records, 1);
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = two_batches();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(validate(&bad, 2, 0, u64::MAX).is_err(), "flip at {i}");
        }
        for cut in 0..bytes.len() {
            assert!(validate(&bytes[..cut], 2, 0, u64::MAX).is_err(), "cut at {cut}");
        }
        assert!(validate(&bytes, 1, 0, u64::MAX).is_err(), "trailing batch");
        assert!(validate(&bytes, 3, 0, u64::MAX).is_err(), "missing batch");
    }

    #[test]
    fn batches_out_of_order_are_refused() {
        let mut bytes = Vec::new();
        encode(12, &[rec(None, b"x", 1)], &mut bytes);
        encode(10, &[rec(None, b"y", 1)], &mut bytes);
        assert!(validate(&bytes, 2, 0, u64::MAX).is_err());
    }

    #[test]
    fn parts_split_at_batch_boundaries_read_as_one_run() {
        let bytes = two_batches();
        let first = u32_at(&bytes, 8) as usize;
        let whole = validate_framing(&bytes, 2, 11, u64::MAX).unwrap();
        let (a, b) = bytes.split_at(first);
        assert_eq!(validate_framing_parts([a, b], 2, 11, u64::MAX).unwrap(), whole);
        assert_eq!(
            validate_framing_parts([a, &[][..], b], 2, 11, u64::MAX).unwrap(),
            whole
        );
        // A part must hold whole batches, all of them and nothing more.
        for cut in 1..bytes.len() {
            if cut != first {
                let (a, b) = bytes.split_at(cut);
                assert!(
                    validate_framing_parts([a, b], 2, 0, u64::MAX).is_err(),
                    "cut at {cut}"
                );
            }
        }
        assert!(
            validate_framing_parts([a], 2, 0, u64::MAX).is_err(),
            "missing batch"
        );
        assert!(
            validate_framing_parts([a, b], 1, 0, u64::MAX).is_err(),
            "trailing batch"
        );
        assert!(
            validate_framing_parts([b, a], 2, 0, u64::MAX).is_err(),
            "out of order"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), n in 0u32..4) {
            if validate(&bytes, n, 0, u64::MAX).is_ok() {
                let _ = Records::new(&bytes, 0, u64::MAX).count();
            }
            // Unvalidated input must not panic the walker either.
            let _ = Records::new(&bytes, 0, u64::MAX).take(1000).count();
        }
    }
}
