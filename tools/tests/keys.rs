//! `es-tools key create|list|revoke`: API keys of a stopped broker's data
//! dir, offline, as the real broker then reads them. An admin key created
//! offline on a `--auth required` broker's dir works once the broker
//! starts (HTTP whoami, and it can manage keys); one revoked offline is
//! refused after the restart; `list` shows ids and names, never a secret
//! or a digest; the last admin key is not revoked; a running broker's dir
//! is refused (exit 2) and left as it was.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::broker::Broker;
use common::*;
use serde_json::{json, Value};

const AUTH: &[&str] = &["--auth", "required"];

fn key_tool(args: &[&str], want: i32) -> std::process::Output {
    let o = tools(args);
    assert_eq!(code(&o), want, "es-tools {args:?}: {}{}", stdout(&o), stderr(&o));
    o
}

fn json_out(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn offline_keys_on_a_stopped_broker() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let d = data.to_str().unwrap();

    // A broker with --auth required makes its bootstrap admin key.
    let mut b = Broker::start_with(&data, None, AUTH);
    let bootstrap = std::fs::read_to_string(data.join("admin.key"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(b.ok_as(&bootstrap, "GET", "/v1/whoami", None)["admin"], true);

    // While it runs, es-tools refuses the dir and changes nothing.
    let before = std::fs::read(data.join("api_keys.json")).unwrap();
    for args in [
        vec!["key", "create", "--data-dir", d, "--admin", "--name", "ops"],
        vec!["key", "list", "--data-dir", d],
        vec!["key", "revoke", "--data-dir", d, "aaaaaaaaaaaaaaaa"],
    ] {
        let o = key_tool(&args, 2);
        assert!(
            stderr(&o).contains("in use by a running es-broker"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(std::fs::read(data.join("api_keys.json")).unwrap(), before);
    assert!(b.running(), "the broker is unaffected");
    assert_eq!(b.call_as(&bootstrap, "GET", "/v1/whoami", None).0, 200);
    b.stop();

    // Offline: a new admin key (every admin key lost: the recovery path).
    let o = key_tool(
        &[
            "key",
            "create",
            "--data-dir",
            d,
            "--admin",
            "--name",
            "ops",
            "--json",
        ],
        0,
    );
    let created = json_out(&o);
    let ops = created["key"].as_str().unwrap().to_string();
    let ops_id = created["id"].as_str().unwrap().to_string();
    assert!(ops.starts_with(&format!("esk_{ops_id}_")), "{created}");
    let mode = std::fs::metadata(data.join("api_keys.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the key file stays private");
    let file = std::fs::read_to_string(data.join("api_keys.json")).unwrap();
    assert!(!file.contains(&ops[21..73]), "the file holds no secret");

    // Plain output: the key alone on stdout.
    let o = key_tool(
        &["key", "create", "--data-dir", d, "--admin", "--name", "spare"],
        0,
    );
    let spare = stdout(&o).trim().to_string();
    assert_eq!(spare.len(), 81, "{spare}");
    assert!(stderr(&o).contains("shown only this once"), "{}", stderr(&o));

    // list: ids and names, never a secret or a digest.
    let listed = json_out(&key_tool(&["key", "list", "--data-dir", d, "--json"], 0));
    let names: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bootstrap-admin", "ops", "spare"], "{listed}");
    let plain = stdout(&key_tool(&["key", "list", "--data-dir", d], 0));
    assert!(plain.contains(&ops_id) && plain.contains("ops"), "{plain}");
    for text in [listed.to_string(), plain] {
        for key in [&bootstrap, &ops, &spare] {
            assert!(!text.contains(&key[21..73]), "a secret in {text}");
        }
        assert!(!text.contains("esk_"), "{text}");
        let digest: String = file
            .lines()
            .find(|l| l.contains("token_sha256"))
            .unwrap()
            .split('"')
            .nth(3)
            .unwrap()
            .to_string();
        assert!(!text.contains(&digest), "a digest in {text}");
    }

    // The broker takes the offline key: whoami, and key management.
    let mut b = Broker::start_with(&data, None, AUTH);
    let who = b.ok_as(&ops, "GET", "/v1/whoami", None);
    assert_eq!(
        (who["id"].as_str(), who["name"].as_str(), who["admin"].as_bool()),
        (Some(&*ops_id), Some("ops"), Some(true)),
        "{who}"
    );
    b.ok_as(&ops, "POST", "/v1/keys", Some(json!({"name": "made-by-ops"})));
    b.stop();

    // Revoke offline; after the restart the key is refused.
    let o = key_tool(&["key", "revoke", "--data-dir", d, &ops_id], 0);
    assert!(stdout(&o).contains("revoked"), "{}", stdout(&o));
    key_tool(&["key", "revoke", "--data-dir", d, &ops_id], 0); // again: no change
    let o = key_tool(&["key", "revoke", "--data-dir", d, "aaaaaaaaaaaaaaaa"], 2);
    assert!(stderr(&o).contains("no API key has id"), "{}", stderr(&o));
    let mut b = Broker::start_with(&data, None, AUTH);
    let (status, v) = b.call_as(&ops, "GET", "/v1/whoami", None);
    assert_eq!(status, 401, "{v}");
    assert_eq!(v["error"]["code"], "unauthenticated", "{v}");
    assert_eq!(b.call_as(&spare, "GET", "/v1/whoami", None).0, 200);
    b.stop();

    // The last live admin key is not revoked.
    let bootstrap_id = &bootstrap[4..20];
    key_tool(&["key", "revoke", "--data-dir", d, bootstrap_id], 0);
    let spare_id = &spare[4..20];
    let o = key_tool(&["key", "revoke", "--data-dir", d, spare_id], 2);
    assert!(stderr(&o).contains("last admin key"), "{}", stderr(&o));
    let listed = json_out(&key_tool(&["key", "list", "--data-dir", d, "--json"], 0));
    let live: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["admin"] == true && k["revoked"] == false)
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(live, [spare_id]);
}

#[test]
fn bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = key_tool(&["key", "create", "--data-dir", d, "--admin", "--name", "a b"], 2);
    assert!(stderr(&o).contains("a key name is"), "{}", stderr(&o));
    key_tool(&["key", "create", "--data-dir", d, "--name", "ops"], 2); // --admin is required
    let missing = dir.path().join("nope");
    key_tool(&["key", "list", "--data-dir", missing.to_str().unwrap()], 2);
    // A key file that does not parse is named, never replaced.
    std::fs::write(dir.path().join("api_keys.json"), "{").unwrap();
    let o = key_tool(&["key", "create", "--data-dir", d, "--admin", "--name", "ops"], 2);
    assert!(
        stderr(&o).contains("api_keys.json does not parse"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("api_keys.json")).unwrap(),
        "{"
    );
    // A dir without a key file: create starts one.
    std::fs::remove_file(dir.path().join("api_keys.json")).unwrap();
    let listed = json_out(&key_tool(&["key", "list", "--data-dir", d, "--json"], 0));
    assert_eq!(listed["keys"], json!([]));
    key_tool(
        &["key", "create", "--data-dir", d, "--admin", "--name", "first"],
        0,
    );
    let listed = json_out(&key_tool(&["key", "list", "--data-dir", d, "--json"], 0));
    assert_eq!(listed["keys"].as_array().unwrap().len(), 1);
}

/// The round trip with `--auth required`: the keys (hashes only, private)
/// and the owners of groups and producer ids survive dump, restore and a
/// start; the old keys work, a revoked one stays revoked, and ownership
/// is still enforced.
#[test]
fn auth_round_trip_keeps_keys_and_owners() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, new) = (tmp.path().join("src"), tmp.path().join("new"));
    let mut b = Broker::start_with(&src, None, AUTH);
    let admin = std::fs::read_to_string(src.join("admin.key"))
        .unwrap()
        .trim()
        .to_string();
    let all = json!([{"resource": "topic", "pattern": "literal", "name": "*", "operations": ["all"]},
                     {"resource": "group", "pattern": "literal", "name": "*", "operations": ["all"]}]);
    let mut keys = Vec::new();
    for name in ["svc", "other", "gone"] {
        let k = b.ok_as(
            &admin,
            "POST",
            "/v1/keys",
            Some(json!({"name": name, "grants": all})),
        );
        keys.push((
            k["key"].as_str().unwrap().to_string(),
            k["id"].as_str().unwrap().to_string(),
        ));
    }
    let [(svc, svc_id), (other, _), (gone, gone_id)] = [keys[0].clone(), keys[1].clone(), keys[2].clone()];
    b.ok_as(&admin, "DELETE", &format!("/v1/keys/{gone_id}"), None);
    b.ok_as(
        &admin,
        "POST",
        "/v1/topics",
        Some(json!({"name": "t", "partitions": 1})),
    );
    for i in 0..5 {
        b.ok_as(
            &svc,
            "POST",
            "/v1/topics/t/records",
            Some(json!({"records": [{"value": format!("v{i}")}]})),
        );
    }
    b.ok_as(
        &svc,
        "POST",
        "/v1/groups/g/commits",
        Some(json!({"offsets": [{"topic": "t", "partition": 0, "offset": 3}]})),
    );
    let pid = b.ok_as(&svc, "POST", "/v1/producers", None);
    let last = json!({"records": [{"value": "p", "partition": 0}], "producer_id": pid["producer_id"],
                      "epoch": pid["epoch"], "sequence": 0});
    let answer = b.ok_as(&svc, "POST", "/v1/topics/t/records", Some(last.clone()));
    let before = common::broker::all_records_as(&b, Some(&svc), "t", 0);
    b.stop();

    let archive = tmp.path().join("a.tar");
    dump_to(&src, &archive, &[], 0);
    restore_to(&archive, &new, &[], 0);
    let mode = std::fs::metadata(new.join("api_keys.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "restored private");
    assert!(!new.join("admin.key").exists(), "no plaintext key travels");

    let mut b = Broker::start_with(&new, None, AUTH);
    assert_eq!(b.ok_as(&admin, "GET", "/v1/whoami", None)["admin"], true);
    assert_eq!(b.ok_as(&svc, "GET", "/v1/whoami", None)["id"], svc_id.as_str());
    assert_eq!(
        b.call_as(&gone, "GET", "/v1/whoami", None).0,
        401,
        "revoked stays revoked"
    );
    assert_eq!(common::broker::all_records_as(&b, Some(&svc), "t", 0), before);
    // The group's owner came along: another key may not commit to it.
    assert_eq!(
        b.ok_as(&admin, "GET", "/v1/groups/g", None)["owner"],
        svc_id.as_str()
    );
    let (status, e) = b.call_as(
        &other,
        "POST",
        "/v1/groups/g/commits",
        Some(json!({"offsets": [{"topic": "t", "partition": 0, "offset": 4}]})),
    );
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("not_owner")),
        "{e}"
    );
    b.ok_as(
        &svc,
        "POST",
        "/v1/groups/g/commits",
        Some(json!({"offsets": [{"topic": "t", "partition": 0, "offset": 4}]})),
    );
    // The producer id's owner and state came along: the retry is a
    // duplicate; another key may not take the id.
    let again = b.ok_as(&svc, "POST", "/v1/topics/t/records", Some(last));
    assert_eq!(again["offsets"], answer["offsets"], "the retry is deduplicated");
    let (status, e) = b.call_as(
        &other,
        "POST",
        "/v1/producers",
        Some(json!({"producer_id": pid["producer_id"]})),
    );
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("not_owner")),
        "{e}"
    );
    let next = b.ok_as(
        &svc,
        "POST",
        "/v1/producers",
        Some(json!({"producer_id": pid["producer_id"]})),
    );
    assert_eq!(next["epoch"], 1, "{next}");
    b.stop();
}
