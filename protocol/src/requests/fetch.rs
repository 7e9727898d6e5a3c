//! Fetch: read a partition from an offset, optionally long-polling.
//!
//! ```text
//! Fetch   (kind 0x03): str16 topic, u32 partition,
//!                      i64 offset        (-1 = the log start offset)
//!                      u32 max_records   (1..=10000)
//!                      u32 max_bytes     (soft: at least one record when there is one)
//!                      u32 wait_ms       (long-poll at the high watermark; <= 30000)
//! FetchOk (kind 0x83): u64 high_watermark, u64 next_offset, u32 count, then per record:
//!                      u64 offset, i64 timestamp, i32 key_len (-1 = no key) + key,
//!                      u32 value_len + value
//! ```

use crate::codec::{Reader, Writer};
use crate::DecodeError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    pub topic: String,
    pub partition: u32,
    pub offset: Option<u64>,
    pub max_records: u32,
    pub max_bytes: u32,
    pub wait_ms: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchOk {
    pub high_watermark: u64,
    pub next_offset: u64,
    pub records: Vec<FetchedRecord>,
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

impl FetchOk {
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.high_watermark)
            .u64(self.next_offset)
            .u32(self.records.len() as u32);
        for rec in &self.records {
            w.u64(rec.offset)
                .i64(rec.timestamp_ms)
                .opt_bytes(rec.key.as_deref())
                .bytes32(&rec.value);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<FetchOk, DecodeError> {
        let high_watermark = r.u64("high_watermark")?;
        let next_offset = r.u64("next_offset")?;
        let n = r.count("count", 24)?;
        let mut records = Vec::with_capacity(n);
        for _ in 0..n {
            records.push(FetchedRecord {
                offset: r.u64("offset")?,
                timestamp_ms: r.i64("timestamp")?,
                key: r.opt_bytes("key")?,
                value: r.bytes32("value")?,
            });
        }
        r.finish("fetch_ok")?;
        Ok(FetchOk {
            high_watermark,
            next_offset,
            records,
        })
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
        let ok = FetchOk {
            high_watermark: 12,
            next_offset: 12,
            records: vec![
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
            ],
        };
        let mut w = Writer::new();
        ok.encode(&mut w);
        assert_eq!(FetchOk::decode(&mut Reader::new(&w.buf)).unwrap(), ok);
        for cut in 0..w.buf.len() {
            assert!(FetchOk::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Fetch::decode(&mut Reader::new(&bytes));
            let _ = FetchOk::decode(&mut Reader::new(&bytes));
        }
    }
}
