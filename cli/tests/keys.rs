//! `es key` and `--api-key` against a broker with `--auth required`: keys
//! are made, shown and revoked; a missing key or grant fails with a
//! message that names the key, the operation and what to do.

mod common;

use common::{fails, ok, run_es, stdout, Broker};

fn es_as(b: &Broker, key: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--broker", b.addr.as_str()];
    all.extend_from_slice(args);
    run_es(&all, b"", &[("ES_API_KEY", key)])
}

#[test]
fn keys_are_made_shown_used_and_revoked() {
    let b = Broker::start_with(&["--auth", "required"]);
    let admin = std::fs::read_to_string(b.data_dir().join("admin.key")).unwrap();
    let admin = admin.trim();

    let err = fails(&b.es(&["topic", "list"]), 1);
    assert!(
        err.contains("unauthenticated") && err.contains("ES_API_KEY"),
        "{err}"
    );

    let out = ok(es_as(
        &b,
        admin,
        &[
            "key",
            "create",
            "svc",
            "--grant",
            "topic:prefixed:orders.:read,write,create",
            "--produce-quota",
            "1MiB",
        ],
    ));
    let key = stdout(&out).trim().to_string();
    assert!(key.starts_with("esk_") && key.len() == 81, "{key}");
    let id = &key[4..20];

    let who = stdout(&ok(es_as(&b, &key, &["key", "whoami", "--json"])));
    let who: serde_json::Value = serde_json::from_str(who.trim()).unwrap();
    assert_eq!(who["id"], id);
    assert_eq!(who["quota"]["produce_bytes_per_sec"], 1 << 20);

    ok(es_as(
        &b,
        &key,
        &["topic", "create", "orders.eu", "--partitions", "1"],
    ));
    let err = fails(
        &es_as(&b, &key, &["topic", "create", "billing", "--partitions", "1"]),
        1,
    );
    assert!(
        err.contains(id) && err.contains("create topic \"billing\"") && err.contains("forbidden"),
        "{err}"
    );
    let err = fails(&es_as(&b, &key, &["key", "list"]), 1);
    assert!(err.contains("admin key"), "{err}");

    let list = stdout(&ok(es_as(&b, admin, &["key", "list"])));
    assert!(list.contains(id) && list.contains("svc"), "{list}");
    ok(es_as(&b, admin, &["key", "revoke", id]));
    let err = fails(&es_as(&b, &key, &["topic", "list"]), 1);
    assert!(err.contains("revoked"), "{err}");
}
