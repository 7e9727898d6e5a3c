//! One produce request, built once and sent again and again: a record
//! batch of `batch` records for one partition, as a ProduceBatch (the
//! broker appends it as it came). Its records carry the time the batch was
//! built. Stamped batches (e2e) rewrite each value's send time, and so
//! rebuild the batch, before every send.

use es_protocol::batch::BatchBuilder;
use es_protocol::requests::produce_batch::ProduceBatch;
use es_protocol::Request;

use crate::payload;

pub struct Batch {
    request: Request,
    /// The values, kept to rebuild a stamped batch.
    values: Vec<Vec<u8>>,
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
        let values: Vec<Vec<u8>> = (0..records)
            .map(|i| payload::value(record_size, seed.wrapping_mul(1_000_003).wrapping_add(i as u64)))
            .collect();
        let request = Request::ProduceBatch(ProduceBatch {
            topic: topic.to_string(),
            partition,
            batch: build(&values),
        });
        Batch {
            request,
            values: if stamped { values } else { Vec::new() },
            stamped,
            records: records as u64,
            bytes: (records * record_size) as u64,
        }
    }

    /// The request to send now.
    pub fn next(&mut self) -> &Request {
        if self.stamped {
            let now = payload::unix_nanos();
            for v in &mut self.values {
                payload::stamp(v, now);
            }
            if let Request::ProduceBatch(p) = &mut self.request {
                p.batch = build(&self.values);
            }
        }
        &self.request
    }
}

/// A batch of `values` (no keys) stamped with the current time.
fn build(values: &[Vec<u8>]) -> Vec<u8> {
    let now_ms = (payload::unix_nanos() / 1_000_000) as i64;
    let mut b = BatchBuilder::with_capacity(values.iter().map(|v| v.len() + 20).sum());
    for v in values {
        b.push(None, v, now_ms);
    }
    b.finish(0, None).expect("a batch holds at least one record")
}
