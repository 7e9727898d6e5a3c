//! A consumer-group member over HTTP: joins [`GROUP`], reads its assigned
//! partitions from the committed offsets, commits its positions every
//! second and heartbeats; after a rebalance or a broker restart it reads
//! the committed offsets again (a new reader session). Every 10-30 s it
//! leaves and joins again.
//!
//! In a cluster a member talks to one node at a time: it moves to the node
//! a 421 names (`error.coordinator`, `error.leader`), or to the next node
//! when its node does not answer.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::checker::Part;
use crate::history::{Committed, Event, Type, F};
use crate::http::{escape, HttpConn};
use crate::outcome::Outcome;
use crate::rng::Rng;
use crate::workload::{Ctx, GROUP};

/// How long a group request or a fetch waits for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often positions are committed (and the member heartbeats).
const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// Records per fetch.
const FETCH_RECORDS_MAX: u32 = 200;
/// How long a member stays before it leaves and joins again (seconds,
/// drawn in the range).
const STAY_S: (u64, u64) = (10, 30);

struct Member {
    id: String,
    generation: u64,
    assigned: Vec<Part>,
}

fn assignment(v: &Value) -> Vec<Part> {
    let mut parts: Vec<Part> = v["assignments"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| Some((x["topic"].as_str()?.to_string(), x["partition"].as_u64()? as u32)))
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    parts
}

pub fn run(ctx: &Ctx, index: u32) {
    let process = format!("c{index}");
    let mut home = ctx.nodes[index as usize % ctx.nodes.len()].node;
    let mut http = HttpConn::new(&ctx.node(home).http);
    let group_path = format!("/v1/groups/{}", escape(GROUP));
    let mut member: Option<Member> = None;
    // Positions of the assigned partitions; `None` until read from the
    // committed offsets.
    let mut positions: Option<HashMap<Part, Option<u64>>> = None;
    let mut session = 0u64;
    let mut last_commit = Instant::now();
    // Members leave and join again now and then, so the group rebalances
    // under the faults too.
    let mut rng = Rng::fork(ctx.seed, 200 + index as u64);
    let mut joined_at = Instant::now();
    let mut stay = Duration::from_secs(rng.range(STAY_S.0, STAY_S.1));
    while !ctx.stopped() {
        let Some(m) = member.as_mut() else {
            let body = json!({"topics": ctx.topics(), "session_timeout_ms": 10000});
            match http.call(
                "POST",
                &format!("{group_path}/members"),
                Some(&body),
                REQUEST_TIMEOUT,
            ) {
                Ok(v) => {
                    member = v["member_id"].as_str().map(|id| Member {
                        id: id.to_string(),
                        generation: v["generation"].as_u64().unwrap_or(0),
                        assigned: assignment(&v),
                    });
                    positions = None;
                    joined_at = Instant::now();
                }
                Err(e) => {
                    moved(ctx, &mut http, &mut home, &e);
                    ctx.nap(300);
                }
            }
            continue;
        };
        let Some(pos) = positions.as_mut() else {
            match position(ctx, &mut http, home, &process, &group_path) {
                Ok(committed) => {
                    session += 1;
                    positions = Some(
                        m.assigned
                            .iter()
                            .map(|p| (p.clone(), committed.get(p).copied()))
                            .collect(),
                    );
                }
                Err(e) => {
                    moved(ctx, &mut http, &mut home, &e);
                    ctx.nap(200);
                }
            }
            continue;
        };
        let mut got = 0;
        let mut reposition = false;
        for part in &m.assigned {
            let at = pos.get(part).copied().flatten();
            match poll(ctx, &mut http, home, &process, session, part, at) {
                Ok((n, next)) => {
                    got += n;
                    pos.insert(part.clone(), Some(next));
                }
                Err(Outcome::Refused(code)) if code == "offset_out_of_range" => reposition = true,
                // The broker is down, paused or out of room: the rest of
                // the round would fail alike.
                Err(e) => {
                    moved(ctx, &mut http, &mut home, &e);
                    ctx.nap(200);
                    break;
                }
            }
        }
        if last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            let offsets: Vec<Committed> = pos
                .iter()
                .filter_map(|((topic, partition), o)| {
                    Some(Committed {
                        topic: topic.clone(),
                        partition: *partition,
                        offset: (*o)?,
                    })
                })
                .collect();
            let mut gone = false;
            if !offsets.is_empty() {
                match commit(ctx, &mut http, home, &process, &group_path, m, offsets) {
                    Err(Outcome::Refused(code)) if code == "unknown_member" || code == "group_not_found" => {
                        gone = true
                    }
                    Err(e) => moved(ctx, &mut http, &mut home, &e),
                    Ok(()) => {}
                }
            }
            match http.call(
                "POST",
                &format!("{group_path}/members/{}/heartbeat", escape(&m.id)),
                None,
                REQUEST_TIMEOUT,
            ) {
                Ok(v) => {
                    let generation = v["generation"].as_u64().unwrap_or(0);
                    let assigned = assignment(&v);
                    if generation != m.generation || assigned != m.assigned {
                        m.generation = generation;
                        m.assigned = assigned;
                        reposition = true;
                    }
                }
                Err(Outcome::Refused(code)) if code == "unknown_member" || code == "group_not_found" => {
                    gone = true
                }
                Err(e) => moved(ctx, &mut http, &mut home, &e),
            }
            if !gone && joined_at.elapsed() >= stay {
                leave(&mut http, &group_path, m);
                stay = Duration::from_secs(rng.range(STAY_S.0, STAY_S.1));
                gone = true;
            }
            if gone {
                member = None;
                positions = None;
                continue;
            }
        }
        if reposition {
            positions = None;
        } else if got == 0 {
            ctx.nap(100);
        }
    }
    if let Some(m) = member {
        leave(&mut http, &group_path, &m);
    }
}

/// After an error in a cluster: the node a 421 names, or the next node
/// when this one did not answer; other refusals keep the node.
fn moved(ctx: &Ctx, http: &mut HttpConn, home: &mut u32, e: &Outcome) {
    if !ctx.cluster() {
        return;
    }
    let redirect = matches!(e, Outcome::Refused(code)
        if ["not_coordinator", "not_leader", "leader_not_available"].contains(&code.as_str()));
    let unreachable = match e {
        Outcome::Refused(code) => code.starts_with("connect"),
        Outcome::Unknown(_) => true,
    };
    if !redirect && !unreachable {
        return;
    }
    let err = &http.last_error()["error"];
    let named = [&err["coordinator"]["node_id"], &err["leader"]["node_id"]]
        .into_iter()
        .filter(|_| redirect)
        .find_map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
        .filter(|n| *n != *home && ctx.nodes.iter().any(|t| t.node == *n));
    let next = named.unwrap_or_else(|| {
        let i = ctx.nodes.iter().position(|t| t.node == *home).unwrap_or(0);
        ctx.nodes[(i + 1) % ctx.nodes.len()].node
    });
    *home = next;
    *http = HttpConn::new(&ctx.node(next).http);
}

fn leave(http: &mut HttpConn, group_path: &str, m: &Member) {
    let _ = http.call(
        "DELETE",
        &format!("{group_path}/members/{}", escape(&m.id)),
        None,
        REQUEST_TIMEOUT,
    );
}

/// Reads the group's committed offsets (a `position` operation). A group
/// the broker does not know has none.
fn position(
    ctx: &Ctx,
    http: &mut HttpConn,
    node: u32,
    process: &str,
    group_path: &str,
) -> Result<HashMap<Part, u64>, Outcome> {
    let op = ctx.observed.operation();
    let mut invoke = Event::new(process, Type::Invoke, F::Position);
    invoke.group = Some(GROUP.to_string());
    invoke.node = Some(node);
    let invoke = ctx.rec.record(invoke);
    let result = match http.call("GET", &format!("{group_path}/commits"), None, REQUEST_TIMEOUT) {
        Err(Outcome::Refused(code)) if code == "group_not_found" => Ok(Value::Null),
        other => other,
    };
    let v = match result {
        Ok(v) => v,
        Err(e) => {
            record_failure(ctx, &invoke, &e);
            drop(op);
            return Err(e);
        }
    };
    let offsets: Vec<Committed> = v["offsets"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| {
                    Some(Committed {
                        topic: x["topic"].as_str()?.to_string(),
                        partition: x["partition"].as_u64()? as u32,
                        offset: x["offset"].as_u64()?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut ok = invoke.complete(Type::Ok);
    ok.offsets = offsets.clone();
    ctx.rec.record(ok);
    Ok(offsets
        .into_iter()
        .map(|c| ((c.topic, c.partition), c.offset))
        .collect())
}

/// One fetch of `part` from `at` (the log start when `None`): the records
/// read and the next offset.
fn poll(
    ctx: &Ctx,
    http: &mut HttpConn,
    node: u32,
    process: &str,
    session: u64,
    (topic, partition): &Part,
    at: Option<u64>,
) -> Result<(usize, u64), Outcome> {
    let _op = ctx.observed.operation();
    let mut invoke = Event::new(process, Type::Invoke, F::Poll).on(topic, *partition);
    invoke.session = Some(session);
    invoke.offset = at;
    invoke.node = Some(node);
    let invoke = ctx.rec.record(invoke);
    let mut path = format!(
        "/v1/topics/{}/partitions/{partition}/records?max_records={FETCH_RECORDS_MAX}",
        escape(topic)
    );
    if let Some(o) = at {
        path.push_str(&format!("&offset={o}"));
    }
    let v = match http.call("GET", &path, None, REQUEST_TIMEOUT) {
        Ok(v) => v,
        Err(e) => {
            record_failure(ctx, &invoke, &e);
            return Err(e);
        }
    };
    let records: Vec<(u64, String)> = v["records"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| Some((r["offset"].as_u64()?, r["value"].as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let hw = v["high_watermark"].as_u64();
    let next = v["next_offset"].as_u64().unwrap_or(at.unwrap_or(0));
    for (o, _) in &records {
        ctx.observed.saw(topic, *partition, *o);
    }
    if let Some(hw) = hw {
        ctx.observed.saw_hw(topic, *partition, hw);
    }
    let n = records.len();
    let mut ok = invoke.complete(Type::Ok);
    ok.records = records;
    ok.hw = hw;
    ctx.rec.record(ok);
    Ok((n, next))
}

fn commit(
    ctx: &Ctx,
    http: &mut HttpConn,
    node: u32,
    process: &str,
    group_path: &str,
    m: &Member,
    offsets: Vec<Committed>,
) -> Result<(), Outcome> {
    let _op = ctx.observed.operation();
    let mut invoke = Event::new(process, Type::Invoke, F::Commit);
    invoke.group = Some(GROUP.to_string());
    invoke.node = Some(node);
    invoke.offsets = offsets.clone();
    let invoke = ctx.rec.record(invoke);
    let body = json!({"member_id": m.id, "generation": m.generation, "offsets": offsets});
    match http.call(
        "POST",
        &format!("{group_path}/commits"),
        Some(&body),
        REQUEST_TIMEOUT,
    ) {
        Ok(_) => {
            ctx.rec.record(invoke.complete(Type::Ok));
            Ok(())
        }
        Err(e) => {
            record_failure(ctx, &invoke, &e);
            Err(e)
        }
    }
}

/// `fail` for a refusal, `info` for an unknown outcome.
pub fn record_failure(ctx: &Ctx, invoke: &Event, e: &Outcome) {
    let kind = match e {
        Outcome::Refused(_) => Type::Fail,
        Outcome::Unknown(_) => Type::Info,
    };
    ctx.rec.record(invoke.complete(kind).with_error(e.why()));
}
