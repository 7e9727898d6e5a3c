//! `es-tools dump --format jsonl`: the selected records as JSON lines, one
//! per record, for inspection and for moving data into other systems:
//! `{"t", "p", "offset", "ts", "key_b64", "value_b64", "producer_id",
//! "seq"}`. The same plan as the tar archive (selection, ranges,
//! `--exact`, `--on-corrupt`): every batch was checked by the scan; each
//! is read again from its segment and decoded with es-format. Partitions
//! in order, cold segments before hot, records in offset order.

use std::io::{BufReader, Read, Write};

use base64::Engine;
use es_format::batch::{records, BatchHeader, HEADER_BYTES, HEADER_V2_BYTES};
use serde_json::{json, Value};

use crate::dump_plan::{Plan, SegPlan};
use crate::limits::COPY_BUFFER_BYTES;

/// Writes every record of `plan` to `out`; the totals (partitions,
/// segments, batches, records, bytes of JSON).
pub fn write(plan: &Plan, out: &mut dyn Write) -> std::io::Result<Value> {
    let mut totals = [0u64; 5];
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut line = Vec::new();
    for t in &plan.topics {
        for p in &t.partitions {
            totals[0] += 1;
            for s in p.cold.iter().chain(&p.hot) {
                totals[1] += 1;
                each_batch(s, |h, batch| {
                    totals[2] += 1;
                    let recs = records(h, batch).map_err(|e| std::io::Error::other(e.to_string()))?;
                    for r in recs {
                        totals[3] += 1;
                        let producer = h.producer.producer_id;
                        let seq = (producer >= 0 && h.producer.base_sequence >= 0).then(|| {
                            i64::from(h.producer.base_sequence) + (r.offset.0 - h.base_offset.0) as i64
                        });
                        let v = json!({
                            "t": t.name, "p": p.partition, "offset": r.offset.0, "ts": r.timestamp_ms,
                            "key_b64": r.key.as_ref().map(|k| b64.encode(k)),
                            "value_b64": b64.encode(&r.value),
                            "producer_id": (producer >= 0).then_some(producer), "seq": seq,
                        });
                        line.clear();
                        serde_json::to_writer(&mut line, &v)?;
                        line.push(b'\n');
                        out.write_all(&line)?;
                        totals[4] += line.len() as u64;
                    }
                    Ok(())
                })?;
            }
        }
    }
    out.flush()?;
    let [partitions, segments, batches, records, bytes] = totals;
    Ok(
        json!({"partitions": partitions, "segments": segments, "batches": batches,
              "records": records, "bytes": bytes}),
    )
}

/// Hands each batch of a segment's entry (as the tar archive would hold
/// it) to `f`, one at a time.
fn each_batch(
    s: &SegPlan,
    mut f: impl FnMut(&BatchHeader, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut r = BufReader::with_capacity(COPY_BUFFER_BYTES, s.entry_reader()?);
    let mut left = s.entry_len();
    let mut batch = Vec::new();
    while left > 0 {
        // Enough bytes for either version's header (72 for version 2); no
        // batch of either version is shorter.
        let head = HEADER_V2_BYTES.min(left as usize);
        batch.resize(head, 0);
        r.read_exact(&mut batch)?;
        let h = BatchHeader::parse(&batch).map_err(|e| std::io::Error::other(e.to_string()))?;
        let len = h.batch_len as usize;
        if len < head.max(HEADER_BYTES) || len as u64 > left {
            return Err(std::io::Error::other(format!(
                "{}: a batch of {len} bytes where {left} remain: the segment changed since it was scanned",
                s.seg.log.display()
            )));
        }
        batch.resize(len, 0);
        r.read_exact(batch.get_mut(head..).unwrap_or_default())?;
        f(&h, &batch)?;
        left -= len as u64;
    }
    Ok(())
}
