//! Fetch: read a partition from an offset, optionally long-polling.
//!
//! ```text
//! Fetch   (kind 0x03): str16 topic, u32 partition,
//!                      i64 offset        (-1 = the log start offset)
//!                      u32 max_records   (1..=10000; soft: whole batches)
//!                      u32 max_bytes     (soft: at least one batch when there is one)
//!                      u32 wait_ms       (long-poll at the high watermark; <= 30000)
//! FetchOk (kind 0x83): u64 high_watermark, u64 next_offset,
//!                      u64 start_offset  (records below it are not part of the answer)
//!                      u32 batch_count, then batch_count record batches as the
//!                      broker stored them (batch.rs; little-endian inside)
//! ```
//!
//! Batches are sent whole, as stored: the first may begin before the offset
//! asked for, which is why `start_offset` says where the answer begins.
//! [`FetchOk::records`] yields only records in `[start_offset, high_watermark)`.

use crate::batch::{self, RecordRef, Records};
use crate::codec::{Reader, Writer};
use crate::{frame, DecodeError, Kind};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    pub topic: String,
    pub partition: u32,
    pub offset: Option<u64>,
    pub max_records: u32,
    pub max_bytes: u32,
    pub wait_ms: u32,
}

impl Fetch {
    pub fn encode(&self, w: &mut Writer) {
        w.str16(&self.topic)
            .u32(self.partition)
            .i64(self.offset.map_or(-1, |o| o as i64))
            .u32(self.max_records)
            .u32(self.max_bytes)
            .u32(self.wait_ms);
    }

    pub fn decode(r: &mut Reader) -> Result<Fetch, DecodeError> {
        let f = Fetch {
            topic: r.str16("topic")?,
            partition: r.u32("partition")?,
            offset: match r.i64("offset")? {
                -1 => None,
                o if o < 0 => return Err(DecodeError::malformed(format!("offset {o} is negative"))),
                o => Some(o as u64),
            },
            max_records: r.u32("max_records")?,
            max_bytes: r.u32("max_bytes")?,
            wait_ms: r.u32("wait_ms")?,
        };
        r.finish("fetch")?;
        Ok(f)
    }
}

/// An owned record, for callers that keep records past their FetchOk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
}

impl From<RecordRef<'_>> for FetchedRecord {
    fn from(r: RecordRef<'_>) -> FetchedRecord {
        FetchedRecord {
            offset: r.offset,
            timestamp_ms: r.timestamp_ms,
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.to_vec(),
        }
    }
}

/// Bytes of the FetchOk fields before the batches.
pub const FETCH_OK_FIXED_BYTES: usize = 28;
/// Room to reserve in front of batches read for a FetchOk frame: the frame
/// header and the fixed fields (see [`FetchOk::into_frame`]).
pub const FRAME_PREFIX_BYTES: usize = frame::HEADER_BYTES + FETCH_OK_FIXED_BYTES;

/// A fetch's answer: validated record batches, read in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchOk {
    pub high_watermark: u64,
    pub next_offset: u64,
    pub start_offset: u64,
    batch_count: u32,
    record_count: u32,
    /// The batches are `buf[at..]`: a decoded payload keeps its fixed
    /// fields in front, so nothing is copied out.
    buf: Vec<u8>,
    at: usize,
}

impl FetchOk {
    /// A FetchOk over `batch_count` batches in `buf[at..]`, checked the way
    /// a decoder checks them.
    pub fn new(
        high_watermark: u64,
        next_offset: u64,
        start_offset: u64,
        batch_count: u32,
        buf: Vec<u8>,
        at: usize,
    ) -> Result<FetchOk, DecodeError> {
        let fields = (high_watermark, next_offset, start_offset, batch_count);
        FetchOk::checked(fields, buf, at, batch::validate)
    }

    /// A FetchOk over batches whose checksums the caller verified already
    /// (a broker serving batches its storage checked on read); the framing
    /// is still checked.
    pub fn trusted(
        high_watermark: u64,
        next_offset: u64,
        start_offset: u64,
        batch_count: u32,
        buf: Vec<u8>,
        at: usize,
    ) -> Result<FetchOk, DecodeError> {
        let fields = (high_watermark, next_offset, start_offset, batch_count);
        FetchOk::checked(fields, buf, at, batch::validate_framing)
    }

    /// `fields`: high watermark, next offset, start offset, batch count.
    fn checked(
        (high_watermark, next_offset, start_offset, batch_count): (u64, u64, u64, u32),
        buf: Vec<u8>,
        at: usize,
        check: fn(&[u8], u32, u64, u64) -> Result<batch::Summary, DecodeError>,
    ) -> Result<FetchOk, DecodeError> {
        let bytes = buf
            .get(at..)
            .ok_or_else(|| DecodeError::malformed("batches start past the end"))?;
        let summary = check(bytes, batch_count, start_offset, high_watermark)?;
        Ok(FetchOk {
            high_watermark,
            next_offset,
            start_offset,
            batch_count,
            record_count: summary.records,
            buf,
            at,
        })
    }

    /// An answer with no records.
    pub fn empty(high_watermark: u64, next_offset: u64, start_offset: u64) -> FetchOk {
        FetchOk {
            high_watermark,
            next_offset,
            start_offset,
            batch_count: 0,
            record_count: 0,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// The records of the answer, in offset order, borrowed.
    pub fn records(&self) -> Records<'_> {
        Records::new(self.batch_bytes(), self.start_offset, self.high_watermark)
    }

    /// The records, owned.
    pub fn to_records(&self) -> Vec<FetchedRecord> {
        self.records().map(FetchedRecord::from).collect()
    }

    /// How many records [`records`](FetchOk::records) yields.
    pub fn record_count(&self) -> usize {
        self.record_count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.record_count == 0
    }

    pub fn batch_count(&self) -> u32 {
        self.batch_count
    }

    /// The record batches, back to back.
    pub fn batch_bytes(&self) -> &[u8] {
        // `at` is within `buf`: checked when the answer was made.
        self.buf.get(self.at..).unwrap_or_default()
    }

    /// Writes the fixed fields that come before the batches.
    pub fn encode_fixed(
        w: &mut Writer,
        high_watermark: u64,
        next_offset: u64,
        start_offset: u64,
        batches: u32,
    ) {
        w.u64(high_watermark)
            .u64(next_offset)
            .u64(start_offset)
            .u32(batches);
    }

    pub fn encode(&self, w: &mut Writer) {
        FetchOk::encode_fixed(
            w,
            self.high_watermark,
            self.next_offset,
            self.start_offset,
            self.batch_count,
        );
        w.buf.extend_from_slice(self.batch_bytes());
    }

    /// The whole frame for this answer. When the batches sit at exactly
    /// [`FRAME_PREFIX_BYTES`] into the buffer, the frame header and fixed
    /// fields are written into the room in front: the batches are not
    /// copied.
    pub fn into_frame(self, request_id: u64) -> Vec<u8> {
        if self.at != FRAME_PREFIX_BYTES {
            let mut w = Writer::new();
            self.encode(&mut w);
            return frame::encode(Kind::FetchOk, request_id, &w.buf, false);
        }
        let mut buf = self.buf;
        let prefix = FetchOk::frame_prefix(
            request_id,
            self.high_watermark,
            self.next_offset,
            self.start_offset,
            self.batch_count,
            buf.len() - FRAME_PREFIX_BYTES,
        );
        // The room in front of the batches (`at` == FRAME_PREFIX_BYTES).
        if let Some(room) = buf.get_mut(..FRAME_PREFIX_BYTES) {
            room.copy_from_slice(&prefix);
        }
        buf
    }

    /// The first [`FRAME_PREFIX_BYTES`] of an uncompressed FetchOk frame
    /// (frame header and fixed fields) whose `batch_count` batches take
    /// `batches_len` bytes: send the batches right after it, as they are
    /// (a broker sends the buffers its storage read, without copying them
    /// into one).
    pub fn frame_prefix(
        request_id: u64,
        high_watermark: u64,
        next_offset: u64,
        start_offset: u64,
        batch_count: u32,
        batches_len: usize,
    ) -> Vec<u8> {
        let mut w = Writer::new();
        let payload_len = FETCH_OK_FIXED_BYTES + batches_len;
        w.buf
            .extend_from_slice(&frame::header(Kind::FetchOk, request_id, payload_len, false));
        FetchOk::encode_fixed(&mut w, high_watermark, next_offset, start_offset, batch_count);
        debug_assert_eq!(w.buf.len(), FRAME_PREFIX_BYTES);
        w.buf
    }

    pub fn decode(r: &mut Reader) -> Result<FetchOk, DecodeError> {
        let rest = r.rest();
        FetchOk::decode_owned(rest.to_vec(), 0)
    }

    /// Decodes the FetchOk payload at `buf[at..]`, keeping `buf`: the
    /// batches are validated where they lie.
    pub fn decode_owned(buf: Vec<u8>, at: usize) -> Result<FetchOk, DecodeError> {
        let mut r = Reader::new(buf.get(at..).unwrap_or_default());
        let high_watermark = r.u64("high_watermark")?;
        let next_offset = r.u64("next_offset")?;
        let start_offset = r.u64("start_offset")?;
        let batch_count = r.count("batch_count", batch::HEADER_BYTES)? as u32;
        FetchOk::new(
            high_watermark,
            next_offset,
            start_offset,
            batch_count,
            buf,
            at + FETCH_OK_FIXED_BYTES,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_every_truncation() {
        let f = Fetch {
            topic: "orders".into(),
            partition: 3,
            offset: Some(10),
            max_records: 100,
            max_bytes: 1 << 20,
            wait_ms: 500,
        };
        let mut w = Writer::new();
        f.encode(&mut w);
        assert_eq!(Fetch::decode(&mut Reader::new(&w.buf)).unwrap(), f);
        for cut in 0..w.buf.len() {
            assert!(Fetch::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
        let mut batches = Vec::new();
        let rec = |offset, ts, key, value| RecordRef {
            offset,
            timestamp_ms: ts,
            key,
            value,
        };
        crate::batch::encode(
            9,
            &[rec(9, 4, None, &b"z"[..]), rec(10, 5, None, &b"a"[..])],
            &mut batches,
        );
        crate::batch::encode(11, &[rec(11, 6, Some(&b""[..]), &b""[..])], &mut batches);
        let ok = FetchOk::new(12, 12, 10, 2, batches.clone(), 0).unwrap();
        assert_eq!(ok.record_count(), 2, "offset 9 is before the start");
        let owned = ok.to_records();
        assert_eq!(
            owned,
            vec![
                FetchedRecord {
                    offset: 10,
                    timestamp_ms: 5,
                    key: None,
                    value: b"a".to_vec(),
                },
                FetchedRecord {
                    offset: 11,
                    timestamp_ms: 6,
                    key: Some(vec![]),
                    value: vec![],
                },
            ]
        );
        let mut w = Writer::new();
        ok.encode(&mut w);
        assert_eq!(
            FetchOk::decode(&mut Reader::new(&w.buf)).unwrap().to_records(),
            owned
        );
        for cut in 0..w.buf.len() {
            assert!(FetchOk::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
        // The in-place frame equals the copied one.
        let mut room = vec![0u8; FRAME_PREFIX_BYTES];
        room.extend_from_slice(&batches);
        let in_place = FetchOk::trusted(12, 12, 10, 2, room, FRAME_PREFIX_BYTES)
            .unwrap()
            .into_frame(7);
        assert_eq!(in_place, frame::encode(Kind::FetchOk, 7, &w.buf, false));
        // So is a prefix followed by the batches.
        let mut prefixed = FetchOk::frame_prefix(7, 12, 12, 10, 2, batches.len());
        prefixed.extend_from_slice(&batches);
        assert_eq!(prefixed, in_place);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Fetch::decode(&mut Reader::new(&bytes));
            let _ = FetchOk::decode(&mut Reader::new(&bytes));
        }
    }
}
