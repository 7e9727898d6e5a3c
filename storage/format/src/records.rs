//! The records inside a batch. [`read_record`] is the one reader of a
//! record's framing; [`walk`] the one check that a batch's records add up,
//! used by every entry point that accepts a batch ([`check_produced`],
//! [`records`], [`validate`]); [`Records`] walks batches that passed
//! [`validate`] without allocating.
//!
//! [`check_produced`]: crate::batch::check_produced
//! [`validate`]: crate::batch::validate

use crate::cursor::Cursor;
use crate::header::{self, BatchHeader};
use crate::{BatchError, RecordRef, StoredRecord};

/// One record's fields, borrowed from its batch, and where it ends.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Framed<'a> {
    pub delta: u32,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
    /// Position in the batch just past the record.
    pub end: usize,
}

/// Reads the record at `at` inside `batch` (the batch's bytes and no
/// more). `Err` names the field that runs past the end, or a negative key
/// length other than -1.
pub(crate) fn read_record(batch: &[u8], at: usize) -> Result<Framed<'_>, &'static str> {
    let mut c = Cursor::new(batch.get(at..).ok_or("truncated record")?);
    let truncated = "truncated record";
    let delta = c.u32().ok_or(truncated)?;
    let timestamp_ms = c.i64().ok_or(truncated)?;
    let key_len = c.i32().ok_or(truncated)?;
    let key = match key_len {
        -1 => None,
        n if n < 0 => return Err("negative key length"),
        n => Some(c.take(n as usize).ok_or("key")?),
    };
    let value_len = c.u32().ok_or("value length")?;
    let value = c.take(value_len as usize).ok_or("value")?;
    Ok(Framed {
        delta,
        timestamp_ms,
        key,
        value,
        end: batch.len() - c.remaining(),
    })
}

/// Walks the records of the batch `header` heads, checking their framing:
/// `record_count` records, offset deltas strictly increasing and at most
/// `last_offset_delta`, the last one that delta and ending the batch
/// exactly. Calls `f` on each record as it is read (the walk may still
/// fail after). `batch` holds the batch from its first byte; bytes past
/// `batch_len` are not looked at.
pub(crate) fn walk<'a>(
    header: &BatchHeader,
    batch: &'a [u8],
    mut f: impl FnMut(&Framed<'a>),
) -> Result<(), BatchError> {
    let end = header.batch_len as usize;
    let batch = batch.get(..end).unwrap_or(batch);
    let bad = |what: &str| BatchError::Malformed(format!("record framing: {what}"));
    if header.is_control() {
        // A control batch's body is its kind and payload: no records.
        return Ok(());
    }
    let mut at = header.header_len();
    let mut prev_delta: Option<u32> = None;
    for _ in 0..header.record_count {
        let rec = read_record(batch, at).map_err(bad)?;
        if rec.delta > header.last_offset_delta || prev_delta.is_some_and(|p| rec.delta <= p) {
            return Err(bad("offset deltas must increase and stay within the batch"));
        }
        prev_delta = Some(rec.delta);
        at = rec.end;
        f(&rec);
    }
    if at != end || prev_delta != Some(header.last_offset_delta) {
        return Err(bad("the last record must end the batch"));
    }
    Ok(())
}

/// Decodes the records of a checked batch (`batch` is exactly one batch, as
/// returned by [`check`](crate::batch::check)). Fails on framing that does
/// not add up, so a batch that passes its checksum but was built wrongly is
/// still refused.
pub fn records(header: &BatchHeader, batch: &[u8]) -> Result<Vec<StoredRecord>, BatchError> {
    let mut out = Vec::with_capacity(header.record_count as usize);
    walk(header, batch, |r| {
        out.push(StoredRecord {
            offset: header.base_offset.plus(r.delta as u64),
            timestamp_ms: r.timestamp_ms,
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.to_vec(),
        })
    })?;
    Ok(out)
}

/// The records of validated batches with offsets in `[from, below)`.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    /// Start of the current batch, and of the next record in it (0: the
    /// batch's header is not read yet).
    batch: usize,
    at: usize,
    from: u64,
    below: u64,
}

impl<'a> Records<'a> {
    /// `bytes` must have passed [`validate`](crate::batch::validate);
    /// anything else ends the walk early (never a panic).
    pub fn new(bytes: &'a [u8], from: u64, below: u64) -> Records<'a> {
        Records {
            bytes,
            batch: 0,
            at: 0,
            from,
            below,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = RecordRef<'a>;

    fn next(&mut self) -> Option<RecordRef<'a>> {
        loop {
            let rest = self.bytes.get(self.batch..)?;
            let (h, _) = header::read(rest)?;
            let len = (h.batch_len as usize).min(rest.len());
            let batch = rest.get(..len)?;
            if self.at == 0 {
                // A control batch's body holds no records: skip it.
                self.at = if h.is_control() { len } else { h.header_len() };
            }
            if self.at >= len {
                self.batch += len.max(1);
                self.at = 0;
                continue;
            }
            let rec = read_record(batch, self.at).ok()?;
            self.at = rec.end;
            let offset = h.base_offset.0.wrapping_add(rec.delta as u64);
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
