//! File descriptors: bounded, and running out of them passes.
//!
//! Contract, with the broker's open-files limit set low (soft and hard, so
//! it cannot raise it):
//! - one client holding connections until the broker is out of
//!   descriptors (`EMFILE`) does not poison anything and panics nothing:
//!   a partition whose writer is open keeps taking writes and serving
//!   reads; an operation that needs a new descriptor (the first write of a
//!   partition, a topic create) fails with 503 `unavailable` and changes
//!   nothing; a closed segment is still read (the shard's cache closes one
//!   of its own files to open it); accept waits instead of spinning;
//! - once the client lets go, everything works again without a restart:
//!   the same partition takes the same write, the same topic is created,
//!   nothing acknowledged is missing, and every partition closes cleanly;
//! - a partition of many closed segments starts with a descriptor for its
//!   active segment only, and reads all of them through
//!   `--open-segments-max` descriptors.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};

use common::{assert_error, raise_open_files_limit, read_response, wait_for, Broker};
use serde_json::{json, Value};

/// Descriptors of the broker process now.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// One HTTP/1.1 connection kept alive across requests: opened while the
/// broker still accepts, it needs no new descriptor of the broker's.
struct KeepAlive {
    stream: TcpStream,
}

impl KeepAlive {
    fn open(addr: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(common::hang_guard())).unwrap();
        KeepAlive { stream }
    }

    fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.stream.write_all(head.as_bytes()).expect("send");
        self.stream.write_all(body.as_bytes()).expect("send");
        let resp = read_response(&mut self.stream).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        resp.pair()
    }

    fn produce(&mut self, topic: &str, value: &str) -> (u16, Value) {
        let body = json!({"records": [{"value": value, "partition": 0}]});
        self.request("POST", &format!("/v1/topics/{topic}/records"), Some(&body))
    }

    fn fetch(&mut self, topic: &str, offset: u64) -> (u16, Value) {
        self.request(
            "GET",
            &format!("/v1/topics/{topic}/partitions/0/records?offset={offset}&max_records=1"),
            None,
        )
    }

    /// The value of series `series` (written exactly as exported).
    fn metric(&mut self, series: &str) -> f64 {
        let (status, text) = self.request("GET", "/metrics", None);
        assert_eq!(status, 200);
        let text = text.as_str().expect("metrics are text").to_string();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

/// The offset of the one record of a produce answered 200.
#[track_caller]
fn offset_of(got: &(u16, Value)) -> u64 {
    assert_eq!(got.0, 200, "{}", got.1);
    got.1["offsets"][0]["offset"].as_u64().expect("an offset")
}

#[test]
fn out_of_descriptors_fails_cleanly_and_recovers() {
    /// The broker's open-files limit: room for its own descriptors and
    /// those of the topics below, then for the hogging client's.
    const LIMIT: u64 = 512;
    raise_open_files_limit(4 * LIMIT + 256);
    let mut b = Broker::start_with_open_files(
        LIMIT,
        2,
        &["--connections-max", "100000", "--open-segments-max", "8"],
    );
    for (name, config) in [
        ("live", json!({})),
        ("fresh", json!({})),
        ("cold", json!({"segment_bytes": 1024})),
    ] {
        let got = b.post(
            "/v1/topics",
            json!({"name": name, "partitions": 1, "config": config}),
        );
        assert_eq!(got.0, 201, "{}", got.1);
    }
    let mut k = KeepAlive::open(b.addr());
    let live_first = offset_of(&k.produce("live", "before"));
    // `cold`: many closed segments, each read once, so its shard's cache
    // is full (4 of --open-segments-max 8 per shard).
    let big = "x".repeat(1100);
    for _ in 0..20 {
        offset_of(&k.produce("cold", &big));
    }
    for offset in 0..20 {
        let got = k.fetch("cold", offset);
        assert_eq!(got.0, 200, "{}", got.1);
    }

    // One client takes every descriptor left: connections the broker
    // accepts until accept fails, and more waiting in its queue.
    let mut hogs = Vec::new();
    let binary: SocketAddr = b.binary_addr().parse().unwrap();
    wait_for("accept to fail for want of descriptors", || {
        for _ in 0..16 {
            hogs.push(TcpStream::connect(binary).expect("the kernel queues connections"));
        }
        k.metric("es_descriptors_exhausted_total{op=\"accept\"}") > 0.0
    });
    for _ in 0..64 {
        hogs.push(TcpStream::connect(binary).expect("the kernel queues connections"));
    }
    let pid = b.pid();
    assert!(
        open_fds(pid) as u64 >= LIMIT - 8,
        "the broker holds {} of {LIMIT}",
        open_fds(pid)
    );

    // A partition with its writer open works on, both ways.
    let live_during = offset_of(&k.produce("live", "during"));
    assert_eq!(live_during, live_first + 1);
    let got = k.fetch("live", live_during);
    assert_eq!(
        (got.0, &got.1["records"][0]["value"]),
        (200, &json!("during")),
        "{}",
        got.1
    );
    // A closed segment is read: the cache closes one of its own files
    // to open it. (Another shard's accept retrying at that moment may take
    // the freed descriptor first: the read then closes another cached file
    // and tries again, and is refused, retriable, only once none is left;
    // the cache holds 4.)
    let mut read = None;
    for _ in 0..4 {
        let got = k.fetch("cold", 0);
        if got.0 == 200 {
            read = Some(got);
            break;
        }
        assert_error(&got, 503, "unavailable");
    }
    let got = read.expect("a closed segment is read while out of descriptors");
    assert_eq!(got.1["records"][0]["value"], json!(big));
    // What needs a new descriptor fails, retriable, and changes nothing.
    let got = k.produce("fresh", "first");
    let message = assert_error(&got, 503, "unavailable");
    assert!(
        message.contains("descriptor") || message.contains("open files"),
        "{message}"
    );
    let got = k.request(
        "POST",
        "/v1/topics",
        Some(&json!({"name": "later", "partitions": 1})),
    );
    assert_error(&got, 503, "unavailable");
    let got = k.request("GET", "/v1/topics/later", None);
    assert_error(&got, 404, "topic_not_found");
    let (status, body) = k.request("GET", "/v1/topics/fresh", None);
    assert_eq!(
        (status, &body["partitions"][0]["high_watermark"]),
        (200, &json!(0)),
        "{body}"
    );
    assert!(k.metric("es_descriptors_exhausted_total{op=\"append\"}") > 0.0);
    let (status, _) = k.request("GET", "/ready", None);
    assert_eq!(status, 200, "the broker stays ready");

    // The client lets go: the same operations work, no restart.
    drop(hogs);
    let mut tries = 0;
    wait_for("the write refused for want of a descriptor to go through", || {
        tries += 1;
        let got = k.produce("fresh", "first");
        match got.0 {
            200 => {
                assert_eq!(offset_of(&got), 0, "the refused write took no offset");
                true
            }
            503 => false,
            _ => panic!("after {tries} tries: {}", got.1),
        }
    });
    let got = b.post("/v1/topics", json!({"name": "later", "partitions": 1}));
    assert_eq!(got.0, 201, "{}", got.1);
    let got = k.produce("later", "new");
    assert_eq!(offset_of(&got), 0);
    assert_eq!(offset_of(&k.produce("live", "after")), live_during + 1);
    let values: Vec<String> = common::values_of(&b, "live", 0);
    assert_eq!(values, ["before", "during", "after"]);
    assert_eq!(common::values_of(&b, "fresh", 0), ["first"]);
    assert_eq!(common::values_of(&b, "cold", 0).len(), 20);
    assert_eq!(b.metric_sum("es_request_panics_total").unwrap_or(0.0), 0.0);
    drop(k);
    let status = b.sigterm_and_wait();
    assert_eq!(
        status.code(),
        Some(0),
        "every partition closes cleanly (none was poisoned):\n{}",
        b.stderr_text()
    );
    assert!(!b.stderr_text().contains("panicked"), "{}", b.stderr_text());
}

#[test]
fn closed_segments_open_through_a_bounded_cache() {
    /// Segments of the partition: more than the broker may hold open.
    const SEGMENTS: usize = 300;
    let mut b = Broker::start_with(&["--shards", "1"]);
    let got = b.post(
        "/v1/topics",
        json!({"name": "many", "partitions": 1, "config": {"segment_bytes": 1024}}),
    );
    assert_eq!(got.0, 201, "{}", got.1);
    let value = |i: usize| format!("{i:04}{}", "v".repeat(1100));
    for i in 0..SEGMENTS {
        common::produce_values(&b, "many", 0, &[value(i)]);
    }
    b.sigterm_and_wait();
    // Room for the broker's own descriptors and a few segments, far fewer
    // than the partition's segments.
    let idle = {
        let mut probe = Broker::start_with(&["--shards", "1"]);
        let n = open_fds(probe.pid());
        probe.sigterm_and_wait();
        n
    };
    let limit = (idle + 64) as u64;
    assert!(
        limit < SEGMENTS as u64,
        "the limit {limit} must be below the segment count"
    );
    let mut small = Broker::start_with_open_files(limit, 1, &["--open-segments-max", "16"]);
    // Same data: the partition's files move to the new broker.
    small.sigterm_and_wait();
    std::fs::remove_dir_all(small.data_dir()).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(b.data_dir())
        .arg(small.data_dir())
        .status()
        .unwrap();
    assert!(status.success());
    small.restart();
    let started = open_fds(small.pid());
    assert!(
        started < idle + 16,
        "start-up opened {started} descriptors (idle broker: {idle})"
    );
    // Every record, from every closed segment, twice over.
    for _ in 0..2 {
        let values = common::values_of(&small, "many", 0);
        assert_eq!(values.len(), SEGMENTS);
        for (i, v) in values.iter().enumerate() {
            assert_eq!(v, &value(i));
        }
        assert!(
            open_fds(small.pid()) as u64 <= limit,
            "{} open, limit {limit}",
            open_fds(small.pid())
        );
    }
    assert_eq!(small.metric("es_open_segment_files{shard=\"0\"}"), Some(16.0));
    // And it writes on.
    common::produce_values(&small, "many", 0, &["after".to_string()]);
    assert_eq!(common::values_of(&small, "many", 0).len(), SEGMENTS + 1);
    assert_eq!(
        small.sigterm_and_wait().code(),
        Some(0),
        "{}",
        small.stderr_text()
    );
}
