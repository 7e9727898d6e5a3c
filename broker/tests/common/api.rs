//! Helpers over the HTTP API (topics, produce, fetch, assertions on
//! errors), encodings, and files of a data dir.

use super::*;

// ---------------------------------------------------------------------------
// API helpers
// ---------------------------------------------------------------------------

/// Asserts an error answer: the status and `{"error":{"code":code,"message":"..."}}`
/// with a non-empty message. Returns the message.
#[track_caller]
pub fn assert_error(got: &(u16, Value), status: u16, code: &str) -> String {
    let (got_status, body) = got;
    assert_eq!(
        (*got_status, body["error"]["code"].as_str()),
        (status, Some(code)),
        "expected {status} {code}, got {got_status} {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "error without a message: {body}");
    message.to_string()
}

/// Asserts a 400 whose code is one of `codes` (for inputs where the contract
/// allows either `bad_json` or `invalid_request`).
#[track_caller]
pub fn assert_400_one_of(got: &(u16, Value), codes: &[&str]) {
    let (status, body) = got;
    let code = body["error"]["code"].as_str().unwrap_or("");
    assert!(
        *status == 400 && codes.contains(&code),
        "expected 400 with one of {codes:?}, got {status} {body}"
    );
}

/// Creates a topic with default settings; asserts 201.
#[track_caller]
pub fn create_topic(c: &Client, name: &str, partitions: u32) -> Value {
    let got = c.post("/v1/topics", json!({ "name": name, "partitions": partitions }));
    assert_eq!(got.0, 201, "create topic {name}: {}", got.1);
    got.1
}

/// Produces (`body` is the whole request); asserts 200 and returns the
/// `(partition, offset)` of every record, in input order.
#[track_caller]
pub fn produce(c: &Client, topic: &str, body: Value) -> Vec<(u32, u64)> {
    let n = body["records"].as_array().map(Vec::len).unwrap_or(0);
    let got = c.post(&format!("/v1/topics/{topic}/records"), body);
    assert_eq!(got.0, 200, "produce to {topic}: {}", got.1);
    let offsets = parse_offsets(&got.1);
    assert_eq!(offsets.len(), n, "one offset per record: {}", got.1);
    offsets
}

/// `{"offsets":[{"partition":p,"offset":o},...]}` as pairs.
#[track_caller]
pub fn parse_offsets(body: &Value) -> Vec<(u32, u64)> {
    body["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no offsets array in {body}"))
        .iter()
        .map(|o| {
            let p = o["partition"]
                .as_u64()
                .unwrap_or_else(|| panic!("bad partition in {body}"));
            let off = o["offset"]
                .as_u64()
                .unwrap_or_else(|| panic!("bad offset in {body}"));
            (p as u32, off)
        })
        .collect()
}

/// Produces utf8 values to an explicit partition; returns their offsets.
#[track_caller]
pub fn produce_values(c: &Client, topic: &str, partition: u32, values: &[String]) -> Vec<u64> {
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({ "value": v, "partition": partition }))
        .collect();
    produce(c, topic, json!({ "records": records }))
        .into_iter()
        .map(|(p, o)| {
            assert_eq!(p, partition, "record sent to partition {partition} landed on {p}");
            o
        })
        .collect()
}

/// `GET /v1/topics/{topic}/partitions/{partition}/records?{query}`.
pub fn fetch(c: &Client, topic: &str, partition: u32, query: &str) -> (u16, Value) {
    c.get(&format!(
        "/v1/topics/{topic}/partitions/{partition}/records?{query}"
    ))
}

/// Every record of a partition, from offset 0 to the high watermark, paging
/// with `next_offset`; `encoding` is `utf8` or `base64`.
#[track_caller]
pub fn fetch_all(c: &Client, topic: &str, partition: u32, encoding: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut offset = 0u64;
    loop {
        let (status, body) = fetch(
            c,
            topic,
            partition,
            &format!("offset={offset}&max_records=1000&encoding={encoding}"),
        );
        assert_eq!(status, 200, "fetch {topic}/{partition} at {offset}: {body}");
        let records = body["records"]
            .as_array()
            .unwrap_or_else(|| panic!("no records in {body}"));
        let next = body["next_offset"]
            .as_u64()
            .unwrap_or_else(|| panic!("no next_offset in {body}"));
        let hw = body["high_watermark"]
            .as_u64()
            .unwrap_or_else(|| panic!("no high_watermark in {body}"));
        for r in records {
            let o = r["offset"]
                .as_u64()
                .unwrap_or_else(|| panic!("record without offset: {r}"));
            if let Some(prev) = out.last() {
                assert!(
                    o > prev["offset"].as_u64().unwrap(),
                    "offsets go backwards: {body}"
                );
            }
            out.push(r.clone());
        }
        if next >= hw {
            return out;
        }
        assert!(
            next > offset,
            "fetch at {offset} made no progress below the high watermark {hw}: {body}"
        );
        offset = next;
    }
}

/// The `value` strings of every record of a partition (utf8).
pub fn values_of(c: &Client, topic: &str, partition: u32) -> Vec<String> {
    fetch_all(c, topic, partition, "utf8")
        .iter()
        .map(|r| {
            r["value"]
                .as_str()
                .unwrap_or_else(|| panic!("no value in {r}"))
                .to_string()
        })
        .collect()
}

/// `GET /v1/topics/{topic}`, asserting 200.
#[track_caller]
pub fn describe(c: &Client, topic: &str) -> Value {
    let (status, body) = c.get(&format!("/v1/topics/{topic}"));
    assert_eq!(status, 200, "describe {topic}: {body}");
    body
}

/// The high watermark of every partition of a topic, by partition number.
#[track_caller]
pub fn high_watermarks(c: &Client, topic: &str) -> Vec<u64> {
    let body = describe(c, topic);
    let parts = body["partitions"]
        .as_array()
        .unwrap_or_else(|| panic!("no partitions in {body}"));
    let mut hws = vec![u64::MAX; parts.len()];
    for p in parts {
        let i = p["partition"]
            .as_u64()
            .unwrap_or_else(|| panic!("bad partition in {body}")) as usize;
        hws[i] = p["high_watermark"]
            .as_u64()
            .unwrap_or_else(|| panic!("bad high_watermark in {body}"));
    }
    hws
}

/// FNV-1a 64 over `bytes` (offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3), the documented key hash.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The partition the broker must pick for a record with this key and no partition.
pub fn key_partition(key: &[u8], partitions: u32) -> u32 {
    (fnv1a64(key) % u64::from(partitions)) as u32
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(chunk[0]) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        out.push(char::from(B64[((n >> 18) & 63) as usize]));
        out.push(char::from(B64[((n >> 12) & 63) as usize]));
        out.push(if chunk.len() > 1 {
            char::from(B64[((n >> 6) & 63) as usize])
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            char::from(B64[(n & 63) as usize])
        } else {
            '='
        });
    }
    out
}

/// Standard base64, padding optional.
#[track_caller]
pub fn b64_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for c in s.bytes() {
        if c == b'=' {
            break;
        }
        let v = B64
            .iter()
            .position(|&x| x == c)
            .unwrap_or_else(|| panic!("not standard base64: {s:?}"));
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// [`wait_for`] for callers that name a limit: the limit is not used (a
/// wait gives up only after [`hang_guard`], never sooner).
#[track_caller]
pub fn wait_until(what: &str, _limit: Duration, cond: impl FnMut() -> bool) {
    wait_for(what, cond)
}

/// Appends `bytes` to the file at `path`.
pub fn append_to_file(path: &Path, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {path:?}: {e}"));
    f.write_all(bytes)
        .unwrap_or_else(|e| panic!("append to {path:?}: {e}"));
    f.sync_all().unwrap_or_else(|e| panic!("fsync {path:?}: {e}"));
}

/// The segment with the highest base offset in a partition directory
/// (`<base:020>.log`).
#[track_caller]
pub fn last_segment(partition_dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .unwrap_or_else(|e| panic!("read_dir {partition_dir:?}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.len() == 24 && name.ends_with(".log") && name[..20].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    logs.sort();
    logs.pop()
        .unwrap_or_else(|| panic!("no segment in {partition_dir:?}"))
}
