//! Per-key quotas against the real broker (`--auth required`, two shards;
//! docs/security.md, "Quotas"): keys pushed at several times their rate
//! over HTTP and the binary protocol, four connections each, are admitted
//! at their rate, with no error, and HTTP answers say `ES-Throttle-Ms`;
//! two keys loaded at once each get their own rate.
//!
//! This is a rate test, measured the honest way: the admitted bytes come
//! from the broker's own counters (`es_quota_bytes_total`, and the
//! partition's high watermark as a cross-check), over a window the test
//! times itself, which starts once the key is in debt (its burst spent).
//! Only the upper bound is a verdict whatever the machine: a machine too
//! slow to offer at least twice the rate cannot show that the broker
//! admits as much as the rate, so the lower bound (and `ES-Throttle-Ms`
//! seen) is asserted only when the load offered it; each message says
//! what was offered. A load that never put the key in debt is held to
//! the bucket's own bound, R·L + R·burst + a request per connection.

mod auth_common;
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use auth_common::{call, grant, make_key};
use common::Broker;
use es_protocol::client::{Client as BinaryClient, Options};
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::produce::ProduceRecord;
use serde_json::{json, Value};

/// The rate each limited key gets: 4 MiB/s.
const RATE: u64 = 4 << 20;
/// Records per request, and the bytes of each value: one request is a
/// batch of 56 + 16 × (20 + 4096) bytes, about 64 KiB.
const RECORDS_PER_REQUEST: usize = 16;
const VALUE_BYTES: usize = 4096;
/// The measured window: it starts once the key is in debt (its burst
/// spent: a request was throttled since the last look), at most
/// `DEBT_BY` into the load, and lasts this long.
const WINDOW: Duration = Duration::from_secs(6);
/// How long the load may take to put a key in debt: at three times the
/// rate, about half a second spends the one-second burst.
const DEBT_BY: Duration = Duration::from_secs(4);
/// The connections' start, before the counters are first read.
const WARM_UP: Duration = Duration::from_millis(500);
/// How often the counters are read while waiting for the debt.
const LOOK: Duration = Duration::from_millis(50);

fn batch_bytes() -> u64 {
    56 + (RECORDS_PER_REQUEST * (20 + VALUE_BYTES)) as u64
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Http,
    /// Produce: records, which the broker groups into a batch.
    Binary,
    /// Produce: a batch built here (ProduceBatch), charged as it arrives.
    BinaryBatch,
}

/// What a load's connections saw.
#[derive(Default)]
struct Seen {
    errors: AtomicU64,
    /// Largest `ES-Throttle-Ms` an HTTP answer carried.
    throttle_ms_max: AtomicU64,
    requests: AtomicU64,
    last_error: std::sync::Mutex<String>,
}

impl Seen {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = what;
    }
}

/// One key's load: its connections, and where they produce or fetch.
struct Load {
    name: &'static str,
    key: String,
    id: String,
    topic: &'static str,
    partition: u32,
    transports: Vec<Transport>,
}

/// Produce or fetch, as fast as each connection is answered, until `stop`.
fn spawn_load(
    b: &Broker,
    load: &Load,
    fetch: bool,
    stop: &Arc<AtomicBool>,
    seen: &Arc<Seen>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut out = Vec::new();
    for &t in &load.transports {
        let (key, topic, stop, seen) = (load.key.clone(), load.topic, stop.clone(), seen.clone());
        let (url, binary, partition) = (b.url(""), b.binary_addr(), load.partition);
        out.push(std::thread::spawn(move || match (t, fetch) {
            (Transport::Http, false) => http_produce(&url, &key, topic, partition, &stop, &seen),
            (Transport::Http, true) => http_fetch(&url, &key, topic, partition, &stop, &seen),
            (Transport::Binary, false) => binary_produce(&binary, &key, topic, partition, &stop, &seen),
            (Transport::BinaryBatch, false) => {
                binary_produce_batch(&binary, &key, topic, partition, &stop, &seen)
            }
            (Transport::Binary | Transport::BinaryBatch, true) => {
                binary_fetch(&binary, &key, topic, partition, &stop, &seen)
            }
        }));
    }
    out
}

fn value() -> String {
    "v".repeat(VALUE_BYTES)
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build()
}

fn note_throttle(resp: &ureq::Response, seen: &Seen) {
    if let Some(ms) = resp.header("es-throttle-ms").and_then(|v| v.parse::<u64>().ok()) {
        seen.throttle_ms_max.fetch_max(ms, Ordering::Relaxed);
    }
}

fn http_produce(url: &str, key: &str, topic: &str, partition: u32, stop: &AtomicBool, seen: &Seen) {
    let agent = agent();
    let records: Vec<Value> = (0..RECORDS_PER_REQUEST)
        .map(|_| json!({"value": value(), "partition": partition}))
        .collect();
    let body = json!({ "records": records });
    let path = format!("{url}/v1/topics/{topic}/records");
    while !stop.load(Ordering::Relaxed) {
        match agent
            .post(&path)
            .set("Authorization", &format!("Bearer {key}"))
            .send_json(body.clone())
        {
            Ok(resp) => {
                note_throttle(&resp, seen);
                let _ = resp.into_string();
                seen.requests.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => seen.error(format!("http produce: {e}")),
        }
    }
}

fn http_fetch(url: &str, key: &str, topic: &str, partition: u32, stop: &AtomicBool, seen: &Seen) {
    let agent = agent();
    let mut offset = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let path = format!(
            "{url}/v1/topics/{topic}/partitions/{partition}/records?offset={offset}&max_bytes=131072"
        );
        match agent
            .get(&path)
            .set("Authorization", &format!("Bearer {key}"))
            .call()
        {
            Ok(resp) => {
                note_throttle(&resp, seen);
                let v: Value = resp.into_json().unwrap_or(Value::Null);
                let (next, hw) = (v["next_offset"].as_u64(), v["high_watermark"].as_u64());
                offset = match (next, hw) {
                    (Some(n), Some(hw)) if n < hw => n,
                    _ => 0,
                };
                seen.requests.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => seen.error(format!("http fetch: {e}")),
        }
    }
}

fn binary_client(addr: &str, key: &str) -> BinaryClient {
    BinaryClient::connect(
        addr,
        Options {
            client_id: "quota-test".into(),
            api_key: key.into(),
            ..Options::default()
        },
    )
    .expect("connect and handshake")
}

fn binary_produce(addr: &str, key: &str, topic: &str, partition: u32, stop: &AtomicBool, seen: &Seen) {
    let c = binary_client(addr, key);
    let records = || {
        (0..RECORDS_PER_REQUEST)
            .map(|_| ProduceRecord {
                partition: Some(partition),
                timestamp_ms: None,
                key: None,
                value: value().into_bytes(),
            })
            .collect::<Vec<_>>()
    };
    while !stop.load(Ordering::Relaxed) {
        match c.produce(topic, records()) {
            Ok(_) => {
                seen.requests.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => seen.error(format!("binary produce: {e}")),
        }
    }
}

fn binary_produce_batch(addr: &str, key: &str, topic: &str, partition: u32, stop: &AtomicBool, seen: &Seen) {
    let c = binary_client(addr, key);
    let mut bb = es_protocol::batch::BatchBuilder::default();
    for _ in 0..RECORDS_PER_REQUEST {
        bb.push(None, value().as_bytes(), 1_700_000_000_000);
    }
    let batch = bb.finish(0, None).expect("a batch");
    assert_eq!(batch.len() as u64, batch_bytes());
    while !stop.load(Ordering::Relaxed) {
        match c.produce_batch(topic, partition, batch.clone()) {
            Ok(_) => {
                seen.requests.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => seen.error(format!("binary produce batch: {e}")),
        }
    }
}

fn binary_fetch(addr: &str, key: &str, topic: &str, partition: u32, stop: &AtomicBool, seen: &Seen) {
    let c = binary_client(addr, key);
    let mut offset = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match c.fetch(Fetch {
            topic: topic.into(),
            partition,
            offset: Some(offset),
            max_records: 10_000,
            max_bytes: 128 << 10,
            wait_ms: 0,
        }) {
            Ok(ok) => {
                offset = if ok.next_offset < ok.high_watermark {
                    ok.next_offset
                } else {
                    0
                };
                seen.requests.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => seen.error(format!("binary fetch: {e}")),
        }
    }
}

/// One key's counters at one moment.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// The scrape ran between these: the counters were read at some
    /// moment within them.
    from: Instant,
    to: Instant,
    bytes: f64,
    throttle_s: f64,
    high_watermark: f64,
}

fn sample(b: &Broker, id: &str, direction: &str, topic: &str, partition: u32) -> Sample {
    let before = Instant::now();
    let text = b.metrics_text();
    let after = Instant::now();
    let find = |series: &str| -> f64 {
        text.lines()
            .filter_map(|l| l.strip_prefix(series))
            .find_map(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
    };
    Sample {
        from: before,
        to: after,
        bytes: find(&format!(
            "es_quota_bytes_total{{key=\"{id}\",direction=\"{direction}\"}}"
        )),
        throttle_s: find(&format!(
            "es_quota_throttle_seconds_total{{key=\"{id}\",direction=\"{direction}\"}}"
        )),
        high_watermark: find(&format!(
            "es_partition_high_watermark{{topic=\"{topic}\",partition=\"{partition}\"}}"
        )),
    }
}

/// A key under load, what its connections saw and its counters over the
/// measured window.
struct Loaded {
    name: &'static str,
    id: String,
    topic: String,
    partition: u32,
    connections: usize,
    seen: Arc<Seen>,
    first: Option<Sample>,
    /// Whether the window started with the key in debt.
    in_debt: bool,
    last: Option<Sample>,
}

impl Loaded {
    /// Bytes per second admitted over the window, twice: over the longest
    /// window the two scrapes allow (the figure the upper bound judges)
    /// and over the shortest (the one the lower bound judges), so that a
    /// slow scrape only loosens both verdicts; and the rate the load
    /// pushed at while the broker was not holding it back (the
    /// connections' time in the window less the throttle the broker
    /// counted for them).
    fn rates(&self) -> (f64, f64, f64, f64, f64) {
        let (a, z) = (self.first.unwrap(), self.last.unwrap());
        let longest = (z.to - a.from).as_secs_f64();
        let shortest = z.from.saturating_duration_since(a.to).as_secs_f64().max(1e-3);
        let bytes = z.bytes - a.bytes;
        let free_secs = (self.connections as f64 * longest - (z.throttle_s - a.throttle_s)).max(1e-3);
        let offered = bytes * self.connections as f64 / free_secs;
        let records = (z.high_watermark - a.high_watermark) / longest;
        (bytes / longest, bytes / shortest, offered, records, longest)
    }

    /// The verdict on one key limited to `RATE`: the rate, no error, and
    /// (once the load went past the rate) `ES-Throttle-Ms` on HTTP.
    fn assert_rate(&self, direction: &str) {
        let (admitted, admitted_at_most, offered, records_per_sec, secs) = self.rates();
        let rate = RATE as f64;
        let seen = &self.seen;
        assert_eq!(
            seen.errors.load(Ordering::Relaxed),
            0,
            "{}: a quota delays, it never answers an error: {}",
            self.name,
            seen.last_error.lock().unwrap()
        );
        let report = format!(
            "{} ({direction}): admitted {:.0} B/s (at most {:.0} B/s over the shortest window) against a rate of {rate} B/s over {secs:.2} s \
             (in debt at its start: {}); the load offered {:.0} B/s while not held back; {} requests",
            self.name,
            admitted,
            admitted_at_most,
            self.in_debt,
            offered,
            seen.requests.load(Ordering::Relaxed)
        );
        eprintln!("{report}");
        // In debt, the burst is spent: the rate itself, within 10 %.
        // Otherwise the load never got past the rate for long, and the
        // bucket's own bound holds: R·L + R·burst + a request per
        // connection.
        let upper = if self.in_debt {
            rate * 1.1
        } else {
            rate + rate / secs + (self.connections as u64 * batch_bytes()) as f64 / secs
        };
        let what = if direction == "fetch" {
            "fetched"
        } else {
            "produced"
        };
        assert!(admitted <= upper, "{what} more than the rate allows: {report}");
        if offered >= 2.0 * rate && self.in_debt {
            assert!(
                admitted_at_most >= rate * 0.9,
                "the load offered at least twice the rate, yet less than the rate was admitted: {report}"
            );
            assert!(
                seen.throttle_ms_max.load(Ordering::Relaxed) > 0,
                "the load offered at least twice the rate, yet no HTTP answer said ES-Throttle-Ms: {report}"
            );
        } else {
            eprintln!(
                "{}: this machine's load offered less than twice the rate, or never put the key in \
                 debt: only the upper bound is a verdict ({report})",
                self.name
            );
        }
        if direction == "produce" {
            // The log agrees with the counter: the records appended, as
            // batches of RECORDS_PER_REQUEST, at about the same rate.
            let appended = records_per_sec / RECORDS_PER_REQUEST as f64 * batch_bytes() as f64;
            assert!(
                appended <= upper,
                "the high watermark of {}/{} grew by {appended:.0} B/s of batches: {report}",
                self.topic,
                self.partition
            );
        }
    }
}

/// Runs `loads` at once, sampling each key's counters when its window
/// starts (`WINDOW`, `DEBT_BY`) and at its end.
fn run(b: &Broker, fetch: bool, loads: Vec<Load>) -> Vec<Loaded> {
    let direction = if fetch { "fetch" } else { "produce" };
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut loaded = Vec::new();
    for load in loads {
        let seen = Arc::new(Seen::default());
        threads.extend(spawn_load(b, &load, fetch, &stop, &seen));
        loaded.push(Loaded {
            name: load.name,
            id: load.id,
            topic: load.topic.to_string(),
            partition: load.partition,
            connections: load.transports.len(),
            seen,
            first: None,
            in_debt: false,
            last: None,
        });
    }
    let started = Instant::now();
    std::thread::sleep(WARM_UP);
    let look = |l: &Loaded| sample(b, &l.id, direction, &l.topic, l.partition);
    let mut before: Vec<Sample> = loaded.iter().map(look).collect();
    while loaded.iter().any(|l| l.first.is_none()) && started.elapsed() < DEBT_BY {
        std::thread::sleep(LOOK);
        for (l, before) in loaded.iter_mut().zip(before.iter_mut()) {
            if l.first.is_some() {
                continue;
            }
            let now = look(l);
            if now.throttle_s > before.throttle_s {
                l.first = Some(now);
                l.in_debt = true;
            }
            *before = now;
        }
    }
    for (l, before) in loaded.iter_mut().zip(before) {
        l.first.get_or_insert(before);
    }
    let ends = loaded.iter().map(|l| l.first.unwrap().to).max().unwrap() + WINDOW;
    std::thread::sleep(ends.saturating_duration_since(Instant::now()));
    for l in &mut loaded {
        l.last = Some(look(l));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a load thread panicked");
    }
    loaded
}

/// Two keys' loads, four connections each (two binary, one of them
/// sending batches, and two HTTP): the first key's on q0/0, the second's
/// on q1/1.
fn loads(names: [&'static str; 2], keys: &[(String, String)]) -> Vec<Load> {
    let four = vec![
        Transport::Binary,
        Transport::BinaryBatch,
        Transport::Http,
        Transport::Http,
    ];
    vec![
        Load {
            name: names[0],
            key: keys[0].1.clone(),
            id: keys[0].0.clone(),
            topic: "q0",
            partition: 0,
            transports: four.clone(),
        },
        Load {
            name: names[1],
            key: keys[1].1.clone(),
            id: keys[1].0.clone(),
            topic: "q1",
            partition: 1,
            transports: four,
        },
    ]
}

/// A broker with two topics and a key per name, each allowed to read and
/// write both, with `quota`.
fn setup(names: &[&str], quota: Value, args: &[&str]) -> (Broker, String, Vec<(String, String)>) {
    let mut all = vec!["--shards", "2"];
    all.extend_from_slice(args);
    let (b, admin) = auth_common::start(&all);
    for t in ["q0", "q1"] {
        let a = call(
            &b,
            "POST",
            "/v1/topics",
            &admin,
            Some(&json!({"name": t, "partitions": 2})),
        );
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let mut keys = Vec::new();
    for name in names {
        let (id, key) = make_key(
            &b,
            &admin,
            name,
            false,
            json!([grant("topic", "prefixed", "q", &["read", "write"])]),
        );
        let a = call(
            &b,
            "PATCH",
            &format!("/v1/keys/{id}"),
            &admin,
            Some(&json!({ "quota": quota })),
        );
        assert_eq!(a.status, 200, "{}", a.body);
        keys.push((id, key));
    }
    (b, admin, keys)
}

#[test]
fn produce_is_held_to_each_keys_rate_without_errors() {
    let (b, _admin, keys) = setup(&["alpha", "beta"], json!({"produce_bytes_per_sec": RATE}), &[]);
    let loaded = run(&b, false, loads(["alpha", "beta"], &keys));
    for l in &loaded {
        l.assert_rate("produce");
    }
}

#[test]
fn fetch_is_held_to_each_keys_rate_without_errors() {
    let (b, admin, keys) = setup(&["gamma", "delta"], json!({"fetch_bytes_per_sec": RATE}), &[]);
    // Something to read: 4 MiB in each partition, written by the admin
    // (unlimited); the readers go round it.
    let batches = (RATE / batch_bytes()).max(1);
    let records: Vec<Value> = (0..RECORDS_PER_REQUEST)
        .map(|_| json!({"value": value(), "partition": 0}))
        .collect();
    for (topic, partition) in [("q0", 0), ("q1", 1)] {
        let mut body = json!({ "records": records });
        for r in body["records"].as_array_mut().unwrap() {
            r["partition"] = json!(partition);
        }
        for _ in 0..batches {
            let a = call(
                &b,
                "POST",
                &format!("/v1/topics/{topic}/records"),
                &admin,
                Some(&body),
            );
            assert_eq!(a.status, 200, "{}", a.body);
        }
    }
    let loaded = run(&b, true, loads(["gamma", "delta"], &keys));
    for l in &loaded {
        l.assert_rate("fetch");
    }
}

#[test]
fn an_unlimited_key_is_counted_and_never_throttled() {
    // A throttle is at most 50 ms here: enough to see, and no wait.
    let (b, admin, keys) = setup(&["free"], Value::Null, &["--quota-throttle-max-ms", "50"]);
    let (id, key) = &keys[0];
    let a = call(
        &b,
        "POST",
        "/v1/topics/q0/records",
        key,
        Some(&json!({"records": [{"value": "hello", "partition": 0}]})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    // 56 + 20 + 5: the batch the record became.
    let series = format!("es_quota_bytes_total{{key=\"{id}\",direction=\"produce\"}}");
    assert_eq!(b.metric(&series), Some(81.0));
    let series = format!("es_quota_throttle_seconds_total{{key=\"{id}\",direction=\"produce\"}}");
    assert_eq!(b.metric(&series), Some(0.0));
    // A PATCH of the quota keeps the key's counters, and applies at once.
    let a = call(
        &b,
        "PATCH",
        &format!("/v1/keys/{id}"),
        &admin,
        Some(&json!({"quota": {"produce_bytes_per_sec": 1000}})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    // 3 s of traffic at 1000 B/s: 2 s past the burst, answered after the
    // 50 ms most.
    let resp = agent()
        .post(&b.url("/v1/topics/q0/records"))
        .set("Authorization", &format!("Bearer {key}"))
        .send_json(json!({"records": [{"value": "x".repeat(3000), "partition": 0}]}))
        .expect("a throttled produce is answered 200");
    assert_eq!(resp.header("es-throttle-ms"), Some("50"));
    let series = format!("es_quota_throttle_seconds_total{{key=\"{id}\",direction=\"produce\"}}");
    assert_eq!(b.metric(&series), Some(0.05));
    let produced = 81 + 56 + 20 + 3000;
    let text = b.metrics_text();
    for family in ["es_quota_bytes_total", "es_quota_throttle_seconds_total"] {
        assert_eq!(text.matches(&format!("# HELP {family} ")).count(), 1, "{text}");
    }
    let series = format!("es_quota_bytes_total{{key=\"{id}\",direction=\"produce\"}}");
    assert_eq!(b.metric(&series), Some(produced as f64), "kept over the PATCH");
}
