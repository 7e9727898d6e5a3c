//! An operator's first hour: a config file (the repository's sample, and
//! precedence: flag over `ES_*` over file over default), JSON logs, and
//! start-up errors that say what to change (a typo in `ES_LOG`, a locked-
//! memory limit too low, an address in use, a value out of range).
//!
//! Each start-up error is shown by a broker that stops before its shards
//! run; none of these tests depends on how long anything takes.

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};

use common::Broker;
use serde_json::{json, Value};

fn broker_bin() -> &'static str {
    env!("CARGO_BIN_EXE_es-broker")
}

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Runs es-broker to completion with `args` and `env` (no other `ES_*`),
/// on a fresh data dir; for starts that must fail before serving.
fn run_to_exit(args: &[&str], env: &[(&str, &str)]) -> (Output, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut cmd = Command::new(broker_bin());
    cmd.args(["--registry-addr", "disabled", "--kafka-addr", "disabled"]);
    cmd.args(["--data-dir", data.to_str().expect("utf-8 path")])
        .args(["--http-addr", "127.0.0.1:0", "--binary-addr", "127.0.0.1:0"])
        .args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("ES_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("es-broker runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

#[test]
fn the_sample_config_file_starts_a_broker_that_logs_json() {
    let sample = repo_file("scripts/deploy/es.toml");
    // The fixture's --data-dir and addresses win over the sample's: the
    // rest of the sample (log-format = "json") applies.
    let mut b = Broker::start_with(&["--config", sample.to_str().expect("utf-8 path")]);
    let (status, _) = b.post("/v1/topics", json!({"name": "t", "partitions": 1}));
    assert_eq!(status, 201);
    assert_eq!(b.sigterm_and_wait().code(), Some(0));
    let log = b.stderr_text();
    let mut messages = Vec::new();
    // The fixture heads each run's log with a `===== es-broker run` line.
    for line in log
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("===== es-broker run"))
    {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line:?}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(v.get(key).is_some(), "{key} missing: {line}");
        }
        messages.push(v["message"].as_str().unwrap_or("").to_string());
    }
    for expected in [
        "settings read from the config file",
        "starting",
        "stopped cleanly",
    ] {
        assert!(
            messages.iter().any(|m| m == expected),
            "no {expected:?} line in:\n{log}"
        );
    }
}

#[test]
fn a_config_file_is_below_the_environment_which_is_below_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("es.toml");
    // Both values are out of range: which one the broker refuses shows
    // which source it took each from (frame-bytes-max is checked first).
    std::fs::write(&file, "frame-bytes-max = 1\nsegment-bytes = 10\n").expect("write");
    let file = file.to_str().expect("utf-8 path");

    let (out, err) = run_to_exit(&["--config", file], &[]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--frame-bytes-max must be in") && err.contains("got 1"),
        "{err}"
    );

    let (out, err) = run_to_exit(&["--config", file], &[("ES_FRAME_BYTES_MAX", "1048576")]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--segment-bytes must be in") && err.contains("got 10"),
        "the environment wins over the file: {err}"
    );

    let (out, err) = run_to_exit(
        &["--config", file, "--segment-bytes", "30"],
        &[("ES_FRAME_BYTES_MAX", "1048576"), ("ES_SEGMENT_BYTES", "20")],
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("got 30"), "a flag wins over the environment: {err}");

    let (out, err) = run_to_exit(&[], &[("ES_CONFIG", file)]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--frame-bytes-max"),
        "ES_CONFIG names the file too: {err}"
    );
}

#[test]
fn a_bad_config_file_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("es.toml");
    std::fs::write(&file, "data_dir = \"/tmp\"\n").expect("write");
    let (out, err) = run_to_exit(&["--config", file.to_str().expect("utf-8")], &[]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown key `data_dir`") && err.contains("did you mean `data-dir`"),
        "{err}"
    );
    let (out, err) = run_to_exit(&["--config", "/nonexistent/es.toml"], &[]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/es.toml"), "{err}");
}

#[test]
fn an_es_log_that_matches_nothing_is_warned_about_and_errors_still_show() {
    // ES_LOG=debu (a typo) filters out every line; the warning and the
    // error that stops the start are shown anyway.
    let (out, err) = run_to_exit(&["--segment-bytes", "10"], &[("ES_LOG", "debu")]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ES_LOG names `debu`, which matches no log target"),
        "{err}"
    );
    assert!(err.contains("--segment-bytes must be in 65536..="), "{err}");
    let (out, err) = run_to_exit(&[], &[("ES_LOG", "es_broker=loud")]);
    assert_eq!(out.status.code(), Some(2), "an ES_LOG that does not parse: {err}");
    assert!(err.contains("ES_LOG=es_broker=loud"), "{err}");
}

#[test]
fn out_of_range_values_are_refused_with_the_range() {
    for (flag, value, range) in [
        ("--segment-bytes", "10", "65536..=4294967295"),
        ("--connections-max", "1", "2..="),
        ("--http-connections-max", "0", "1..=9999"),
        ("--frame-stall-ms", "0", "1..="),
        ("--connection-idle-ms", "0", "1..="),
        ("--response-connection-bytes", "1", "16777216..="),
        ("--shards", "0", "1..=256"),
        ("--fetch-bytes-max", "0", "1..="),
        ("--groups-max", "0", "1..=100000000"),
        ("--group-offsets-retention-ms", "0", "1..=3153600000000"),
    ] {
        let (out, err) = run_to_exit(&[flag, value], &[]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(&format!("{flag} must be in {range}")) && err.contains(&format!("got {value}")),
            "{flag} {value}: {err}"
        );
    }
}

#[test]
fn a_locked_memory_limit_too_low_says_what_to_raise() {
    // Soft and hard limit both 64 KiB: the broker cannot raise it itself.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            "ulimit -l 64 && exec \"$0\" --data-dir \"$1\" --http-addr 127.0.0.1:0 --binary-addr 127.0.0.1:0 --registry-addr disabled --kafka-addr disabled",
        )
        .arg(broker_bin())
        .arg(dir.path().join("data"))
        .output()
        .expect("bash runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("locked-memory limit (ulimit -l) is 64 KiB") && err.contains("ulimit -l 65536"),
        "{err}"
    );
    assert!(
        !err.contains("MemLockLimit"),
        "glommio's opaque error must not be what the operator sees: {err}"
    );
}

#[test]
fn an_address_in_use_names_its_flag() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(broker_bin())
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args(["--data-dir", dir.path().join("data").to_str().expect("utf-8")])
        .args(["--http-addr", "127.0.0.1:0", "--binary-addr", &addr])
        .output()
        .expect("es-broker runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot listen on {addr} (--binary-addr): another process is listening there"
        )),
        "{err}"
    );
    drop(taken);
}
