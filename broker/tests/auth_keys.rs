//! API keys against the real broker (`--auth required`): which keys
//! authenticate on HTTP and on the binary protocol, revocation reaching
//! open connections and surviving a restart, the bootstrap admin key,
//! `ES_ADMIN_KEY`, the last admin, and keys surviving `kill -9` once
//! their 201 was answered. docs/security.md.

mod auth_common;
mod common;

use std::net::TcpStream;

use auth_common::{call, call_auth, grant, hello, key_from, make_key};
use common::Broker;
use serde_json::json;

/// The bad keys every transport refuses, by name.
fn bad_keys(admin: &str, revoked: &str) -> Vec<(&'static str, String)> {
    let id: [u8; 10] = {
        let parsed = &admin[4..20];
        let mut out = [0u8; 10];
        // Any other id: an unknown one.
        out[0] = parsed.as_bytes()[0].wrapping_add(1);
        out
    };
    let mut bad_crc = admin.to_string();
    let last = bad_crc.pop().unwrap();
    bad_crc.push(if last == 'a' { 'b' } else { 'a' });
    // The admin's id with another secret, checksum right: a wrong secret.
    let same_id = auth_common::key_with_id(&admin[4..20], [9; 32]);
    vec![
        ("empty", String::new()),
        ("malformed", "esk_nope".to_string()),
        ("bad checksum", bad_crc),
        ("unknown id", key_from(id, [3; 32])),
        ("wrong secret", same_id),
        ("revoked", revoked.to_string()),
    ]
}

#[test]
fn http_refuses_every_bad_key_with_401_and_a_challenge() {
    let (b, admin) = auth_common::start(&[]);
    let (rid, revoked) = make_key(&b, &admin, "gone", false, json!([]));
    assert_eq!(
        call(&b, "DELETE", &format!("/v1/keys/{rid}"), &admin, None).status,
        200
    );
    let missing = call_auth(&b, "GET", "/v1/topics", None, None);
    assert_eq!((missing.status, missing.code()), (401, "unauthenticated"));
    assert_eq!(missing.challenge.as_deref(), Some("Bearer realm=\"es\""));
    for (what, key) in bad_keys(&admin, &revoked) {
        let a = call(&b, "GET", "/v1/topics", &key, None);
        assert_eq!(
            (a.status, a.code()),
            (401, "unauthenticated"),
            "{what}: {}",
            a.body
        );
        assert_eq!(a.challenge.as_deref(), Some("Bearer realm=\"es\""), "{what}");
        let says_revoked = a.body["error"]["message"].as_str().unwrap().contains("revoked");
        assert_eq!(says_revoked, what == "revoked", "{what}: {}", a.body);
    }
    assert_eq!(call(&b, "GET", "/v1/topics", &admin, None).status, 200);
    // Basic: the user name must be the key's id.
    let basic = |user: &str, key: &str| {
        let token = common::b64_encode(format!("{user}:{key}").as_bytes());
        call_auth(&b, "GET", "/v1/whoami", Some(&format!("Basic {token}")), None)
    };
    let id = &admin[4..20];
    assert_eq!(basic(id, &admin).status, 200);
    assert_eq!(basic("someone", &admin).status, 401);
    let refused = b
        .metric("es_auth_unauthenticated_total{listener=\"http\"}")
        .unwrap_or(0.0);
    assert!(refused >= 8.0, "every 401 is counted: {refused}");
    // Probes and the scrape stay open.
    for open in ["/health", "/ready", "/metrics"] {
        assert_eq!(call_auth(&b, "GET", open, None, None).status, 200, "{open}");
    }
}

#[test]
fn binary_refuses_every_bad_key_then_closes() {
    let (b, admin) = auth_common::start(&[]);
    let (rid, revoked) = make_key(&b, &admin, "gone", false, json!([]));
    assert_eq!(
        call(&b, "DELETE", &format!("/v1/keys/{rid}"), &admin, None).status,
        200
    );
    for (what, key) in bad_keys(&admin, &revoked) {
        let (mut s, resp) = hello(&b, &key);
        assert_eq!(auth_common::error_code(&resp), "unauthenticated", "{what}");
        assert!(auth_common::closed(&mut s), "{what}: the connection closes");
    }
    let (_s, resp) = hello(&b, &admin);
    assert!(matches!(resp, es_protocol::Response::HelloOk(_)));
    let who = auth_common::client(&b, &admin)
        .admin(es_protocol::Kind::WhoAmI, json!({}))
        .unwrap();
    assert_eq!(who["id"], &admin[4..20]);
}

#[test]
fn revocation_reaches_open_connections_and_survives_a_restart() {
    let (mut b, admin) = auth_common::start(&[]);
    let (id, key) = make_key(
        &b,
        &admin,
        "svc",
        false,
        json!([grant("topic", "literal", "*", &["all"])]),
    );
    // An HTTP keep-alive connection and a binary one, both working.
    let mut http = TcpStream::connect(b.addr()).unwrap();
    assert_eq!(auth_common::raw_get(&mut http, "/v1/topics", &key).status, 200);
    let bin = auth_common::client(&b, &key);
    bin.admin(es_protocol::Kind::ListTopics, json!({})).unwrap();

    let a = call(&b, "DELETE", &format!("/v1/keys/{id}"), &admin, None);
    assert_eq!(a.pair(), (200, json!({"id": id, "revoked": true})));

    let r = auth_common::raw_get(&mut http, "/v1/topics", &key);
    assert_eq!(r.status, 401, "the next request on the keep-alive connection");
    let e = bin.admin(es_protocol::Kind::ListTopics, json!({})).unwrap_err();
    assert_eq!(e.code(), Some("unauthenticated"), "{e}");
    assert!(
        bin.admin(es_protocol::Kind::ListTopics, json!({})).is_err(),
        "the binary connection is closed"
    );
    let (_s, resp) = hello(&b, &key);
    assert_eq!(
        auth_common::error_code(&resp),
        "unauthenticated",
        "a new connection"
    );

    b.sigterm_and_wait();
    b.restart();
    assert_eq!(
        call(&b, "GET", "/v1/topics", &key, None).status,
        401,
        "still revoked"
    );
    let listed = call(&b, "GET", &format!("/v1/keys/{id}"), &admin, None);
    assert_eq!(listed.body["revoked"], true);
}

#[test]
fn the_bootstrap_admin_key_is_made_once() {
    use std::os::unix::fs::PermissionsExt;
    let (mut b, admin) = auth_common::start(&[]);
    let path = b.data_dir().join("admin.key");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(b.data_dir().join("api_keys.json"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let who = call(&b, "GET", "/v1/whoami", &admin, None);
    assert_eq!((who.status, who.body["admin"].clone()), (200, json!(true)));
    b.sigterm_and_wait();
    b.restart();
    assert_eq!(auth_common::admin_key(&b), admin, "admin.key is not rewritten");
    let keys = call(&b, "GET", "/v1/keys", &admin, None);
    assert_eq!(
        keys.body["keys"].as_array().unwrap().len(),
        1,
        "no second key: {}",
        keys.body
    );
}

#[test]
fn es_admin_key_is_the_first_admin_key() {
    let key = key_from([5; 10], [6; 32]);
    let b = Broker::start_env(&["--auth", "required"], &[("ES_ADMIN_KEY", &key)]);
    assert!(!b.data_dir().join("admin.key").exists());
    assert_eq!(call(&b, "GET", "/v1/whoami", &key, None).status, 200);
}

#[test]
fn the_last_admin_cannot_be_revoked_or_demoted() {
    let (b, admin) = auth_common::start(&[]);
    let id = admin[4..20].to_string();
    let a = call(&b, "DELETE", &format!("/v1/keys/{id}"), &admin, None);
    assert_eq!((a.status, a.code()), (409, "last_admin"), "{}", a.body);
    let a = call(
        &b,
        "PATCH",
        &format!("/v1/keys/{id}"),
        &admin,
        Some(&json!({"admin": false})),
    );
    assert_eq!((a.status, a.code()), (409, "last_admin"));
    let (_, second) = make_key(&b, &admin, "ops-2", true, json!([]));
    assert_eq!(
        call(&b, "DELETE", &format!("/v1/keys/{id}"), &second, None).status,
        200
    );
    assert_eq!(call(&b, "GET", "/v1/whoami", &admin, None).status, 401);
}

#[test]
fn key_management_errors() {
    let (b, admin) = auth_common::start(&[]);
    let a = call(&b, "GET", "/v1/keys/aaaaaaaaaaaaaaaa", &admin, None);
    assert_eq!((a.status, a.code()), (404, "key_not_found"));
    let bad = [
        json!({"name": "x", "grants": [grant("topic", "prefixed", "", &["read"])]}),
        json!({"name": "x", "grants": [grant("topic", "literal", "t", &["fly"])]}),
        json!({"name": "x", "grants": (0..101).map(|i| grant("topic", "literal", &format!("t{i}"), &["read"])).collect::<Vec<_>>()}),
        json!({"name": "no spaces"}),
        json!({"name": ""}),
    ];
    for body in bad {
        let a = call(&b, "POST", "/v1/keys", &admin, Some(&body));
        assert_eq!(
            (a.status, a.code()),
            (400, "invalid_request"),
            "{body}: {}",
            a.body
        );
    }
    let (_, plain) = make_key(
        &b,
        &admin,
        "plain",
        false,
        json!([grant("topic", "literal", "*", &["all"])]),
    );
    let a = call(&b, "GET", "/v1/keys", &plain, None);
    assert_eq!((a.status, a.code()), (403, "forbidden"));
    let who = call(&b, "GET", "/v1/whoami", &plain, None);
    assert_eq!(who.status, 200);
    assert!(who.body.get("key").is_none() && who.body.get("token_sha256").is_none());
    // A quota is stored and shown.
    let a = call(
        &b,
        "POST",
        "/v1/keys",
        &admin,
        Some(
            &json!({"name": "q", "grants": [], "quota": {"produce_bytes_per_sec": 1048576, "fetch_bytes_per_sec": null}}),
        ),
    );
    assert_eq!(a.status, 201);
    assert_eq!(
        a.body["quota"],
        json!({"produce_bytes_per_sec": 1048576, "fetch_bytes_per_sec": null})
    );
}

/// Contract: a key whose create was answered 201 authenticates after the
/// broker is killed with SIGKILL and restarted.
#[test]
fn a_created_key_survives_kill_9() {
    let (mut b, admin) = auth_common::start(&[]);
    let (_, key) = make_key(&b, &admin, "durable", false, json!([]));
    b.kill9();
    b.restart();
    assert_eq!(call(&b, "GET", "/v1/whoami", &key, None).status, 200);
}

#[test]
fn a_non_loopback_listener_without_tls_refuses_to_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args([
            "--auth",
            "required",
            "--http-addr",
            "0.0.0.0:1",
            "--data-dir",
            "/nonexistent-es",
        ])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--http-addr") && err.contains("--allow-plaintext-auth"),
        "{err}"
    );
}

/// A binary connection that moves to its partition's shard keeps its key:
/// after the move it is still refused what its grants do not allow (it is
/// not served as if auth were off), and its key's revocation still closes it.
#[test]
fn a_moving_connection_keeps_its_key() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    let (b, admin) = auth_common::start(&["--shards", "2"]);
    auth_common::create_topic(&b, &admin, "mv", 4);
    let (id, key) = make_key(
        &b,
        &admin,
        "mover",
        false,
        json!([grant("topic", "literal", "mv", &["write"])]),
    );
    let client = auth_common::client(&b, &key);
    let moved = || b.metric_sum("es_binary_connections_moved_total").unwrap_or(0.0);
    // Batches to each partition in turn, many in a row: the partitions of
    // the other shard draw the connection there.
    for partition in 0..4u32 {
        for _ in 0..12 {
            let mut bb = BatchBuilder::default();
            bb.push(None, b"v", 1_700_000_000_000);
            let req = es_protocol::Request::ProduceBatch(ProduceBatch {
                topic: "mv".into(),
                partition,
                batch: bb.finish(0, None).unwrap(),
            });
            client.call(&req).expect("produce");
        }
    }
    common::wait_until("the connection moved", std::time::Duration::from_secs(60), || {
        moved() >= 1.0
    });
    let e = client
        .admin(es_protocol::Kind::DescribeTopic, json!({"name": "other"}))
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some("forbidden"),
        "still the key's grants after the move: {e}"
    );
    assert_eq!(
        call(&b, "DELETE", &format!("/v1/keys/{id}"), &admin, None).status,
        200
    );
    let e = client
        .admin(es_protocol::Kind::DescribeTopic, json!({"name": "mv"}))
        .unwrap_err();
    assert_eq!(e.code(), Some("unauthenticated"), "{e}");
}

/// SIGHUP reads api_keys.json again: a file put back from before a key
/// was made no longer knows it; a file that does not parse leaves the keys
/// in force.
#[test]
fn sighup_reloads_the_key_file() {
    let (b, admin) = auth_common::start(&[]);
    let file = b.data_dir().join("api_keys.json");
    let before = std::fs::read(&file).unwrap();
    let (_, key) = make_key(&b, &admin, "later", false, json!([]));
    assert_eq!(call(&b, "GET", "/v1/whoami", &key, None).status, 200);
    let hup = || {
        // SAFETY: kill(2) on the broker child's pid.
        assert_eq!(unsafe { libc::kill(b.pid() as i32, libc::SIGHUP) }, 0);
    };
    std::fs::write(&file, b"{ not json").unwrap();
    hup();
    common::wait_until(
        "the broken file to be refused",
        std::time::Duration::from_secs(60),
        || b.stderr_text().contains("the keys in force stay"),
    );
    assert_eq!(
        call(&b, "GET", "/v1/whoami", &key, None).status,
        200,
        "the keys in force stay"
    );
    std::fs::write(&file, &before).unwrap();
    hup();
    common::wait_until(
        "the old file to be in force",
        std::time::Duration::from_secs(60),
        || call(&b, "GET", "/v1/whoami", &key, None).status == 401,
    );
    assert_eq!(call(&b, "GET", "/v1/whoami", &admin, None).status, 200);
}
