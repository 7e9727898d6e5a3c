//! One produce request, built once and sent again and again: `batch`
//! records for one partition. Stamped batches (e2e) rewrite each value's
//! send time before every send.

use es_protocol::requests::produce::{Produce, ProduceRecord};
use es_protocol::Request;

use crate::payload;

pub struct Batch {
    request: Request,
    stamped: bool,
    /// Records per request.
    pub records: u64,
    /// Value bytes per request (what MB/s counts).
    pub bytes: u64,
}

impl Batch {
    pub fn new(
        topic: &str,
        partition: u32,
        records: usize,
        record_size: usize,
        stamped: bool,
        seed: u64,
    ) -> Batch {
        let records_vec = (0..records)
            .map(|i| ProduceRecord {
                partition: Some(partition),
                timestamp_ms: None,
                key: None,
                value: payload::value(record_size, seed.wrapping_mul(1_000_003).wrapping_add(i as u64)),
            })
            .collect();
        Batch {
            request: Request::Produce(Produce {
                topic: topic.to_string(),
                records: records_vec,
            }),
            stamped,
            records: records as u64,
            bytes: (records * record_size) as u64,
        }
    }

    /// The request to send now.
    pub fn next(&mut self) -> &Request {
        if self.stamped {
            let now = payload::unix_nanos();
            if let Request::Produce(p) = &mut self.request {
                for r in &mut p.records {
                    payload::stamp(&mut r.value, now);
                }
            }
        }
        &self.request
    }
}
