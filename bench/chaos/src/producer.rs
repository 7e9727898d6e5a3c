//! A producer thread: one record per send, value `w<index>-<n>`, to a
//! partition drawn from the run's seed. Plain producers retry a send whose
//! outcome is unknown a few times (at least once: duplicates are counted);
//! idempotent ones retry it with the same sequence until it is answered
//! (exactly once: a duplicate is a violation).

use std::collections::HashMap;
use std::time::Duration;

use es_protocol::requests::produce::{IdempotentProduce, Produce, ProduceRecord};
use es_protocol::{Kind, Request, Response};
use serde_json::json;

use crate::binary::BinConn;
use crate::checker::Part;
use crate::history::{Event, Type, F};
use crate::http::{escape, HttpConn};
use crate::outcome::Outcome;
use crate::rng::Rng;
use crate::workload::Ctx;

/// How long a send waits for its answer before its outcome is unknown.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of a plain send whose outcome stays unknown.
const PLAIN_ATTEMPTS_MAX: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Http,
    Binary,
    Idempotent,
}

/// Answers after which an idempotent producer starts a new epoch: the
/// broker's state for it is not what it sent (the value is abandoned).
const RESTART_CODES: [&str; 4] = [
    "out_of_order_sequence",
    "producer_fenced",
    "unknown_producer_id",
    "duplicate_sequence",
];

pub fn run(ctx: &Ctx, index: u32, via: Via) {
    let process = format!("w{index}");
    let mut rng = Rng::fork(ctx.seed, 100 + index as u64);
    let mut http = HttpConn::new(&ctx.target.http);
    let mut bin = BinConn::new(&ctx.target.binary, &process);
    // (producer id, epoch) and the next sequence per partition.
    let mut producer: Option<(i64, i16)> = None;
    let mut last_id: Option<i64> = None;
    let mut sequences: HashMap<Part, i32> = HashMap::new();
    let mut n = 0u64;
    while !ctx.stopped() {
        n += 1;
        let value = format!("{process}-{n}");
        let part = rng.pick(&ctx.parts).clone();
        let mut attempts = 0;
        while !ctx.stopped() {
            attempts += 1;
            if via == Via::Idempotent && producer.is_none() {
                match init_producer(&mut bin, last_id) {
                    Ok(p) => {
                        producer = Some(p);
                        last_id = Some(p.0);
                        sequences.clear();
                    }
                    Err(_) => {
                        ctx.nap(200);
                        continue;
                    }
                }
            }
            let sequence = sequences.get(&part).copied().unwrap_or(0);
            let op = ctx.observed.operation();
            let mut invoke = Event::new(&process, Type::Invoke, F::Send).on(&part.0, part.1);
            invoke.value = Some(value.clone());
            invoke.node = Some(ctx.target.node);
            invoke.idempotent = via == Via::Idempotent;
            let invoke = ctx.rec.record(invoke);
            let result = match (via, producer) {
                (Via::Http, _) => send_http(&mut http, &part, &value),
                (Via::Binary, _) => send_binary(&mut bin, &part, &value, None),
                (Via::Idempotent, Some((id, epoch))) => {
                    send_binary(&mut bin, &part, &value, Some((id, epoch, sequence)))
                }
                (Via::Idempotent, None) => Err(Outcome::Refused("no producer id".into())),
            };
            match result {
                Ok(offset) => {
                    ctx.observed.saw(&part.0, part.1, offset);
                    let mut ok = invoke.complete(Type::Ok);
                    ok.offset = Some(offset);
                    ctx.rec.record(ok);
                    drop(op);
                    if via == Via::Idempotent {
                        sequences.insert(part.clone(), sequence + 1);
                    }
                    break;
                }
                Err(Outcome::Refused(code)) => {
                    // duplicate_sequence: written long ago, perhaps.
                    let kind = if code == "duplicate_sequence" {
                        Type::Info
                    } else {
                        Type::Fail
                    };
                    ctx.rec.record(invoke.complete(kind).with_error(code.clone()));
                    drop(op);
                    if via != Via::Idempotent {
                        break;
                    }
                    if RESTART_CODES.contains(&code.as_str()) {
                        producer = None;
                        break;
                    }
                    // Nothing written: the same sequence and value again.
                    ctx.nap(100);
                }
                Err(Outcome::Unknown(why)) => {
                    ctx.rec.record(invoke.complete(Type::Info).with_error(why));
                    drop(op);
                    if via != Via::Idempotent && attempts >= PLAIN_ATTEMPTS_MAX {
                        break;
                    }
                    ctx.nap(100);
                }
            }
        }
        ctx.nap(rng.range(10, 40));
    }
}

/// A producer id: a new one, or the next epoch of `existing`.
fn init_producer(bin: &mut BinConn, existing: Option<i64>) -> Result<(i64, i16), Outcome> {
    let body = match existing {
        Some(id) => json!({ "producer_id": id }),
        None => json!({}),
    };
    match bin.call(&Request::Admin(Kind::InitProducer, body), SEND_TIMEOUT)? {
        Response::AdminOk(v) => match (v["producer_id"].as_i64(), v["epoch"].as_i64()) {
            (Some(id), Some(epoch)) => Ok((id, epoch as i16)),
            _ => Err(Outcome::Refused(format!("bad InitProducer answer {v}"))),
        },
        _ => Err(Outcome::Refused("unexpected answer to InitProducer".into())),
    }
}

fn send_http(http: &mut HttpConn, (topic, partition): &Part, value: &str) -> Result<u64, Outcome> {
    let body = json!({"records": [{"value": value, "partition": partition}]});
    let v = http.call(
        "POST",
        &format!("/v1/topics/{}/records", escape(topic)),
        Some(&body),
        SEND_TIMEOUT,
    )?;
    v["offsets"][0]["offset"]
        .as_u64()
        .ok_or_else(|| Outcome::Unknown(format!("answer without an offset: {v}")))
}

fn send_binary(
    bin: &mut BinConn,
    (topic, partition): &Part,
    value: &str,
    idempotent: Option<(i64, i16, i32)>,
) -> Result<u64, Outcome> {
    let produce = Produce {
        topic: topic.clone(),
        records: vec![ProduceRecord {
            partition: Some(*partition),
            timestamp_ms: None,
            key: None,
            value: value.as_bytes().to_vec(),
        }],
    };
    let req = match idempotent {
        Some((producer_id, epoch, sequence)) => Request::IdempotentProduce(IdempotentProduce {
            producer_id,
            epoch,
            sequence,
            produce,
        }),
        None => Request::Produce(produce),
    };
    match bin.call(&req, SEND_TIMEOUT)? {
        Response::ProduceOk(ok) => ok
            .offsets
            .first()
            .map(|&(_, o)| o)
            .ok_or_else(|| Outcome::Unknown("ProduceOk without an offset".into())),
        _ => Err(Outcome::Unknown("unexpected answer to a produce".into())),
    }
}
