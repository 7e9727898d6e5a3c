//! Grants against the real broker: prefix and literal boundaries for
//! topics and groups, each operation allowed by its one grant and refused
//! without it, implied operations, and authorization before existence
//! (a missing grant is 403 whether or not the name exists; lists show only
//! what the key may describe). docs/security.md, "Operation matrix".

mod auth_common;
mod common;

use auth_common::{call, grant, make_key};
use serde_json::json;

/// For each (pattern, name): names allowed and names refused.
const BOUNDARIES: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "prefixed",
        "orders",
        &["orders", "orders-eu", "ordersX"],
        &["order", "Orders", "xorders"],
    ),
    (
        "prefixed",
        "orders.",
        &["orders.eu", "orders."],
        &["orders", "orders-eu", "ordersX"],
    ),
    ("literal", "orders", &["orders"], &["orders-eu", "order"]),
    ("literal", "*", &["orders", "anything"], &[]),
];

#[test]
fn prefix_boundaries_for_topics_and_groups() {
    let (b, admin) = auth_common::start(&[]);
    for (pattern, name, yes, no) in BOUNDARIES {
        let (_, tkey) = make_key(
            &b,
            &admin,
            "t",
            false,
            json!([grant("topic", pattern, name, &["describe"])]),
        );
        let (_, gkey) = make_key(
            &b,
            &admin,
            "g",
            false,
            json!([grant("group", pattern, name, &["describe"])]),
        );
        for n in *yes {
            // Allowed, and missing: the grant lets it see that.
            let a = call(&b, "GET", &format!("/v1/topics/{n}"), &tkey, None);
            assert_eq!(
                (a.status, a.code()),
                (404, "topic_not_found"),
                "{pattern}:{name} topic {n}"
            );
            let a = call(&b, "GET", &format!("/v1/groups/{n}/commits"), &gkey, None);
            assert_ne!(a.status, 403, "{pattern}:{name} group {n}: {}", a.body);
        }
        for n in *no {
            let a = call(&b, "GET", &format!("/v1/topics/{n}"), &tkey, None);
            assert_eq!(
                (a.status, a.code()),
                (403, "forbidden"),
                "{pattern}:{name} topic {n}"
            );
            let a = call(&b, "GET", &format!("/v1/groups/{n}/commits"), &gkey, None);
            assert_eq!(
                (a.status, a.code()),
                (403, "forbidden"),
                "{pattern}:{name} group {n}"
            );
        }
    }
}

#[test]
fn each_operation_needs_its_grant() {
    let (b, admin) = auth_common::start(&[]);
    auth_common::create_topic(&b, &admin, "t", 1);
    let only = |ops: &[&str]| {
        make_key(
            &b,
            &admin,
            "k",
            false,
            json!([grant("topic", "literal", "t", ops)]),
        )
        .1
    };
    let none = make_key(
        &b,
        &admin,
        "none",
        false,
        json!([grant("topic", "literal", "other", &["all"])]),
    )
    .1;
    let produce = json!({"records": [{"value": "v"}]});
    let create = json!({"name": "t2", "partitions": 1});
    // (operation, the call)
    type Call<'a> = (&'a str, &'a str, String, Option<serde_json::Value>);
    let cases: Vec<(&str, Call)> = vec![
        (
            "write",
            (
                "POST",
                "produce",
                "/v1/topics/t/records".into(),
                Some(produce.clone()),
            ),
        ),
        (
            "read",
            (
                "GET",
                "fetch",
                "/v1/topics/t/partitions/0/records?offset=0".into(),
                None,
            ),
        ),
        ("describe", ("GET", "describe", "/v1/topics/t".into(), None)),
        (
            "alter",
            (
                "PATCH",
                "patch",
                "/v1/topics/t/config".into(),
                Some(json!({"retention_ms": 60000})),
            ),
        ),
    ];
    for (op, (method, what, path, body)) in &cases {
        let a = call(&b, method, path, &none, body.as_ref());
        assert_eq!((a.status, a.code()), (403, "forbidden"), "{what} without {op}");
        let msg = a.body["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains(op) && msg.contains("topic \"t\""), "{msg}");
        let a = call(&b, method, path, &only(&[op]), body.as_ref());
        assert!(a.status < 300, "{what} with only {op}: {}", a.body);
    }
    // Create: on the name, or on the cluster.
    let creator = make_key(
        &b,
        &admin,
        "c",
        false,
        json!([grant("topic", "literal", "t2", &["create"])]),
    )
    .1;
    assert_eq!(call(&b, "POST", "/v1/topics", &none, Some(&create)).status, 403);
    assert_eq!(
        call(&b, "POST", "/v1/topics", &creator, Some(&create)).status,
        201
    );
    let cluster = make_key(
        &b,
        &admin,
        "cl",
        false,
        json!([{"resource": "cluster", "operations": ["create"]}]),
    )
    .1;
    assert_eq!(
        call(
            &b,
            "POST",
            "/v1/topics",
            &cluster,
            Some(&json!({"name": "t3", "partitions": 1}))
        )
        .status,
        201
    );
    // Delete.
    assert_eq!(call(&b, "DELETE", "/v1/topics/t", &none, None).status, 403);
    assert_eq!(
        call(&b, "DELETE", "/v1/topics/t", &only(&["delete"]), None).status,
        200
    );
}

#[test]
fn read_implies_describe_and_not_the_reverse() {
    let (b, admin) = auth_common::start(&[]);
    auth_common::create_topic(&b, &admin, "t", 1);
    let reader = make_key(
        &b,
        &admin,
        "r",
        false,
        json!([grant("topic", "literal", "t", &["read"])]),
    )
    .1;
    let describer = make_key(
        &b,
        &admin,
        "d",
        false,
        json!([grant("topic", "literal", "t", &["describe"])]),
    )
    .1;
    assert_eq!(call(&b, "GET", "/v1/topics/t", &reader, None).status, 200);
    assert_eq!(call(&b, "GET", "/v1/topics/t", &describer, None).status, 200);
    let fetch = "/v1/topics/t/partitions/0/records?offset=0";
    assert_eq!(call(&b, "GET", fetch, &reader, None).status, 200);
    assert_eq!(call(&b, "GET", fetch, &describer, None).status, 403);
}

#[test]
fn existence_is_hidden_and_lists_are_filtered() {
    let (b, admin) = auth_common::start(&[]);
    for t in ["orders.eu", "orders.us", "billing"] {
        auth_common::create_topic(&b, &admin, t, 1);
    }
    let key = make_key(
        &b,
        &admin,
        "o",
        false,
        json!([grant("topic", "prefixed", "orders.", &["read"])]),
    )
    .1;
    for missing_or_not in ["billing", "nothing-here"] {
        let a = call(&b, "GET", &format!("/v1/topics/{missing_or_not}"), &key, None);
        assert_eq!((a.status, a.code()), (403, "forbidden"), "{missing_or_not}");
    }
    let listed = call(&b, "GET", "/v1/topics", &key, None);
    let names: Vec<&str> = listed.body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("orders.")), "{names:?}");
}

#[test]
fn binary_requests_are_checked_and_the_connection_stays_open() {
    use es_protocol::requests::produce::ProduceRecord;
    let (b, admin) = auth_common::start(&[]);
    auth_common::create_topic(&b, &admin, "t", 1);
    let key = make_key(
        &b,
        &admin,
        "r",
        false,
        json!([grant("topic", "literal", "t", &["read"])]),
    )
    .1;
    let client = auth_common::client(&b, &key);
    let record = ProduceRecord {
        key: None,
        value: b"v".to_vec(),
        partition: Some(0),
        timestamp_ms: None,
    };
    let e = client.produce("t", vec![record]).unwrap_err();
    assert_eq!(e.code(), Some("forbidden"), "{e}");
    let e = client
        .admin(es_protocol::Kind::DescribeTopic, json!({"name": "missing"}))
        .unwrap_err();
    assert_eq!(e.code(), Some("forbidden"), "authorization before existence: {e}");
    let d = client
        .admin(es_protocol::Kind::DescribeTopic, json!({"name": "t"}))
        .unwrap();
    assert_eq!(d["name"], "t", "the connection stays open");
    let e = client.init_producer(None).unwrap_err();
    assert_eq!(
        e.code(),
        Some("forbidden"),
        "a producer id needs write on some topic"
    );
}
