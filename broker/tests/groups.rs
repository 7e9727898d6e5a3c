//! Consumer groups against the real broker, over HTTP: sticky assignment
//! between members, session expiry handing partitions over, commit rules
//! (stale generation, partitions not held), durable commits across kill -9,
//! describe with lag, reset, list and delete; the limits on what clients
//! can make the broker keep: `--groups-max` and the expiry of empty
//! groups' offsets (`--group-offsets-retention-ms`).

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{poll_until, wait_for, Broker};
use es_protocol::client::{Client as BinaryClient, Options};
use es_protocol::Kind;
use serde_json::{json, Value};

/// A member's session that outlasts any test (the broker's largest): it
/// never expires because the machine is slow.
const LONG_SESSION_MS: u64 = 300_000;

fn assignment(v: &Value) -> BTreeSet<(String, u64)> {
    v["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["topic"].as_str().unwrap().to_string(),
                a["partition"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn join(b: &Broker, group: &str, topics: &[&str], timeout_ms: u64) -> Value {
    let (status, v) = b.post(
        &format!("/v1/groups/{group}/members"),
        json!({"topics": topics, "session_timeout_ms": timeout_ms}),
    );
    assert_eq!(status, 201, "{v}");
    v
}

fn heartbeat(b: &Broker, group: &str, member: &str) -> (u16, Value) {
    b.post(
        &format!("/v1/groups/{group}/members/{member}/heartbeat"),
        json!({}),
    )
}

#[test]
fn two_members_split_four_partitions_and_a_silent_one_is_replaced() {
    let b = Broker::start(2);
    assert_eq!(
        b.post("/v1/topics", json!({"name": "orders", "partitions": 4})).0,
        201
    );
    // c's session is short, so that it expires within the test; a's
    // heartbeat right after c joins must come before that. A round where
    // c's join and a's heartbeat took longer than c's session proves
    // nothing (c may have expired first): it is done again on a fresh
    // group, with a session twice as long.
    let mut session_ms = 500;
    let (group, a_id, a_now, c_id) = loop {
        let group = format!("billing-{session_ms}");
        let a = join(&b, &group, &["orders"], LONG_SESSION_MS);
        let a_id = a["member_id"].as_str().unwrap().to_string();
        assert_eq!(assignment(&a).len(), 4, "alone, a member holds everything");
        let asked = Instant::now();
        let c = join(&b, &group, &["orders"], session_ms);
        let (status, hb) = heartbeat(&b, &group, &a_id);
        let took = asked.elapsed();
        if took >= Duration::from_millis(session_ms) {
            assert!(
                session_ms < LONG_SESSION_MS,
                "c's join and a's heartbeat took {took:?}, longer than the longest session: a hang"
            );
            eprintln!("c's join and a's heartbeat took {took:?}, c's session {session_ms} ms: again");
            session_ms = (session_ms * 2).min(LONG_SESSION_MS);
            continue;
        }
        let c_id = c["member_id"].as_str().unwrap().to_string();
        assert_eq!(assignment(&c).len(), 2);
        assert_eq!(status, 200);
        let a_now = assignment(&hb);
        assert_eq!(a_now.len(), 2, "rebalanced evenly");
        assert!(
            a_now.is_subset(&assignment(&a)),
            "a keeps partitions it had (sticky)"
        );
        assert!(a_now.is_disjoint(&assignment(&c)));
        assert_eq!(hb["generation"], c["generation"]);
        break (group, a_id, a_now, c_id);
    };

    // c stops heartbeating; a keeps going and takes c's partitions over.
    let taken_over = poll_until(
        "c's session to expire",
        || None,
        || {
            let (status, hb) = heartbeat(&b, &group, &a_id);
            assert_eq!(status, 200, "{hb}");
            (assignment(&hb).len() == 4).then_some(hb)
        },
    );
    assert!(
        a_now.is_subset(&assignment(&taken_over)),
        "a kept its own while taking c's"
    );
    let (status, err) = heartbeat(&b, &group, &c_id);
    assert_eq!(status, 404);
    assert_eq!(err["error"]["code"], "unknown_member");
}

#[test]
fn commit_rules_and_durability_across_kill9() {
    let mut b = Broker::start(2);
    assert_eq!(
        b.post("/v1/topics", json!({"name": "ev", "partitions": 2})).0,
        201
    );
    for p in 0..2 {
        let records: Vec<Value> = (0..10)
            .map(|i| json!({"value": format!("v{i}"), "partition": p}))
            .collect();
        assert_eq!(
            b.post("/v1/topics/ev/records", json!({"records": records})).0,
            200
        );
    }
    let a = join(&b, "g", &["ev"], LONG_SESSION_MS);
    let a_id = a["member_id"].as_str().unwrap().to_string();
    let gen1 = a["generation"].as_u64().unwrap();
    let (status, v) = b.post(
        "/v1/groups/g/commits",
        json!({"member_id": a_id, "generation": gen1, "offsets": [{"topic": "ev", "partition": 0, "offset": 4}]}),
    );
    assert_eq!(status, 200, "{v}");
    // A second member joins: a's generation is now stale.
    let c = join(&b, "g", &["ev"], LONG_SESSION_MS);
    let (status, v) = b.post(
        "/v1/groups/g/commits",
        json!({"member_id": a_id, "generation": gen1, "offsets": [{"topic": "ev", "partition": 0, "offset": 5}]}),
    );
    assert_eq!(status, 409);
    assert_eq!(v["error"]["code"], "stale_generation");
    // With the right generation, only the partition it holds.
    let gen2 = c["generation"].as_u64().unwrap();
    let held_by_c = assignment(&c).into_iter().next().unwrap();
    let (status, v) = b.post(
        "/v1/groups/g/commits",
        json!({"member_id": a_id, "generation": gen2, "offsets": [{"topic": "ev", "partition": held_by_c.1, "offset": 7}]}),
    );
    assert_eq!(status, 409);
    assert_eq!(v["error"]["code"], "not_assigned");
    let (status, v) = b.post(
        "/v1/groups/g/commits",
        json!({"member_id": c["member_id"], "generation": gen2, "offsets": [{"topic": "ev", "partition": held_by_c.1, "offset": 7}]}),
    );
    assert_eq!(status, 200, "{v}");
    // Without a member, a commit is refused while the group has members.
    let (status, v) = b.post(
        "/v1/groups/g/commits",
        json!({"offsets": [{"topic": "ev", "partition": 0, "offset": 1}]}),
    );
    assert_eq!(status, 409);
    assert_eq!(v["error"]["code"], "group_not_empty");

    let before = b.get("/v1/groups/g/commits").1;
    b.kill9();
    b.restart();
    let after = b.get("/v1/groups/g/commits").1;
    assert_eq!(before, after, "acknowledged commits survive kill -9");
    let expected_p0 = if held_by_c.1 == 0 { 7 } else { 4 };
    let offsets = after["offsets"].as_array().unwrap();
    assert!(
        offsets
            .iter()
            .any(|o| o["partition"] == 0 && o["offset"] == expected_p0),
        "{after}"
    );

    // Members are gone after the restart: describe shows lag per partition.
    let (status, d) = b.get("/v1/groups/g");
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["members"].as_array().unwrap().len(), 0);
    for p in d["partitions"].as_array().unwrap() {
        let committed = p["committed_offset"].as_u64().unwrap_or(0);
        assert_eq!(p["high_watermark"], 10);
        assert_eq!(p["lag"].as_u64().unwrap(), 10 - committed);
    }
}

#[test]
fn reset_list_and_delete() {
    let b = Broker::start(1);
    assert_eq!(
        b.post("/v1/topics", json!({"name": "logs", "partitions": 2})).0,
        201
    );
    let records: Vec<Value> = (0..6)
        .map(|i| json!({"value": "x", "partition": i % 2, "timestamp": 1000 * i}))
        .collect();
    assert_eq!(
        b.post("/v1/topics/logs/records", json!({"records": records})).0,
        200
    );
    let commits = |v: &Value| -> Vec<u64> {
        v["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["offset"].as_u64().unwrap())
            .collect()
    };
    let (status, v) = b.post("/v1/groups/r/reset", json!({"topic": "logs", "to": "latest"}));
    assert_eq!(status, 200, "{v}");
    assert_eq!(commits(&v), vec![3, 3]);
    let (_, v) = b.post("/v1/groups/r/reset", json!({"topic": "logs", "to": "earliest"}));
    assert_eq!(commits(&v), vec![0, 0]);
    let (_, v) = b.post(
        "/v1/groups/r/reset",
        json!({"topic": "logs", "to": "offset", "offset": 2}),
    );
    assert_eq!(commits(&v), vec![2, 2]);
    // Partition 0 holds timestamps 0, 2000, 4000; partition 1 holds 1000, 3000, 5000.
    let (_, v) = b.post(
        "/v1/groups/r/reset",
        json!({"topic": "logs", "to": "timestamp", "timestamp": 2500}),
    );
    assert_eq!(commits(&v), vec![2, 1]);
    let (status, v) = b.post("/v1/groups/r/reset", json!({"topic": "logs", "to": "sideways"}));
    assert_eq!(status, 400, "{v}");

    let (_, list) = b.get("/v1/groups");
    assert_eq!(list["groups"].as_array().unwrap().len(), 1);
    assert_eq!(list["groups"][0]["name"], "r");
    let m = join(&b, "r", &["logs"], LONG_SESSION_MS);
    let (status, v) = b.delete("/v1/groups/r");
    assert_eq!(status, 409, "{v}");
    let (status, _) = b.delete(&format!(
        "/v1/groups/r/members/{}",
        m["member_id"].as_str().unwrap()
    ));
    assert_eq!(status, 200);
    let (status, _) = b.delete("/v1/groups/r");
    assert_eq!(status, 200);
    assert_eq!(b.get("/v1/groups/r").0, 404);
    assert_eq!(b.get("/v1/groups/bad%2Fname").0, 400);
    let (status, v) = b.post("/v1/groups/x/members", json!({"topics": ["missing"]}));
    assert_eq!(status, 404, "{v}");
}

fn group_names(b: &Broker) -> Vec<String> {
    let (status, list) = b.get("/v1/groups");
    assert_eq!(status, 200, "{list}");
    list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect()
}

fn commit(b: &Broker, group: &str, offset: u64) -> (u16, Value) {
    b.post(
        &format!("/v1/groups/{group}/commits"),
        json!({"offsets": [{"topic": "t", "partition": 0, "offset": offset}]}),
    )
}

/// Contract: with `--groups-max 3`, a commit, reset or join that would
/// make a fourth group is 409 `too_many_groups` (over HTTP and the binary
/// protocol) and creates nothing; the groups there carry on; a group
/// deleted, or one that only had members and lost them, makes room again;
/// and groups loaded at start count.
#[test]
fn groups_max_refuses_a_group_more_and_changes_nothing() {
    let mut b = Broker::start_with(&["--shards", "2", "--groups-max", "3"]);
    assert_eq!(b.post("/v1/topics", json!({"name": "t", "partitions": 1})).0, 201);
    assert_eq!(commit(&b, "a", 1).0, 200);
    assert_eq!(commit(&b, "b", 2).0, 200);
    let m = join(&b, "c", &["t"], LONG_SESSION_MS);
    let full = |got: (u16, Value)| {
        assert_eq!(got.0, 409, "{}", got.1);
        assert_eq!(got.1["error"]["code"], "too_many_groups", "{}", got.1);
        assert!(
            got.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--groups-max"),
            "{}",
            got.1
        );
    };
    full(commit(&b, "d", 4));
    full(b.post("/v1/groups/e/reset", json!({"topic": "t", "to": "earliest"})));
    full(b.post("/v1/groups/f/members", json!({"topics": ["t"]})));
    let binary = BinaryClient::connect(&b.binary_addr(), Options::default()).unwrap();
    let e = binary
        .admin(
            Kind::CommitOffsets,
            json!({"group": "g", "offsets": [{"topic": "t", "partition": 0, "offset": 1}]}),
        )
        .unwrap_err();
    assert_eq!(e.code(), Some("too_many_groups"), "{e}");
    assert_eq!(group_names(&b), vec!["a", "b", "c"], "nothing was created");
    for g in ["d", "e", "f", "g"] {
        assert_eq!(b.get(&format!("/v1/groups/{g}")).0, 404, "{g}");
    }
    // The groups there carry on: a commit to one of them is no new group.
    assert_eq!(commit(&b, "a", 5).0, 200);
    assert_eq!(heartbeat(&b, "c", m["member_id"].as_str().unwrap()).0, 200);

    // A deleted group makes room; so does a group that only had members,
    // once they are gone (it had nothing to keep).
    assert_eq!(b.delete("/v1/groups/b").0, 200);
    assert_eq!(commit(&b, "d", 4).0, 200);
    full(commit(&b, "e", 1));
    let (status, v) = b.delete(&format!(
        "/v1/groups/c/members/{}",
        m["member_id"].as_str().unwrap()
    ));
    assert_eq!(status, 200, "{v}");
    assert_eq!(group_names(&b), vec!["a", "d"]);
    assert_eq!(commit(&b, "e", 1).0, 200);
    full(commit(&b, "h", 1));

    // After a restart the groups loaded count against the limit.
    b.kill9();
    b.restart();
    assert_eq!(group_names(&b), vec!["a", "d", "e"]);
    full(commit(&b, "h", 1));
    assert_eq!(b.metric("es_groups"), Some(3.0));
}

/// Contract: a group without members loses its offsets (the group is
/// deleted) once it has been idle for `--group-offsets-retention-ms`,
/// at a cleanup pass; a group with a member keeps them however long, and
/// its retention starts when its last member leaves. Expired groups stay
/// gone after a restart. (That the default keeps them for seven days, and
/// exactly when a retention is passed, is `group::tests`, whose clock is an
/// argument.)
#[test]
fn empty_groups_offsets_expire_after_the_retention() {
    // One shard, so that one cleanup pass looks at every group.
    let mut b = Broker::start_with(&[
        "--shards",
        "1",
        "--group-offsets-retention-ms",
        "1",
        "--cleanup-interval-ms",
        "20",
    ]);
    assert_eq!(b.post("/v1/topics", json!({"name": "t", "partitions": 1})).0, 201);
    let m = join(&b, "live", &["t"], LONG_SESSION_MS);
    let member = m["member_id"].as_str().unwrap().to_string();
    let (status, v) = b.post(
        "/v1/groups/live/commits",
        json!({"member_id": member, "generation": m["generation"],
               "offsets": [{"topic": "t", "partition": 0, "offset": 3}]}),
    );
    assert_eq!(status, 200, "{v}");
    let (status, v) = commit(&b, "idle", 2);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["offsets"][0]["offset"], 2, "{v}");
    wait_for("the idle group's offsets to expire", || {
        !group_names(&b).contains(&"idle".to_string())
    });
    // The pass that expired "idle" looked at "live" too (it was there
    // first), and left it: it has a member.
    let (status, v) = b.get("/v1/groups/live/commits");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["offsets"][0]["offset"], 3, "{v}");
    assert_eq!(b.get("/v1/groups/idle").0, 404);
    assert!(b.metric("es_group_offsets_expired_total").unwrap_or(0.0) >= 1.0);

    let (status, v) = b.delete(&format!("/v1/groups/live/members/{member}"));
    assert_eq!(status, 200, "{v}");
    wait_for("the group left empty to expire", || group_names(&b).is_empty());
    assert_eq!(b.metric("es_group_offsets_expired_total"), Some(2.0));
    b.kill9();
    b.restart();
    assert!(group_names(&b).is_empty(), "expired groups stay gone");
}
