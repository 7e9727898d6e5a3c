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
            assert!(Produce::decode(&mut Reader::new(&w.buf[..cut])).is_err(), "cut {cut}");
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
