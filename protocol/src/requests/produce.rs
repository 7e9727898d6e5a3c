//! Produce: append records to a topic. Each record names its partition, or
//! lets the broker pick one (key hash, or spread for keyless records, as in
//! the HTTP API). The answer comes only after every record is fsynced.
//!
//! ```text
//! Produce   (kind 0x02): str16 topic, u32 record_count, then per record:
//!                          i32 partition   (-1 = broker picks)
//!                          i64 timestamp   (ms since the epoch; -1 = broker clock)
//!                          i32 key_len     (-1 = no key) + key bytes
//!                          u32 value_len   + value bytes
//! ProduceOk (kind 0x82): u32 count, then per record, in request order:
//!                          u32 partition, u64 offset
//! ```

use crate::codec::{Reader, Writer};
use crate::DecodeError;

/// Fixed bytes of one record besides key and value.
pub const RECORD_OVERHEAD_BYTES: usize = 4 + 8 + 4 + 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceRecord {
    pub partition: Option<u32>,
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produce {
    pub topic: String,
    pub records: Vec<ProduceRecord>,
}

/// IdempotentProduce (kind 0x04), answered by ProduceOk (0x82):
///
/// ```text
/// i64 producer_id, i16 epoch, i32 sequence (of the first record), then a
/// Produce payload whose records all go to one partition
/// ```
///
/// A retry of a batch the partition already has is answered with the
/// original offsets and writes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotentProduce {
    pub producer_id: i64,
    pub epoch: i16,
    pub sequence: i32,
    pub produce: Produce,
}

impl IdempotentProduce {
    pub fn encode(&self, w: &mut Writer) {
        w.i64(self.producer_id);
        w.buf.extend_from_slice(&self.epoch.to_be_bytes());
        w.i32(self.sequence);
        self.produce.encode(w);
    }

    pub fn decode(r: &mut Reader) -> Result<IdempotentProduce, DecodeError> {
        let producer_id = r.i64("producer_id")?;
        let epoch = r.u16("epoch")? as i16;
        let sequence = r.i32("sequence")?;
        if producer_id < 0 || epoch < 0 || sequence < 0 {
            return Err(DecodeError::malformed(
                "producer_id, epoch and sequence must be non-negative",
            ));
        }
        Ok(IdempotentProduce {
            producer_id,
            epoch,
            sequence,
            produce: Produce::decode(r)?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceOk {
    /// (partition, offset) per record, in request order.
    pub offsets: Vec<(u32, u64)>,
}

impl Produce {
    pub fn encode(&self, w: &mut Writer) {
        w.str16(&self.topic).u32(self.records.len() as u32);
        for r in &self.records {
            w.i32(r.partition.map_or(-1, |p| p as i32))
                .i64(r.timestamp_ms.unwrap_or(-1))
                .opt_bytes(r.key.as_deref())
                .bytes32(&r.value);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Produce, DecodeError> {
        let topic = r.str16("topic")?;
        let n = r.count("record_count", RECORD_OVERHEAD_BYTES)?;
        let mut records = Vec::with_capacity(n);
        for _ in 0..n {
            let partition = match r.i32("partition")? {
                -1 => None,
                p if p < 0 => return Err(DecodeError::malformed(format!("partition {p} is negative"))),
                p => Some(p as u32),
            };
            let timestamp_ms = match r.i64("timestamp")? {
                -1 => None,
                t => Some(t),
            };
            records.push(ProduceRecord {
                partition,
                timestamp_ms,
                key: r.opt_bytes("key")?,
                value: r.bytes32("value")?,
            });
        }
        r.finish("produce")?;
        Ok(Produce { topic, records })
    }
}

impl ProduceOk {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.offsets.len() as u32);
        for (p, o) in &self.offsets {
            w.u32(*p).u64(*o);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<ProduceOk, DecodeError> {
        let n = r.count("count", 12)?;
        let mut offsets = Vec::with_capacity(n);
        for _ in 0..n {
            offsets.push((r.u32("partition")?, r.u64("offset")?));
        }
        r.finish("produce_ok")?;
        Ok(ProduceOk { offsets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Produce {
        Produce {
            topic: "orders".into(),
            records: vec![
                ProduceRecord {
                    partition: None,
                    timestamp_ms: None,
                    key: Some(b"user-42".to_vec()),
                    value: b"hello".to_vec(),
                },
                ProduceRecord {
                    partition: Some(2),
                    timestamp_ms: Some(1_700_000_000_000),
                    key: None,
                    value: vec![0, 255],
                },
            ],
        }
    }

    #[test]
    fn round_trip_and_every_truncation() {
        let mut w = Writer::new();
        sample().encode(&mut w);
        assert_eq!(Produce::decode(&mut Reader::new(&w.buf)).unwrap(), sample());
        for cut in 0..w.buf.len() {
            assert!(
                Produce::decode(&mut Reader::new(&w.buf[..cut])).is_err(),
                "cut {cut}"
            );
        }
        let mut extra = w.buf.clone();
        extra.push(0);
        assert!(Produce::decode(&mut Reader::new(&extra)).is_err());
        let ok = ProduceOk {
            offsets: vec![(0, 5), (2, 9)],
        };
        let mut w = Writer::new();
        ok.encode(&mut w);
        assert_eq!(ProduceOk::decode(&mut Reader::new(&w.buf)).unwrap(), ok);
    }

    #[test]
    fn idempotent_round_trip() {
        let p = IdempotentProduce {
            producer_id: 3,
            epoch: 1,
            sequence: 40,
            produce: sample(),
        };
        let mut w = Writer::new();
        p.encode(&mut w);
        assert_eq!(IdempotentProduce::decode(&mut Reader::new(&w.buf)).unwrap(), p);
        for cut in 0..w.buf.len() {
            assert!(IdempotentProduce::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
        let mut neg = Writer::new();
        neg.i64(-1);
        neg.buf.extend_from_slice(&[0, 0]);
        neg.i32(0);
        sample().encode(&mut neg);
        assert!(IdempotentProduce::decode(&mut Reader::new(&neg.buf)).is_err());
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        let mut w = Writer::new();
        w.str16("t").u32(u32::MAX);
        assert!(Produce::decode(&mut Reader::new(&w.buf)).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Produce::decode(&mut Reader::new(&bytes));
            let _ = ProduceOk::decode(&mut Reader::new(&bytes));
        }
    }
}
