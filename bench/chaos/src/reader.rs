//! An assign-mode reader: tails one partition over the binary protocol
//! from its log start, long-polling at the high watermark. Its position is
//! its own (no seeks), so its whole run is one session.

use std::time::Duration;

use es_protocol::requests::fetch::Fetch;
use es_protocol::{Request, Response};

use crate::binary::BinConn;
use crate::checker::Part;
use crate::consumer::record_failure;
use crate::history::{Event, Type, F};
use crate::outcome::Outcome;
use crate::workload::Ctx;

/// How long a fetch waits at the high watermark for new records.
const WAIT_MS: u32 = 500;
/// How long past `WAIT_MS` an answer may take before it is given up.
const ANSWER_SLACK: Duration = Duration::from_secs(5);
const FETCH_RECORDS_MAX: u32 = 500;
const FETCH_BYTES_MAX: u32 = 1 << 20;

pub fn run(ctx: &Ctx, index: u32, (topic, partition): &Part) {
    let process = format!("r{index}");
    let mut bin = BinConn::new(&ctx.target.binary, &process);
    let mut at: Option<u64> = None;
    while !ctx.stopped() {
        let op = ctx.observed.operation();
        let mut invoke = Event::new(&process, Type::Invoke, F::Poll).on(topic, *partition);
        invoke.session = Some(1);
        invoke.offset = at;
        invoke.node = Some(ctx.target.node);
        let invoke = ctx.rec.record(invoke);
        let fetch = Fetch {
            topic: topic.clone(),
            partition: *partition,
            offset: at,
            max_records: FETCH_RECORDS_MAX,
            max_bytes: FETCH_BYTES_MAX,
            wait_ms: WAIT_MS,
        };
        let timeout = Duration::from_millis(WAIT_MS as u64) + ANSWER_SLACK;
        let failed = match bin.call(&Request::Fetch(fetch), timeout) {
            Ok(Response::FetchOk(ok)) => {
                let records: Vec<(u64, String)> = ok
                    .records()
                    .map(|r| (r.offset, String::from_utf8_lossy(r.value).into_owned()))
                    .collect();
                for (o, _) in &records {
                    ctx.observed.saw(topic, *partition, *o);
                }
                ctx.observed.saw_hw(topic, *partition, ok.high_watermark);
                at = Some(ok.next_offset);
                let mut done = invoke.complete(Type::Ok);
                done.records = records;
                done.hw = Some(ok.high_watermark);
                ctx.rec.record(done);
                false
            }
            Ok(_) => {
                record_failure(ctx, &invoke, &Outcome::Unknown("unexpected answer to a fetch".into()));
                true
            }
            Err(e) => {
                record_failure(ctx, &invoke, &e);
                true
            }
        };
        drop(op);
        if failed {
            ctx.nap(200);
        }
    }
}
