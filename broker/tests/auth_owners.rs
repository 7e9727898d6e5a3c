//! Ownership against the real broker (docs/security.md, "Ownership"): a
//! group belongs to the key that made it, a producer id to the key that
//! asked for it; another key with the same grants is refused `not_owner`
//! (and changes nothing: a producer's epoch stays), an admin may use and
//! hand them over, and ownership survives a restart.

mod auth_common;
mod common;

use auth_common::{call, grant, make_key};
use serde_json::json;

fn same_grants() -> serde_json::Value {
    json!([
        grant("topic", "literal", "t", &["read", "write"]),
        grant("group", "prefixed", "g", &["read", "delete"]),
    ])
}

fn commit(b: &common::Broker, key: &str, group: &str) -> auth_common::Answer {
    call(
        b,
        "POST",
        &format!("/v1/groups/{group}/commits"),
        key,
        Some(&json!({"offsets": [{"topic": "t", "partition": 0, "offset": 0}]})),
    )
}

#[test]
fn a_group_belongs_to_its_key() {
    let (mut b, admin) = auth_common::start(&[]);
    auth_common::create_topic(&b, &admin, "t", 1);
    let (_, a) = make_key(&b, &admin, "a", false, same_grants());
    let (bid, other) = make_key(&b, &admin, "b", false, same_grants());
    assert_eq!(commit(&b, &a, "g1").status, 200, "A creates g1 with a commit");
    let refused = [
        commit(&b, &other, "g1"),
        call(
            &b,
            "POST",
            "/v1/groups/g1/members",
            &other,
            Some(&json!({"topics": ["t"]})),
        ),
        call(
            &b,
            "POST",
            "/v1/groups/g1/reset",
            &other,
            Some(&json!({"topic": "t", "to": "earliest"})),
        ),
        call(&b, "DELETE", "/v1/groups/g1", &other, None),
    ];
    for a in refused {
        assert_eq!((a.status, a.code()), (403, "not_owner"), "{}", a.body);
    }
    assert_eq!(commit(&b, &a, "g1").status, 200, "its owner goes on");
    let described = call(&b, "GET", "/v1/groups/g1", &a, None);
    assert_eq!(described.body["owner"], a[4..20], "{}", described.body);
    assert_eq!(commit(&b, &admin, "g1").status, 200, "an admin may");

    // A group made by a join is owned from the join.
    let joined = call(
        &b,
        "POST",
        "/v1/groups/g2/members",
        &a,
        Some(&json!({"topics": ["t"]})),
    );
    assert_eq!(joined.status, 201, "{}", joined.body);
    let a2 = call(
        &b,
        "POST",
        "/v1/groups/g2/members",
        &other,
        Some(&json!({"topics": ["t"]})),
    );
    assert_eq!((a2.status, a2.code()), (403, "not_owner"));

    // Only an admin hands a group over.
    let hand = call(&b, "PATCH", "/v1/groups/g1", &a, Some(&json!({"owner": bid})));
    assert_eq!((hand.status, hand.code()), (403, "forbidden"));
    let hand = call(&b, "PATCH", "/v1/groups/g1", &admin, Some(&json!({"owner": bid})));
    assert_eq!(hand.status, 200, "{}", hand.body);
    assert_eq!(commit(&b, &other, "g1").status, 200, "the new owner");
    assert_eq!(commit(&b, &a, "g1").code(), "not_owner", "the old one no longer");

    b.sigterm_and_wait();
    b.restart();
    assert_eq!(commit(&b, &a, "g1").code(), "not_owner", "ownership is durable");
    assert_eq!(commit(&b, &other, "g1").status, 200);
    b.kill9();
    b.restart();
    assert_eq!(commit(&b, &a, "g1").code(), "not_owner", "after kill -9 too");
}

#[test]
fn a_group_made_without_auth_is_claimed_by_the_first_key() {
    let mut b = common::Broker::start_with(&[]);
    common::create_topic(&b, "t", 1);
    let (s, _) = b.post(
        "/v1/groups/g0/commits",
        json!({"offsets": [{"topic": "t", "partition": 0, "offset": 0}]}),
    );
    assert_eq!(s, 200);
    b.sigterm_and_wait();
    // The same data dir, now with auth.
    let mut b = restart_with_auth(b);
    let admin = auth_common::admin_key(&b);
    let (_, a) = make_key(&b, &admin, "a", false, same_grants());
    let (_, other) = make_key(&b, &admin, "b", false, same_grants());
    assert_eq!(commit(&b, &a, "g0").status, 200, "claimed");
    assert_eq!(commit(&b, &other, "g0").code(), "not_owner");
    b.sigterm_and_wait();
    b.restart();
    assert_eq!(
        commit(&b, &other, "g0").code(),
        "not_owner",
        "the claim is durable"
    );
}

/// Restarts `b` on its data dir with `--auth required` (a new broker
/// process with the same addresses).
fn restart_with_auth(mut b: common::Broker) -> common::Broker {
    b.add_args(&["--auth", "required"]);
    b.restart();
    b
}

#[test]
fn a_producer_id_belongs_to_its_key() {
    let (mut b, admin) = auth_common::start(&[]);
    auth_common::create_topic(&b, &admin, "t", 1);
    let (_, a) = make_key(&b, &admin, "a", false, same_grants());
    let (_, other) = make_key(&b, &admin, "b", false, same_grants());
    let init = |b: &common::Broker, key: &str, body: serde_json::Value| {
        call(b, "POST", "/v1/producers", key, Some(&body))
    };
    let mine = init(&b, &a, json!({}));
    assert_eq!(mine.status, 200, "{}", mine.body);
    let id = mine.body["producer_id"].as_i64().unwrap();
    assert_eq!(mine.body["epoch"], 0);

    let stolen = init(&b, &other, json!({"producer_id": id}));
    assert_eq!(
        (stolen.status, stolen.code()),
        (403, "not_owner"),
        "{}",
        stolen.body
    );
    let produce = |key: &str| {
        call(
            &b,
            "POST",
            "/v1/topics/t/records",
            key,
            Some(
                &json!({"records": [{"value": "v", "partition": 0}], "producer_id": id, "epoch": 0, "sequence": 0}),
            ),
        )
    };
    let a2 = produce(&other);
    assert_eq!((a2.status, a2.code()), (403, "not_owner"), "{}", a2.body);
    assert_eq!(produce(&a).status, 200, "its owner writes");
    // Over the binary protocol too.
    let client = auth_common::client(&b, &other);
    let record = es_protocol::requests::produce::ProduceRecord {
        key: None,
        value: b"v".to_vec(),
        partition: Some(0),
        timestamp_ms: None,
    };
    let e = client
        .produce_idempotent("t", (id, 0, 1), vec![record])
        .unwrap_err();
    assert_eq!(e.code(), Some("not_owner"), "{e}");

    let again = init(&b, &a, json!({"producer_id": id}));
    assert_eq!(
        again.body["epoch"], 1,
        "the refused attempt did not bump the epoch"
    );
    b.sigterm_and_wait();
    b.restart();
    let stolen = init(&b, &other, json!({"producer_id": id}));
    assert_eq!(stolen.code(), "not_owner", "ownership is durable");
    assert_eq!(
        init(&b, &admin, json!({"producer_id": id})).status,
        200,
        "an admin may"
    );
}
