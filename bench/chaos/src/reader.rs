//! An assign-mode reader: tails its partitions over the binary protocol
//! from their log start. With one partition it long-polls at the high
//! watermark; with many it asks the topics' high watermarks
//! (`GET /v1/topics/{t}`) each round and fetches only the partitions that
//! have records it has not read. Its positions are its own (no seeks): a
//! partition's session lasts until retention deletes the records at its
//! position (`offset_out_of_range`, a replica that installed a snapshot
//! starting past it), and the next one starts at the log start.
//!
//! In a cluster a reader tails a follower (a replica that does not lead
//! its first partition, as far as known), and moves to another replica
//! when its node fails or refuses; its positions go with it.

use std::collections::HashMap;
use std::time::Duration;

use es_protocol::requests::fetch::Fetch;
use es_protocol::{Request, Response};

use crate::binary::BinConn;
use crate::checker::Part;
use crate::conns::Conns;
use crate::consumer::record_failure;
use crate::history::{Event, Type, F};
use crate::http::{escape, HttpConn};
use crate::outcome::Outcome;
use crate::workload::Ctx;

/// How long a fetch waits at the high watermark for new records.
const WAIT_MS: u32 = 500;
/// How long past `WAIT_MS` an answer may take before it is given up.
const ANSWER_SLACK: Duration = Duration::from_secs(5);
const FETCH_RECORDS_MAX: u32 = 500;
const FETCH_BYTES_MAX: u32 = 1 << 20;
/// Pause after a round of a many-partition reader: after a round that
/// found nothing new, and after one that fetched (the rounds' high
/// watermark requests must not crowd out the producers).
const IDLE_ROUND_MS: u64 = 200;
const BUSY_ROUND_MS: u64 = 100;
/// The refusal of a fetch below the replica's log start.
const OFFSET_OUT_OF_RANGE: &str = "offset_out_of_range";

pub fn run(ctx: &Ctx, index: u32, parts: &[Part]) {
    let process = format!("r{index}");
    let mut conns = Conns::new(&process);
    let mut at: HashMap<Part, Position> = parts.iter().map(|p| (p.clone(), Position::default())).collect();
    let Some(first) = parts.first() else { return };
    // Which follower: the reader's index, then the next after a failure.
    let mut skip = index as usize;
    if ctx.cluster() {
        ctx.lookup(&mut conns, &process, &first.0);
    }
    let mut node = ctx.follower(first, skip);
    if let [part] = parts {
        while !ctx.stopped() {
            let pos = at.get_mut(part).expect("every part has a position");
            if !poll(ctx, conns.bin(ctx, node), node, &process, part, pos, WAIT_MS) {
                skip += 1;
                node = ctx.follower(first, skip);
                ctx.nap(200);
            }
        }
        return;
    }
    while !ctx.stopped() {
        let Some(hws) = high_watermarks(ctx, conns.http(ctx, node)) else {
            skip += 1;
            node = ctx.follower(first, skip);
            ctx.nap(200);
            continue;
        };
        let mut fetched = false;
        for part in parts {
            let pos = at.get_mut(part).expect("every part has a position");
            let behind = match (pos.at, hws.get(part)) {
                (None, _) => true,
                (Some(p), Some(&hw)) => p < hw,
                (Some(_), None) => false,
            };
            if behind && !ctx.stopped() {
                fetched = true;
                if !poll(ctx, conns.bin(ctx, node), node, &process, part, pos, 0) {
                    // The rest of the round would fail alike.
                    skip += 1;
                    node = ctx.follower(first, skip);
                    break;
                }
            }
        }
        ctx.nap(if fetched { BUSY_ROUND_MS } else { IDLE_ROUND_MS });
    }
}

/// The high watermark of every partition of the workload's topics.
fn high_watermarks(ctx: &Ctx, http: &mut HttpConn) -> Option<HashMap<Part, u64>> {
    let mut out = HashMap::new();
    for topic in ctx.topics() {
        let v = http
            .call(
                "GET",
                &format!("/v1/topics/{}", escape(&topic)),
                None,
                ANSWER_SLACK,
            )
            .ok()?;
        for p in v["partitions"].as_array()? {
            out.insert(
                (topic.clone(), p["partition"].as_u64()? as u32),
                p["high_watermark"].as_u64()?,
            );
        }
    }
    Some(out)
}

/// A reader's place in a partition: its session (the checks' unit of
/// consecutive reads) and the next offset (the log start when `None`).
#[derive(Clone, Copy, Debug)]
struct Position {
    session: u64,
    at: Option<u64>,
}

impl Default for Position {
    fn default() -> Self {
        Position { session: 1, at: None }
    }
}

/// One fetch of `part` from `pos` (the log start when `None`), recorded;
/// `pos` moves past what it read, or to the log start in a new session
/// when retention deleted what is there. False when it failed.
fn poll(
    ctx: &Ctx,
    bin: &mut BinConn,
    node: u32,
    process: &str,
    (topic, partition): &Part,
    pos: &mut Position,
    wait_ms: u32,
) -> bool {
    let _op = ctx.observed.operation();
    let mut invoke = Event::new(process, Type::Invoke, F::Poll).on(topic, *partition);
    invoke.session = Some(pos.session);
    invoke.offset = pos.at;
    invoke.node = Some(node);
    let invoke = ctx.rec.record(invoke);
    let fetch = Fetch {
        topic: topic.clone(),
        partition: *partition,
        offset: pos.at,
        max_records: FETCH_RECORDS_MAX,
        max_bytes: FETCH_BYTES_MAX,
        wait_ms,
    };
    let timeout = Duration::from_millis(wait_ms as u64) + ANSWER_SLACK;
    match bin.call(&Request::Fetch(fetch), timeout) {
        Ok(Response::FetchOk(ok)) => {
            let records: Vec<(u64, String)> = ok
                .records()
                .map(|r| (r.offset, String::from_utf8_lossy(r.value).into_owned()))
                .collect();
            for (o, _) in &records {
                ctx.observed.saw(topic, *partition, *o);
            }
            ctx.observed.saw_hw(topic, *partition, ok.high_watermark);
            pos.at = Some(ok.next_offset);
            let mut done = invoke.complete(Type::Ok);
            done.records = records;
            done.hw = Some(ok.high_watermark);
            ctx.rec.record(done);
            true
        }
        Ok(_) => {
            record_failure(
                ctx,
                &invoke,
                &Outcome::Unknown("unexpected answer to a fetch".into()),
            );
            false
        }
        Err(Outcome::Refused(code)) if code == OFFSET_OUT_OF_RANGE => {
            record_failure(ctx, &invoke, &Outcome::Refused(code));
            *pos = Position {
                session: pos.session + 1,
                at: None,
            };
            true
        }
        Err(e) => {
            record_failure(ctx, &invoke, &e);
            false
        }
    }
}
