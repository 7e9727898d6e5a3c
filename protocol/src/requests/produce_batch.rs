//! ProduceBatch: append one record batch, built by the producer, to one
//! partition. The broker checks it, gives it its offsets and writes it as
//! it came: no per-record decode or re-encode on the broker.
//!
//! ```text
//! ProduceBatch   (kind 0x05): str16 topic, u32 partition, then one record
//!                             batch (batch.rs) filling the rest of the payload:
//!                               base_offset 0 (the broker assigns offsets),
//!                               offset deltas 0, 1, ..., record_count - 1,
//!                               producer_id, epoch, base_sequence: all -1, or
//!                               an idempotent producer's (as IdempotentProduce)
//! ProduceBatchOk (kind 0x85): u32 partition, u64 base_offset, u32 record_count
//! ```
//!
//! The records' timestamps are the producer's. The answer comes only after
//! the batch is fsynced; an idempotent retry is answered with the original
//! base offset and writes nothing.

use crate::batch;
use crate::codec::{Reader, Writer};
use crate::DecodeError;
use es_format::batch::BatchHeader;

/// `B`: what holds the batch's bytes: a `Vec` as decoded, or memory of
/// a server's own that a large batch was received into ([`from_parts`]).
///
/// [`from_parts`]: ProduceBatch::from_parts
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceBatch<B = Vec<u8>> {
    pub topic: String,
    pub partition: u32,
    /// One record batch, its framing checked by `decode` (or built by
    /// `BatchBuilder`); its checksum is checked where it is written.
    pub batch: B,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProduceBatchOk {
    pub partition: u32,
    pub base_offset: u64,
    pub record_count: u32,
}

impl ProduceBatch {
    pub fn encode(&self, w: &mut Writer) {
        w.str16(&self.topic).u32(self.partition);
        w.buf.extend_from_slice(&self.batch);
    }

    pub fn decode(r: &mut Reader) -> Result<ProduceBatch, DecodeError> {
        let topic = r.str16("topic")?;
        let partition = r.u32("partition")?;
        let bytes = r.rest();
        check(bytes)?;
        Ok(ProduceBatch {
            topic,
            partition,
            batch: bytes.to_vec(),
        })
    }

    /// The topic and partition in front of the batch, and how many payload
    /// bytes they take, from the start of a ProduceBatch payload; `None`
    /// while `prefix` is too short to hold them. Lets a server read a large
    /// batch straight into a buffer of its own (then [`from_parts`]).
    ///
    /// [`from_parts`]: ProduceBatch::from_parts
    pub fn decode_head(prefix: &[u8]) -> Result<Option<(String, u32, usize)>, DecodeError> {
        let Some(topic_len) = prefix.first_chunk::<2>() else {
            return Ok(None);
        };
        let topic_len = u16::from_be_bytes(*topic_len) as usize;
        if prefix.len() < 2 + topic_len + 4 {
            return Ok(None);
        }
        let mut r = Reader::new(prefix);
        let topic = r.str16("topic")?;
        let partition = r.u32("partition")?;
        Ok(Some((topic, partition, r.position())))
    }
}

impl<B: AsRef<[u8]>> ProduceBatch<B> {
    /// A request from its parts, the batch checked as `decode` checks it.
    pub fn from_parts(topic: String, partition: u32, batch: B) -> Result<ProduceBatch<B>, DecodeError> {
        check(batch.as_ref())?;
        Ok(ProduceBatch {
            topic,
            partition,
            batch,
        })
    }

    /// `(producer_id, epoch, base_sequence)` of an idempotent batch.
    pub fn producer(&self) -> Option<(i64, i16, i32)> {
        batch::producer_of(self.batch.as_ref())
    }

    pub fn record_count(&self) -> u32 {
        batch::record_count_of(self.batch.as_ref())
    }

    /// The same request with its batch held by `f(batch)`.
    pub fn map_batch<C>(self, f: impl FnOnce(B) -> C) -> ProduceBatch<C> {
        ProduceBatch {
            topic: self.topic,
            partition: self.partition,
            batch: f(self.batch),
        }
    }
}

/// A produced batch: whole and framed right, offsets from 0 without gaps,
/// producer fields all -1 or all set. The checksum is left to the broker's
/// storage, which verifies it before writing (one pass over the bytes
/// instead of two): a bad one is an `invalid_request` answer, not a
/// malformed frame.
fn check(bytes: &[u8]) -> Result<(), DecodeError> {
    let summary = batch::validate_framing(bytes, 1, 0, u64::MAX)?;
    // Validated: the header parses and counts at least one record.
    let h = BatchHeader::parse(bytes)?;
    let count = h.record_count;
    let base = h.base_offset.0;
    if base != 0 {
        return Err(DecodeError::malformed(format!(
            "a produced batch has base_offset 0 (the broker assigns offsets), not {base}"
        )));
    }
    if summary.records != count || h.last_offset_delta != count - 1 {
        return Err(DecodeError::malformed(
            "a produced batch numbers its records 0, 1, ... without gaps",
        ));
    }
    let p = h.producer;
    let none = p.producer_id == -1 && p.epoch == -1 && p.base_sequence == -1;
    let idempotent = p.producer_id >= 0 && p.epoch >= 0 && p.base_sequence >= 0;
    if !none && !idempotent {
        return Err(DecodeError::malformed(
            "producer_id, epoch and base_sequence must all be -1, or all non-negative",
        ));
    }
    Ok(())
}

impl ProduceBatchOk {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.partition).u64(self.base_offset).u32(self.record_count);
    }

    pub fn decode(r: &mut Reader) -> Result<ProduceBatchOk, DecodeError> {
        let ok = ProduceBatchOk {
            partition: r.u32("partition")?,
            base_offset: r.u64("base_offset")?,
            record_count: r.u32("record_count")?,
        };
        r.finish("produce_batch_ok")?;
        Ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchBuilder;
    use proptest::prelude::*;

    fn built(producer: Option<(i64, i16, i32)>) -> Vec<u8> {
        let mut b = BatchBuilder::default();
        b.push(Some(b"k"), b"v1", 5);
        b.push(None, b"", 6);
        b.finish(0, producer).unwrap()
    }

    #[test]
    fn round_trip_and_every_truncation() {
        for producer in [None, Some((7, 1, 42))] {
            let req = ProduceBatch {
                topic: "orders".into(),
                partition: 3,
                batch: built(producer),
            };
            let mut w = Writer::new();
            req.encode(&mut w);
            let back = ProduceBatch::decode(&mut Reader::new(&w.buf)).unwrap();
            assert_eq!(back, req);
            assert_eq!((back.producer(), back.record_count()), (producer, 2));
            for cut in 0..w.buf.len() {
                assert!(
                    ProduceBatch::decode(&mut Reader::new(&w.buf[..cut])).is_err(),
                    "cut {cut}"
                );
            }
        }
        let ok = ProduceBatchOk {
            partition: 1,
            base_offset: 99,
            record_count: 2,
        };
        let mut w = Writer::new();
        ok.encode(&mut w);
        assert_eq!(ProduceBatchOk::decode(&mut Reader::new(&w.buf)).unwrap(), ok);
    }

    #[test]
    fn offsets_and_producer_fields_are_checked() {
        let encode = |batch: Vec<u8>| {
            let mut w = Writer::new();
            ProduceBatch {
                topic: "t".into(),
                partition: 0,
                batch,
            }
            .encode(&mut w);
            w.buf
        };
        let mut b = BatchBuilder::default();
        b.push(None, b"x", 1);
        let at_5 = b.clone().finish(5, None).unwrap();
        assert!(
            ProduceBatch::decode(&mut Reader::new(&encode(at_5))).is_err(),
            "base offset 5"
        );
        let half = b.finish(0, Some((3, -1, 0))).unwrap();
        assert!(
            ProduceBatch::decode(&mut Reader::new(&encode(half))).is_err(),
            "epoch -1 with an id"
        );
        let mut flipped = built(None);
        let v = flipped.windows(2).position(|w| w == b"v1").expect("a value");
        flipped[v] ^= 1;
        assert!(
            ProduceBatch::decode(&mut Reader::new(&encode(flipped))).is_ok(),
            "the checksum is the storage's to verify"
        );
        let two = [built(None), built(None)].concat();
        assert!(
            ProduceBatch::decode(&mut Reader::new(&encode(two))).is_err(),
            "two batches"
        );
    }

    #[test]
    fn head_then_parts_equals_decode() {
        let req = ProduceBatch {
            topic: "orders".into(),
            partition: 3,
            batch: built(Some((7, 1, 42))),
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        for cut in 0..2 + 6 + 4 {
            assert_eq!(
                ProduceBatch::decode_head(&w.buf[..cut]).unwrap(),
                None,
                "cut {cut}"
            );
        }
        let (topic, partition, used) = ProduceBatch::decode_head(&w.buf).unwrap().unwrap();
        assert_eq!(used, 12);
        let back = ProduceBatch::from_parts(topic, partition, w.buf[used..].to_vec()).unwrap();
        assert_eq!(back, req);
        assert!(ProduceBatch::from_parts("t".into(), 0, w.buf[used..w.buf.len() - 1].to_vec()).is_err());
        assert!(
            ProduceBatch::decode_head(&[0, 2, 0xff, 0xfe, 0, 0, 0, 0]).is_err(),
            "not UTF-8"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = ProduceBatch::decode_head(&bytes);
            let _ = ProduceBatch::decode(&mut Reader::new(&bytes));
            let _ = ProduceBatchOk::decode(&mut Reader::new(&bytes));
        }
    }
}
