//! A producer thread: requests of 1-4 records, values `w<index>-<n>`, to
//! a partition drawn from the run's seed. Plain producers retry a send whose
//! outcome is unknown a few times (at least once: duplicates are counted);
//! idempotent ones retry it with the same sequence until it is answered
//! (exactly once: a duplicate is a violation).
//!
//! In a cluster each request goes to the partition's leader; a
//! `not_leader` refusal (421) moves it to the leader it names (or to the
//! one a new lookup finds) and is tried again, the same values and
//! sequence; `outcome_unknown` (503) is an unknown outcome (`info`).

use std::collections::HashMap;
use std::time::Duration;

use es_protocol::requests::produce::{IdempotentProduce, Produce, ProduceRecord};
use es_protocol::{Kind, Request, Response};
use serde_json::json;

use crate::binary::BinConn;
use crate::checker::Part;
use crate::conns::Conns;
use crate::history::{Event, Type, F};
use crate::http::{escape, HttpConn};
use crate::outcome::Outcome;
use crate::rng::Rng;
use crate::workload::Ctx;

/// How long a send waits for its answer before its outcome is unknown.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of a plain send whose outcome stays unknown.
const PLAIN_ATTEMPTS_MAX: u32 = 3;
/// Most records in one produce request.
const BATCH_RECORDS_MAX: u64 = 4;
/// Refusals that say another node should be asked (cluster runs): the
/// values were not written, the request goes again.
const REROUTE_CODES: [&str; 3] = ["not_leader", "leader_not_available", "not_coordinator"];

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
    let mut conns = Conns::new(&process);
    // Where producer ids are asked for; the next node after a failure.
    let mut home = index as usize;
    // (producer id, epoch) and the next sequence per partition.
    let mut producer: Option<(i64, i16)> = None;
    let mut last_id: Option<i64> = None;
    let mut sequences: HashMap<Part, i32> = HashMap::new();
    let mut n = 0u64;
    while !ctx.stopped() {
        // One request of 1-4 records to one partition; each record is a
        // send of its own in the history.
        let values: Vec<String> = (0..rng.range(1, BATCH_RECORDS_MAX))
            .map(|_| {
                n += 1;
                format!("{process}-{n}")
            })
            .collect();
        let part = rng.pick(&ctx.parts).clone();
        let mut attempts = 0;
        while !ctx.stopped() {
            attempts += 1;
            if via == Via::Idempotent && producer.is_none() {
                let node = ctx.nodes[home % ctx.nodes.len()].node;
                match init_producer(conns.bin(ctx, node), last_id) {
                    Ok(p) => {
                        producer = Some(p);
                        last_id = Some(p.0);
                        sequences.clear();
                    }
                    Err(_) => {
                        home += 1;
                        ctx.nap(200);
                        continue;
                    }
                }
            }
            let node = ctx.leader(&mut conns, &process, &part);
            let sequence = sequences.get(&part).copied().unwrap_or(0);
            let op = ctx.observed.operation();
            let invokes: Vec<Event> = values
                .iter()
                .map(|v| {
                    let mut invoke = Event::new(&process, Type::Invoke, F::Send).on(&part.0, part.1);
                    invoke.value = Some(v.clone());
                    invoke.node = Some(node);
                    invoke.idempotent = via == Via::Idempotent;
                    ctx.rec.record(invoke)
                })
                .collect();
            let result = match (via, producer) {
                (Via::Http, _) => send_http(conns.http(ctx, node), &part, &values),
                (Via::Binary, _) => send_binary(conns.bin(ctx, node), &part, &values, None),
                (Via::Idempotent, Some((id, epoch))) => {
                    send_binary(conns.bin(ctx, node), &part, &values, Some((id, epoch, sequence)))
                }
                (Via::Idempotent, None) => Err(Outcome::Refused("no producer id".into())),
            };
            let result = result.map_err(|e| match e {
                // Proposed, and not known to be committed or not (§2.4).
                Outcome::Refused(code) if code == "outcome_unknown" => Outcome::Unknown(code),
                other => other,
            });
            match result {
                Ok(offsets) => {
                    for (invoke, &offset) in invokes.iter().zip(&offsets) {
                        ctx.observed.saw(&part.0, part.1, offset);
                        let mut ok = invoke.complete(Type::Ok);
                        ok.offset = Some(offset);
                        ctx.rec.record(ok);
                    }
                    drop(op);
                    if via == Via::Idempotent {
                        sequences.insert(part.clone(), sequence + values.len() as i32);
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
                    for invoke in &invokes {
                        ctx.rec.record(invoke.complete(kind).with_error(code.clone()));
                    }
                    drop(op);
                    // In a cluster: another node leads, or this one is down.
                    let elsewhere = REROUTE_CODES.contains(&code.as_str()) || code.starts_with("connect");
                    if elsewhere && ctx.cluster() {
                        reroute(ctx, &mut conns, &process, &part, node, &code, via);
                        if via != Via::Idempotent && attempts >= PLAIN_ATTEMPTS_MAX {
                            break;
                        }
                        ctx.nap(100);
                        continue;
                    }
                    if via != Via::Idempotent {
                        break;
                    }
                    if RESTART_CODES.contains(&code.as_str()) {
                        producer = None;
                        break;
                    }
                    // Nothing written: the same sequence and values again.
                    ctx.nap(100);
                }
                Err(Outcome::Unknown(why)) => {
                    for invoke in &invokes {
                        ctx.rec
                            .record(invoke.complete(Type::Info).with_error(why.clone()));
                    }
                    drop(op);
                    // The leader may be gone: look again before the retry.
                    if ctx.cluster() {
                        ctx.leaders.forget(&part);
                    }
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

/// After a refusal by `node` (`code`) that says to ask another: the
/// leader an HTTP 421 named, else whatever a new lookup finds.
fn reroute(ctx: &Ctx, conns: &mut Conns, process: &str, part: &Part, node: u32, code: &str, via: Via) {
    let named = if via == Via::Http && code == "not_leader" {
        conns.http(ctx, node).last_error()["error"]["leader"]["node_id"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
    } else {
        None
    };
    match named {
        Some(n) if n != node => ctx.leaders.hint(part, n),
        _ => {
            ctx.leaders.forget(part);
            ctx.lookup(conns, process, &part.0);
        }
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

/// The offsets of `values`, in order, from an answer's offsets: one per
/// record, or the answer is not understood.
fn offsets_of(got: Vec<u64>, values: &[String]) -> Result<Vec<u64>, Outcome> {
    if got.len() == values.len() {
        Ok(got)
    } else {
        Err(Outcome::Unknown(format!(
            "{} offsets for {} records",
            got.len(),
            values.len()
        )))
    }
}

fn send_http(http: &mut HttpConn, (topic, partition): &Part, values: &[String]) -> Result<Vec<u64>, Outcome> {
    let records: Vec<serde_json::Value> = values
        .iter()
        .map(|v| json!({"value": v, "partition": partition}))
        .collect();
    let body = json!({ "records": records });
    let v = http.call(
        "POST",
        &format!("/v1/topics/{}/records", escape(topic)),
        Some(&body),
        SEND_TIMEOUT,
    )?;
    let got = v["offsets"]
        .as_array()
        .map(|a| a.iter().filter_map(|o| o["offset"].as_u64()).collect())
        .unwrap_or_default();
    offsets_of(got, values)
}

fn send_binary(
    bin: &mut BinConn,
    (topic, partition): &Part,
    values: &[String],
    idempotent: Option<(i64, i16, i32)>,
) -> Result<Vec<u64>, Outcome> {
    let produce = Produce {
        topic: topic.clone(),
        records: values
            .iter()
            .map(|v| ProduceRecord {
                partition: Some(*partition),
                timestamp_ms: None,
                key: None,
                value: v.as_bytes().to_vec(),
            })
            .collect(),
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
        Response::ProduceOk(ok) => offsets_of(ok.offsets.iter().map(|&(_, o)| o).collect(), values),
        _ => Err(Outcome::Unknown("unexpected answer to a produce".into())),
    }
}
