//! Kafka's RecordBatch v2 and es's batch, converted both ways
//! (docs/kafka.md, "Records").
//!
//! Produce: the records bytes of one partition (one or more v2 batches,
//! big-endian, CRC-32C) become one es batch (little-endian, CRC-32): each
//! batch's CRC-32C is checked, its records decompressed (gzip, snappy,
//! lz4, zstd) into at most a bound of bytes, and every record read with
//! its framing checked. Refused, so that bad input changes nothing:
//! magic other than 2, transactional or control batches, LogAppendTime
//! batches, records with headers (es records carry none), offset deltas
//! that are not 0, 1, 2, ..., and on a compacted topic a record without a
//! key or with an empty (not null) value, which es would read as a delete.
//!
//! Fetch: each stored es batch becomes one uncompressed v2 batch with the
//! same base offset, offset deltas and timestamps; on a compacted topic an
//! empty value goes out as null (a Kafka tombstone).
//!
//! This is es's own reader and writer, not kafka-protocol's `records`:
//! that one reserves room for as many records as a batch claims before
//! reading any and decompresses without a bound, which a hostile batch
//! turns into an abort.

use std::io::Read;

use es_format::batch::{BatchHeader, ProducerStamp, Records, HEADER_BYTES, RECORD_OVERHEAD_BYTES};
use es_format::Offset;
use es_storage::BatchBuf;
use es_storage::ReceivingBatch;

/// Why a partition's records are refused: its Kafka error code and a
/// message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: i16,
    pub message: String,
}

/// CORRUPT_MESSAGE: a CRC or framing that does not add up.
pub const CORRUPT_MESSAGE: i16 = 2;
/// MESSAGE_TOO_LARGE.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// UNSUPPORTED_COMPRESSION_TYPE.
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
/// INVALID_RECORD: records es does not store (headers, transactions).
pub const INVALID_RECORD: i16 = 87;

fn corrupt(message: impl Into<String>) -> Refused {
    Refused {
        code: CORRUPT_MESSAGE,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> Refused {
    Refused {
        code: INVALID_RECORD,
        message: message.into(),
    }
}

/// Bytes of a v2 batch before its records.
pub const KAFKA_HEADER_BYTES: usize = 61;
/// Where the CRC-32C's coverage starts (the attributes).
const CRC_FROM: usize = 21;

/// One Kafka record on its way into es.
struct Rec<'a> {
    key: Option<&'a [u8]>,
    /// `None`: Kafka's null value.
    value: Option<&'a [u8]>,
    timestamp_ms: i64,
}

/// A partition's records, converted.
#[derive(Debug)]
pub struct Converted {
    /// One es batch at base offset 0 (the log assigns the offsets).
    pub batch: BatchBuf,
    /// `(producer_id, epoch, base_sequence)` of an idempotent producer.
    pub producer: Option<(i64, i16, i32)>,
}

/// Where a Kafka batch's records lie: in the request (`owned` `None`) or
/// in a decompressed buffer; its first timestamp and record count.
struct Span {
    owned: Option<usize>,
    from: usize,
    to: usize,
    base_ts: i64,
    count: i32,
}

/// Converts the records of one partition of a Produce into one es batch.
/// `limit` bounds the decompressed bytes and the es batch. The batch is
/// written once, straight into page-aligned memory starting `in_page`
/// bytes into a page (where the partition's log is expected to end, so
/// that it is written as it lies), its checksum summed as it is written:
/// the records are read twice (checked and measured, then copied), their
/// bytes copied once.
pub fn to_es(bytes: &[u8], compacted: bool, limit: usize, in_page: usize) -> Result<Converted, Refused> {
    let mut at = 0;
    let mut producer: Option<(i64, i16, i32)> = None;
    let mut next_sequence: Option<i32> = None;
    let mut owned: Vec<Vec<u8>> = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    let mut borrowed_total = 0usize;
    // First pass: check every batch and decompress what needs it, so
    // the records below borrow from stable buffers.
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < KAFKA_HEADER_BYTES {
            return Err(corrupt("truncated record batch header"));
        }
        let batch_len = i32::from_be_bytes(rest[8..12].try_into().expect("4"));
        if batch_len < (KAFKA_HEADER_BYTES - 12) as i32 {
            return Err(corrupt(format!("record batch length {batch_len} is too small")));
        }
        let total = 12 + batch_len as usize;
        let batch = rest
            .get(..total)
            .ok_or_else(|| corrupt("record batch runs past the partition's records"))?;
        let magic = batch[16] as i8;
        if magic != 2 {
            return Err(corrupt(format!(
                "record batch magic {magic}: only v2 record batches (Kafka 0.11 and later) are accepted"
            )));
        }
        let crc = u32::from_be_bytes(batch[17..21].try_into().expect("4"));
        if crc32c::crc32c(&batch[CRC_FROM..]) != crc {
            return Err(corrupt("record batch CRC-32C mismatch"));
        }
        let attributes = i16::from_be_bytes(batch[21..23].try_into().expect("2"));
        if attributes & (1 << 4) != 0 || attributes & (1 << 5) != 0 {
            return Err(invalid(
                "transactions are not supported (transactional or control batch)",
            ));
        }
        if attributes & (1 << 3) != 0 {
            return Err(invalid("LogAppendTime batches are not accepted: send CreateTime"));
        }
        let base_ts = i64::from_be_bytes(batch[27..35].try_into().expect("8"));
        let producer_id = i64::from_be_bytes(batch[43..51].try_into().expect("8"));
        let epoch = i16::from_be_bytes(batch[51..53].try_into().expect("2"));
        let base_sequence = i32::from_be_bytes(batch[53..57].try_into().expect("4"));
        let count = i32::from_be_bytes(batch[57..61].try_into().expect("4"));
        if count < 1 {
            return Err(corrupt(format!("record batch holds {count} records")));
        }
        let last_delta = i32::from_be_bytes(batch[23..27].try_into().expect("4"));
        if last_delta != count - 1 {
            return Err(invalid("offset deltas must be 0..count-1 in a produced batch"));
        }
        // Idempotence: the partition's batches are one es batch, so
        // they must be one producer's, in sequence.
        let stamp = (producer_id >= 0).then_some((producer_id, epoch, base_sequence));
        match (at, stamp, producer, next_sequence) {
            (0, s, _, _) => producer = s,
            (_, None, None, _) => {}
            (_, Some((id, e, seq)), Some((id0, e0, _)), Some(next))
                if id == id0 && e == e0 && seq == next => {}
            _ => {
                return Err(invalid(
                    "the batches of one partition must be one producer's, in sequence",
                ))
            }
        }
        if let Some((_, _, seq)) = stamp {
            next_sequence = Some(seq.wrapping_add(count));
        }
        let payload = &batch[KAFKA_HEADER_BYTES..];
        let span_start = at + KAFKA_HEADER_BYTES;
        match attributes & 0x7 {
            0 => {
                borrowed_total += payload.len();
                spans.push(Span {
                    owned: None,
                    from: span_start,
                    to: span_start + payload.len(),
                    base_ts,
                    count,
                });
            }
            c => {
                let left = limit.saturating_sub(borrowed_total + owned.iter().map(Vec::len).sum::<usize>());
                let out = decompress(c, payload, left)?;
                spans.push(Span {
                    owned: Some(owned.len()),
                    from: 0,
                    to: out.len(),
                    base_ts,
                    count,
                });
                owned.push(out);
            }
        }
        at += total;
    }
    if spans.is_empty() {
        return Err(corrupt("no record batch in the partition's records"));
    }
    let data = |s: &Span| match s.owned {
        None => &bytes[s.from..s.to],
        Some(i) => &owned[i][s.from..s.to],
    };
    // Second pass: every record read and checked, the es batch measured.
    let too_large = || Refused {
        code: MESSAGE_TOO_LARGE,
        message: format!("the records are larger than {limit} bytes once stored"),
    };
    let mut len = HEADER_BYTES;
    let mut count = 0u32;
    let mut first_ts = None;
    let mut max_ts = i64::MIN;
    for span in &spans {
        let data = data(span);
        let mut c = Cur { b: data, at: 0 };
        for i in 0..span.count {
            let r = read_record(&mut c, i, span.base_ts)?;
            if compacted {
                if r.key.is_none() {
                    return Err(invalid(
                        "a record without a key on a compacted topic: every record needs one",
                    ));
                }
                if r.value.is_some_and(<[u8]>::is_empty) {
                    return Err(invalid(
                        "an empty (not null) value on a compacted topic would be read as a delete: send null to delete",
                    ));
                }
            }
            len += RECORD_OVERHEAD_BYTES + r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len);
            if len > limit {
                return Err(too_large());
            }
            first_ts.get_or_insert(r.timestamp_ms);
            max_ts = max_ts.max(r.timestamp_ms);
            count += 1;
        }
        if c.at != data.len() {
            return Err(corrupt("bytes left after the batch's last record"));
        }
    }
    // Third pass: the batch written, in order, its checksum summed as it goes.
    let header = BatchHeader {
        base_offset: Offset(0),
        batch_len: len as u32,
        crc: 0,
        record_count: count,
        last_offset_delta: count - 1,
        first_timestamp_ms: first_ts.unwrap_or(0),
        max_timestamp_ms: max_ts,
        producer: producer.map_or(ProducerStamp::NONE, |(producer_id, epoch, base_sequence)| {
            ProducerStamp {
                producer_id,
                epoch,
                base_sequence,
            }
        }),
        raft: None,
    };
    let mut out = ReceivingBatch::new(in_page, len);
    out.extend_from_slice(&header.to_bytes());
    let mut delta = 0u32;
    // A record's framing before its value: delta, timestamp, key length,
    // key, value length.
    let mut framing = Vec::with_capacity(64);
    for span in &spans {
        let mut c = Cur { b: data(span), at: 0 };
        for i in 0..span.count {
            let r = read_record(&mut c, i, span.base_ts)?;
            let value = r.value.unwrap_or(&[]);
            framing.clear();
            framing.extend_from_slice(&delta.to_le_bytes());
            framing.extend_from_slice(&r.timestamp_ms.to_le_bytes());
            match r.key {
                Some(k) => {
                    framing.extend_from_slice(&(k.len() as i32).to_le_bytes());
                    framing.extend_from_slice(k);
                }
                None => framing.extend_from_slice(&(-1i32).to_le_bytes()),
            }
            framing.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(&framing);
            out.extend_from_slice(value);
            delta += 1;
        }
    }
    if out.filled_len() != len {
        return Err(corrupt("the records changed between two reads"));
    }
    Ok(Converted {
        batch: out.finish_stamped(),
        producer,
    })
}

/// Reads record `i` of a batch whose first timestamp is `base_ts`.
fn read_record<'a>(c: &mut Cur<'a>, i: i32, base_ts: i64) -> Result<Rec<'a>, Refused> {
    let len = c.varint()?;
    if len < 0 {
        return Err(corrupt("negative record length"));
    }
    let start = c.at;
    let _attributes = c.take(1)?;
    let ts_delta = c.varlong()?;
    let offset_delta = c.varint()?;
    if offset_delta != i {
        return Err(invalid("offset deltas must be 0..count-1 in a produced batch"));
    }
    let key = c.nullable_bytes()?;
    let value = c.nullable_bytes()?;
    let headers = c.varint()?;
    if headers != 0 {
        return Err(invalid(
            "es records carry no headers: a record with headers is refused (docs/kafka.md)",
        ));
    }
    if c.at - start != len as usize {
        return Err(corrupt("a record's length does not match its fields"));
    }
    Ok(Rec {
        key,
        value,
        timestamp_ms: base_ts.wrapping_add(ts_delta),
    })
}

/// Decompresses `payload` (compression `codec`) into at most `limit`
/// bytes.
fn decompress(codec: i16, payload: &[u8], limit: usize) -> Result<Vec<u8>, Refused> {
    let too_large = || Refused {
        code: MESSAGE_TOO_LARGE,
        message: format!("the records are larger than {limit} bytes once decompressed"),
    };
    let bad =
        |what: &str, e: &dyn std::fmt::Display| corrupt(format!("{what} data does not decompress: {e}"));
    let mut out = Vec::new();
    match codec {
        1 => {
            let mut d = flate2::read::GzDecoder::new(payload).take(limit as u64 + 1);
            d.read_to_end(&mut out).map_err(|e| bad("gzip", &e))?;
        }
        2 => snappy(payload, limit, &mut out)?,
        3 => {
            let mut d = lz4_flex::frame::FrameDecoder::new(payload).take(limit as u64 + 1);
            d.read_to_end(&mut out).map_err(|e| bad("lz4", &e))?;
        }
        4 => {
            let d = ruzstd::decoding::StreamingDecoder::new(payload).map_err(|e| bad("zstd", &e))?;
            d.take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| bad("zstd", &e))?;
        }
        other => {
            return Err(Refused {
                code: UNSUPPORTED_COMPRESSION_TYPE,
                message: format!("compression type {other} is not one of gzip, snappy, lz4, zstd"),
            })
        }
    }
    if out.len() > limit {
        return Err(too_large());
    }
    Ok(out)
}

/// Snappy as Kafka writes it: xerial's framing (a magic header, then
/// length-prefixed raw blocks), or one raw block.
fn snappy(payload: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), Refused> {
    const MAGIC: &[u8] = b"\x82SNAPPY\x00";
    let block = |b: &[u8], out: &mut Vec<u8>| -> Result<(), Refused> {
        let n = snap::raw::decompress_len(b).map_err(|e| corrupt(format!("snappy: {e}")))?;
        if out.len() + n > limit {
            return Err(Refused {
                code: MESSAGE_TOO_LARGE,
                message: format!("the records are larger than {limit} bytes once decompressed"),
            });
        }
        let at = out.len();
        out.resize(at + n, 0);
        snap::raw::Decoder::new()
            .decompress(b, &mut out[at..])
            .map_err(|e| corrupt(format!("snappy: {e}")))?;
        Ok(())
    };
    if !payload.starts_with(MAGIC) {
        return block(payload, out);
    }
    let mut c = Cur { b: payload, at: 16 };
    if payload.len() < 16 {
        return Err(corrupt("snappy: truncated xerial header"));
    }
    while c.at < payload.len() {
        let len = u32::from_be_bytes(c.take(4)?.try_into().expect("4")) as usize;
        let b = c.take(len)?;
        block(b, out)?;
    }
    Ok(())
}

/// A reader over a record's bytes.
struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Refused> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or_else(|| corrupt("truncated record"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn uvarint(&mut self, max_bytes: usize) -> Result<u64, Refused> {
        let mut v = 0u64;
        for i in 0..max_bytes {
            let byte = *self.b.get(self.at).ok_or_else(|| corrupt("truncated varint"))?;
            self.at += 1;
            v |= ((byte & 0x7f) as u64) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("varint too long"))
    }

    fn varint(&mut self) -> Result<i32, Refused> {
        let u = self.uvarint(5)? as u32;
        Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, Refused> {
        let u = self.uvarint(10)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, Refused> {
        match self.varint()? {
            -1 => Ok(None),
            n if n < 0 => Err(corrupt("negative length")),
            n => self.take(n as usize).map(Some),
        }
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_uvarint(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn varint_len(v: i64) -> usize {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

/// One stored record's Kafka form: its body's length (what its length
/// varint says), its timestamp and offset deltas, and its value (`None`:
/// null, the tombstone of a compacted topic).
struct Out<'a> {
    body: usize,
    ts_delta: i64,
    delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl<'a> Out<'a> {
    fn of(r: &es_format::RecordRef<'a>, h: &BatchHeader, compacted: bool) -> Out<'a> {
        let ts_delta = r.timestamp_ms.wrapping_sub(h.first_timestamp_ms);
        let delta = r.offset.wrapping_sub(h.base_offset.0) as i32;
        let value = (!(compacted && r.value.is_empty())).then_some(r.value);
        let body = 1
            + varint_len(ts_delta)
            + varint_len(delta as i64)
            + r.key.map_or(1, |k| varint_len(k.len() as i64) + k.len())
            + value.map_or(1, |v| varint_len(v.len() as i64) + v.len())
            + 1;
        Out {
            body,
            ts_delta,
            delta,
            key: r.key,
            value,
        }
    }

    /// Bytes it takes, its length varint included.
    fn len(&self) -> usize {
        varint_len(self.body as i64) + self.body
    }
}

/// The stored es `batch` (one whole, checked batch), its header and its
/// bytes; `None` for a control batch, which holds no record and has no
/// Kafka form.
fn stored(batch: &[u8]) -> Result<Option<(BatchHeader, &[u8])>, String> {
    let h = BatchHeader::parse(batch).map_err(|e| e.to_string())?;
    if h.is_control() {
        return Ok(None);
    }
    let batch = batch
        .get(..h.batch_len as usize)
        .ok_or("truncated stored batch")?;
    Ok(Some((h, batch)))
}

/// How many bytes [`to_kafka`] writes for the stored `batch`: a walk
/// over its records' framing, so that a response's length prefixes are
/// written before its batches are.
pub fn kafka_len(batch: &[u8], compacted: bool) -> Result<usize, String> {
    let Some((h, batch)) = stored(batch)? else {
        return Ok(0);
    };
    let mut n = 0u32;
    let mut len = KAFKA_HEADER_BYTES;
    for r in Records::new(batch, 0, u64::MAX) {
        n += 1;
        len += Out::of(&r, &h, compacted).len();
    }
    if n != h.record_count {
        return Err(format!(
            "stored batch at {} holds {n} of {} records",
            h.base_offset.0, h.record_count
        ));
    }
    Ok(len)
}

/// Appends the Kafka v2 form of the stored es `batch` (one whole, checked
/// batch) to `out`: [`kafka_len`] bytes, none for a control batch. On a
/// `compacted` topic an empty value is a tombstone and goes out as null.
pub fn to_kafka(batch: &[u8], compacted: bool, out: &mut Vec<u8>) -> Result<(), String> {
    let Some((h, batch)) = stored(batch)? else {
        return Ok(());
    };
    let start = out.len();
    out.extend_from_slice(&(h.base_offset.0 as i64).to_be_bytes());
    out.extend_from_slice(&[0; 4]); // batch length, below
                                    // Partition leader epoch: the Raft term of the batch's entry (0 for a
                                    // standalone log's batches).
    let epoch = h.raft.map_or(0, |r| super::metadata::epoch_of(r.term));
    out.extend_from_slice(&epoch.to_be_bytes());
    out.push(2); // magic
    out.extend_from_slice(&[0; 4]); // crc, below
    out.extend_from_slice(&0i16.to_be_bytes()); // attributes: none, CreateTime
    out.extend_from_slice(&(h.last_offset_delta as i32).to_be_bytes());
    out.extend_from_slice(&h.first_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&h.max_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&h.producer.producer_id.to_be_bytes());
    out.extend_from_slice(&h.producer.epoch.to_be_bytes());
    out.extend_from_slice(&h.producer.base_sequence.to_be_bytes());
    out.extend_from_slice(&(h.record_count as i32).to_be_bytes());
    let mut n = 0u32;
    for r in Records::new(batch, 0, u64::MAX) {
        n += 1;
        let o = Out::of(&r, &h, compacted);
        put_varint(out, o.body as i32);
        out.push(0);
        put_varlong(out, o.ts_delta);
        put_varint(out, o.delta);
        match o.key {
            Some(k) => {
                put_varint(out, k.len() as i32);
                out.extend_from_slice(k);
            }
            None => put_varint(out, -1),
        }
        match o.value {
            Some(v) => {
                put_varint(out, v.len() as i32);
                out.extend_from_slice(v);
            }
            None => put_varint(out, -1),
        }
        put_varint(out, 0); // headers
    }
    if n != h.record_count {
        out.truncate(start);
        return Err(format!(
            "stored batch at {} holds {n} of {} records",
            h.base_offset.0, h.record_count
        ));
    }
    let len = (out.len() - start - 12) as i32;
    out[start + 8..start + 12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_FROM..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests;
