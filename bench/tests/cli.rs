//! es-bench end to end: each command against a broker it starts itself,
//! checked for the shape of its JSON and for counts above zero. No timed
//! assertions: the figures depend on the machine. The broker is the
//! es-broker that `cargo test --workspace` builds beside this test (or
//! `ES_BROKER_BIN`); nothing is built here.

#[path = "../../broker/tests/common/broker_bin.rs"]
mod broker_bin;
mod common;

use std::process::Command;

use broker_bin::broker_bin;
use serde_json::Value;

/// Runs es-bench with `args` plus a started broker and `--json`.
fn bench(args: &[&str]) -> Value {
    common::json_of(
        Command::new(env!("CARGO_BIN_EXE_es-bench"))
            .args(args)
            .args(["--start-broker", "--broker-bin"])
            .arg(broker_bin())
            .args(["--json", "--quiet"]),
        &format!("{args:?}"),
    )
}

fn phase<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no {name} phase in {doc}"))
}

fn check_counts(p: &Value) {
    for key in ["records", "bytes", "requests"] {
        assert!(p[key].as_u64().expect(key) > 0, "{key} in {p}");
    }
    for key in ["seconds", "records_per_s", "mb_per_s", "requests_per_s"] {
        assert!(p[key].as_f64().expect(key) > 0.0, "{key} in {p}");
    }
    check_latency(&p["latency_us"]);
}

fn check_latency(l: &Value) {
    let get = |k: &str| l[k].as_u64().unwrap_or_else(|| panic!("{k} in {l}"));
    assert!(get("count") > 0);
    assert!(
        get("p50") <= get("p99") && get("p99") <= get("p999") && get("p999") <= get("max"),
        "{l}"
    );
}

#[test]
fn produce_with_disk_comparison() {
    let doc = bench(&[
        "produce",
        "--duration",
        "2",
        "--producers",
        "2",
        "--partitions",
        "2",
        "--batch",
        "10",
        "--compare-disk",
    ]);
    assert_eq!(doc["command"], "produce");
    assert_eq!(doc["config"]["producers"], 2);
    check_counts(phase(&doc, "disk"));
    let p = phase(&doc, "produce");
    check_counts(p);
    assert!(p["pct_of_disk"].as_f64().expect("pct_of_disk") > 0.0);
    assert!(p["p99_vs_disk"].as_f64().expect("p99_vs_disk") > 0.0);
}

#[test]
fn disk_and_broker_in_alternating_rounds() {
    // Two rounds of 1 s per side: each side's measured time is its two
    // slices added up (one slice alone would be about 1 s), and the paced
    // half-rate phases alternate the same way.
    let doc = bench(&[
        "produce",
        "--duration",
        "2",
        "--warmup",
        "0.2",
        "--rounds",
        "2",
        "--rate",
        "half",
        "--batch",
        "10",
        "--compare-disk",
    ]);
    assert_eq!(doc["config"]["rounds"], 2);
    let phases = doc["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["disk", "produce", "produce half-rate", "disk half-rate"]);
    for p in phases {
        check_counts(p);
        assert!(p["seconds"].as_f64().expect("seconds") > 1.5, "{p}");
    }
    assert!(phases[1]["pct_of_disk"].as_f64().expect("pct_of_disk") > 0.0);
    assert!(phases[2]["p99_vs_disk"].as_f64().expect("p99_vs_disk") > 0.0);
    assert!(phases[3]["target_rate"].as_f64().expect("paced disk") > 0.0);
}

#[test]
fn many_producers_share_a_few_threads() {
    // Five connections on two threads: small requests gathered into bursts,
    // and large ones (80 KiB, written as they are, in pieces when the socket
    // is full). A request id set wrong, or a frame cut, would get an answer
    // es-bench did not expect (or a broker error), and fail the run.
    for batch in ["3", "80"] {
        let doc = bench(&[
            "produce",
            "--duration",
            "1",
            "--producers",
            "5",
            "--producer-threads",
            "2",
            "--partitions",
            "3",
            "--inflight",
            "3",
            "--batch",
            batch,
        ]);
        assert_eq!(doc["config"]["producer_threads"], 2);
        check_counts(phase(&doc, "produce"));
    }
}

#[test]
fn produce_at_half_rate_and_two_shard_counts() {
    let doc = bench(&[
        "produce",
        "--duration",
        "1",
        "--rate",
        "half",
        "--shards",
        "1,2",
        "--batch",
        "5",
    ]);
    let phases = doc["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        ["produce", "produce half-rate", "produce", "produce half-rate"]
    );
    for p in phases {
        check_counts(p);
        assert!(p["vs_first_shards"].as_f64().is_some(), "{p}");
    }
    assert!(phases[1]["target_rate"].as_f64().expect("paced") > 0.0);
    assert_eq!(phases[2]["shards"], 2);
}

#[test]
fn consume_after_prefill() {
    let doc = bench(&[
        "consume",
        "--duration",
        "1",
        "--partitions",
        "2",
        "--prefill-mb",
        "2",
    ]);
    check_counts(phase(&doc, "consume"));
}

#[test]
fn e2e_times_records_from_send_to_receipt() {
    // gzip goes through the client library; without it, consumers drive
    // their connections themselves (long-polling fetches).
    for gzip in [true, false] {
        let mut args = vec!["e2e", "--duration", "1", "--rate", "2000", "--batch", "10"];
        if gzip {
            args.push("--gzip");
        }
        let doc = bench(&args);
        let p = phase(&doc, "e2e");
        check_counts(p);
        check_latency(&p["e2e_latency_us"]);
    }
}

#[test]
fn disk_alone_needs_no_broker() {
    let out = Command::new(env!("CARGO_BIN_EXE_es-bench"))
        .args([
            "disk",
            "--duration",
            "1",
            "--warmup",
            "0.5",
            "--batch",
            "4",
            "--json",
            "--quiet",
        ])
        .output()
        .expect("run es-bench");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    check_counts(phase(&doc, "disk"));
}

#[test]
fn bad_flags_are_refused_before_anything_runs() {
    for args in [
        &["produce", "--batch", "0"][..],
        &["produce", "--producer-threads", "0"],
        &["consume", "--rate", "half"],
        &["produce", "--shards", "1,2"],
        &["e2e", "--record-size", "4"],
        &["disk", "--warmup", "-1"],
        &["produce", "--rounds", "2"],
        &["produce", "--compare-disk", "--rounds", "0"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_es-bench"))
            .args(args)
            .output()
            .expect("run es-bench");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}
