//! Hostile and careless clients.
//!
//! Contract proven here (docs/api.md, "Errors" and "Limits"):
//! - Malformed JSON (truncated, trailing garbage, single quotes, bare words,
//!   bad escapes, leading zeros, invalid UTF-8, pathological nesting) is 400
//!   `bad_json` (well-formed JSON of the wrong shape is 400 `bad_json` or
//!   `invalid_request`) on every endpoint that takes a body, and changes
//!   nothing: the topic list, configs and high watermarks stay as they were.
//! - A body over `--http-body-bytes-max` (with Content-Length or chunked) is
//!   413 `payload_too_large` and writes nothing; the default limit is 16 MiB
//!   (17 MiB is refused); a body under the limit is accepted.
//! - An unknown path is 404 `not_found`; a known path with the wrong method is
//!   405 `method_not_allowed`. Dot segments and encoded slashes in a path
//!   never reach outside the topic they name: nothing is deleted or served
//!   from elsewhere in the data directory.
//! - With `--connections-max 500`, 2000 simultaneous connections do not stop
//!   the broker: connections within the limit are served, those over it are
//!   closed at once, and once they are gone new connections are served.
//! - Raw garbage on a TCP connection (binary noise, TLS hello, bad request
//!   lines, huge headers, lying lengths, bad chunk sizes) never crashes the
//!   broker; it keeps serving afterwards.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// Bodies that are not JSON at all.
fn malformed_bodies() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        "",
        "   ",
        "{",
        "}",
        "[1,2",
        "nul",
        "{\"name\":\"t\",\"partitions\":1",
        "{\"name\":\"t\" \"partitions\":1}",
        "{\"name\":\"t\",\"partitions\":1}}",
        "{\"name\":\"t\",\"partitions\":1} trailing",
        "{'name':'t','partitions':1}",
        "{name:\"t\",partitions:1}",
        "{\"name\":\"t\",\"partitions\":01}",
        "{\"name\":\"t\\x\",\"partitions\":1}",
        "{\"name\":\"t\",\"partitions\":NaN}",
        "{\"records\":[{\"value\":\"x\"},]}",
        "{\"segment_bytes\":}",
        "\u{0}\u{1}\u{2}\u{3}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    out.push(vec![0xff, 0xfe, 0xfd]);
    out
}

/// Bodies that a parser may reject either as malformed or as invalid input.
fn odd_bodies() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        "[]",
        "42",
        "\"a string\"",
        "null",
        "true",
        "{\"name\":\"t\",\"partitions\":1e400}",
        "{\"name\":\"t\",\"partitions\":99999999999999999999999}",
        "{\"records\":null}",
        "{\"segment_bytes\":\"big\"}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    // Invalid UTF-8 inside a string.
    out.push(b"{\"name\":\"\xff\xfe\",\"partitions\":1,\"records\":[{\"value\":\"\xc3\x28\"}]}".to_vec());
    // Pathological nesting: must be refused, not overflow a stack.
    out.push("[".repeat(1_000_000).into_bytes());
    out.push("{\"a\":".repeat(200_000).into_bytes());
    out.push(format!("{{\"records\":{}", "[".repeat(500_000)).into_bytes());
    out
}

fn topic_names(b: &Broker) -> Value {
    let (status, body) = b.get("/v1/topics");
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn malformed_json_is_400_and_changes_nothing() {
    let mut b = Broker::start(2);
    create_topic(&b, "keep", 2);
    produce_values(&b, "keep", 0, &["one".to_string()]);
    let list = topic_names(&b);
    let described = describe(&b, "keep");

    let targets = [
        ("POST", "/v1/topics"),
        ("POST", "/v1/topics/keep/records"),
        ("PATCH", "/v1/topics/keep/config"),
    ];
    for (method, path) in targets {
        for body in malformed_bodies() {
            let got = b.request(method, path, Some(body.as_slice()));
            let (status, resp) = &got;
            assert!(
                *status == 400 && resp["error"]["code"] == "bad_json",
                "{method} {path} with {:?}: expected 400 bad_json, got {status} {resp}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                resp["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{resp}"
            );
        }
        for body in odd_bodies() {
            // Big bodies go over a raw connection, so that a broker that
            // answers before reading all of them is still heard.
            let got = if body.len() > 64 << 10 {
                exchange(b.addr(), &raw_request(method, path, &body))
            } else {
                b.request(method, path, Some(body.as_slice()))
            };
            let (status, resp) = &got;
            let code = resp["error"]["code"].as_str().unwrap_or("");
            assert!(
                *status == 400 && (code == "bad_json" || code == "invalid_request"),
                "{method} {path} with {:?}...: expected 400 bad_json or invalid_request, got {status} {resp}",
                String::from_utf8_lossy(&body[..body.len().min(60)])
            );
        }
        b.assert_running();
    }

    assert_eq!(topic_names(&b), list, "the topic list must not change");
    assert_eq!(
        describe(&b, "keep"),
        described,
        "config and high watermarks must not change"
    );
    assert_eq!(values_of(&b, "keep", 0), vec!["one"]);
    // Still fully working.
    assert_eq!(produce_values(&b, "keep", 0, &["two".to_string()]), vec![1]);
}

/// `{"records":[{"value":"xxx..."}]}` of exactly `size` bytes.
fn produce_body(size: usize) -> Vec<u8> {
    let prefix = b"{\"records\":[{\"value\":\"";
    let suffix = b"\"}]}";
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(prefix);
    body.resize(size - suffix.len(), b'x');
    body.extend_from_slice(suffix);
    assert_eq!(body.len(), size);
    body
}

/// The same body sent with chunked transfer encoding.
fn chunked_request(target: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(64 << 10) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// One raw exchange that must produce a response (three tries, in case the
/// response is lost to a reset while the body is still being written).
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, Value) {
    let mut last = String::new();
    for _ in 0..3 {
        match raw_exchange(addr, request.to_vec()) {
            Ok(resp) => return resp.pair(),
            Err(e) => last = e,
        }
    }
    panic!("no response in three tries: {last}");
}

#[test]
fn bodies_over_the_limit_are_413_and_write_nothing() {
    let mut b = Broker::start_with(&["--http-body-bytes-max", "1048576"]);
    create_topic(&b, "big", 1);
    let addr = b.addr();

    let two_mib = produce_body(2 << 20);
    let got = exchange(addr, &raw_request("POST", "/v1/topics/big/records", &two_mib));
    assert_error(&got, 413, "payload_too_large");
    let got = exchange(addr, &chunked_request("/v1/topics/big/records", &two_mib));
    assert_error(&got, 413, "payload_too_large");
    // Just over the limit.
    let got = exchange(
        addr,
        &raw_request("POST", "/v1/topics/big/records", &produce_body((1 << 20) + 1)),
    );
    assert_error(&got, 413, "payload_too_large");
    // Topic creation and config have the same limit.
    let mut create = b"{\"name\":\"huge\",\"partitions\":1,\"pad\":\"".to_vec();
    create.resize(2 << 20, b'p');
    create.extend_from_slice(b"\"}");
    let got = exchange(addr, &raw_request("POST", "/v1/topics", &create));
    assert_error(&got, 413, "payload_too_large");
    b.assert_running();

    assert_eq!(
        high_watermarks(&b, "big"),
        vec![0],
        "a refused body must write nothing"
    );
    assert_eq!(
        topic_names(&b),
        json!({ "topics": [ { "name": "big", "partitions": 1 } ] })
    );
    let (status, body) = fetch(&b, "big", 0, "offset=0");
    assert_eq!(
        (status, body),
        (
            200,
            json!({ "records": [], "next_offset": 0, "high_watermark": 0 })
        )
    );

    // Under the limit: accepted, and read back whole.
    let half = produce_body(512 << 10);
    let got = exchange(addr, &raw_request("POST", "/v1/topics/big/records", &half));
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(parse_offsets(&got.1), vec![(0, 0)]);
    let (status, body) = fetch(&b, "big", 0, "offset=0");
    assert_eq!(status, 200);
    let value_len = body["records"][0]["value"].as_str().map(str::len);
    assert_eq!(
        value_len,
        Some(half.len() - b"{\"records\":[{\"value\":\"\"}]}".len())
    );
    // The same through the ordinary client, on a kept-alive-or-not connection.
    let got = b.post_bytes("/v1/topics/big/records", &produce_body(4 << 10));
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(high_watermarks(&b, "big"), vec![2]);
}

#[test]
fn the_default_body_limit_refuses_17_mib() {
    let mut b = Broker::start(1);
    create_topic(&b, "default-limit", 1);
    let body = produce_body(17 << 20);
    let got = exchange(
        b.addr(),
        &raw_request("POST", "/v1/topics/default-limit/records", &body),
    );
    assert_error(&got, 413, "payload_too_large");
    b.assert_running();
    assert_eq!(high_watermarks(&b, "default-limit"), vec![0]);
    assert_eq!(
        produce_values(&b, "default-limit", 0, &["small".to_string()]),
        vec![0]
    );
}

#[test]
fn unknown_paths_are_404_and_wrong_methods_405() {
    let mut b = Broker::start(2);
    create_topic(&b, "t", 2);

    for path in [
        "/",
        "/nope",
        "/v1",
        "/v2/topics",
        "/v1/topicsx",
        "/v1/topics/t/bogus",
        "/v1/topics/t/partitions",
        "/v1/topics/t/partitions/0",
        "/v1/topics/t/partitions/0/records/extra",
        "/v1/topics/t/records/extra",
        "/healthz",
        "/metrics/x",
        "/v1/groups-of-nothing",
    ] {
        assert_error(&b.get(path), 404, "not_found");
    }

    for (method, path) in [
        ("PUT", "/v1/topics"),
        ("DELETE", "/v1/topics"),
        ("PATCH", "/v1/topics"),
        ("POST", "/v1/topics/t"),
        ("PUT", "/v1/topics/t"),
        ("PATCH", "/v1/topics/t"),
        ("POST", "/v1/topics/t/config"),
        ("DELETE", "/v1/topics/t/config"),
        ("GET", "/v1/topics/t/records"),
        ("DELETE", "/v1/topics/t/records"),
        ("POST", "/v1/topics/t/partitions/0/records"),
        ("DELETE", "/v1/topics/t/partitions/0/records"),
        ("POST", "/health"),
        ("DELETE", "/ready"),
        ("PUT", "/metrics"),
    ] {
        let body: Option<&[u8]> = match method {
            "POST" | "PUT" | "PATCH" => Some(&b"{}"[..]),
            _ => None,
        };
        let got = b.request(method, path, body);
        assert_eq!(
            (got.0, got.1["error"]["code"].as_str()),
            (405, Some("method_not_allowed")),
            "{method} {path}: {}",
            got.1
        );
    }

    // A partition that is not a number is a client error of some kind.
    for path in [
        "/v1/topics/t/partitions/abc/records",
        "/v1/topics/t/partitions/-1/records",
    ] {
        let (status, body) = b.get(path);
        let code = body["error"]["code"].as_str().unwrap_or("");
        assert!(
            (status == 400 && code == "invalid_request")
                || (status == 404 && (code == "not_found" || code == "partition_not_found")),
            "GET {path}: {status} {body}"
        );
    }
    b.assert_running();
    assert_eq!(high_watermarks(&b, "t"), vec![0, 0]);
}

#[test]
fn dot_segments_and_encoded_slashes_never_escape_a_topic() {
    let mut b = Broker::start(2);
    create_topic(&b, "victim", 1);
    produce_values(&b, "victim", 0, &["precious".to_string()]);
    let addr = b.addr();
    let records = r#"{"records":[{"value":"x"}]}"#;

    let requests: Vec<(&str, &str, &str)> = vec![
        ("DELETE", "/v1/topics/..", ""),
        ("DELETE", "/v1/topics/.", ""),
        ("DELETE", "/v1/topics/%2e%2e", ""),
        ("DELETE", "/v1/topics/%2E%2E", ""),
        ("DELETE", "/v1/topics/victim/..", ""),
        ("DELETE", "/v1/topics/..%2Fvictim", ""),
        ("DELETE", "/v1/topics/%2e%2e%2ftopics", ""),
        ("DELETE", "/v1/topics/victim%2F..", ""),
        ("DELETE", "/v1/topics/victim%00", ""),
        ("DELETE", "/v1/topics/../topics/victim/..", ""),
        ("GET", "/v1/topics/../../../../../../etc/passwd", ""),
        ("GET", "/v1/topics/%2e%2e/%2e%2e/%2e%2e/etc/passwd", ""),
        ("GET", "/v1/topics/..%2F..%2F..%2Fetc%2Fpasswd", ""),
        ("GET", "/v1/topics/victim%2Fmeta.json", ""),
        ("GET", "/v1/topics/..%2Fvictim/partitions/0/records", ""),
        ("POST", "/v1/topics/../records", records),
        ("POST", "/v1/topics/%2e%2e/records", records),
        ("POST", "/v1/topics/victim%2F0/records", records),
        ("PATCH", "/v1/topics/%2e%2e/config", r#"{"segment_bytes":1}"#),
    ];
    for (method, target, body) in requests {
        // Refusing the request line outright (closing the connection) is fine too.
        if let Ok(resp) = raw_exchange(addr, raw_request(method, target, body.as_bytes())) {
            assert!(
                (400..500).contains(&resp.status),
                "{method} {target}: expected a 4xx, got {} {}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            );
            assert!(
                !String::from_utf8_lossy(&resp.body).contains("root:"),
                "{method} {target} served a file"
            );
        }
        b.assert_running();
    }

    assert_eq!(
        topic_names(&b),
        json!({ "topics": [ { "name": "victim", "partitions": 1 } ] })
    );
    assert_eq!(values_of(&b, "victim", 0), vec!["precious"]);
    assert!(b
        .data_dir()
        .join("topics")
        .join("victim")
        .join("meta.json")
        .is_file());
    assert!(b.data_dir().join("topics").is_dir());
}

/// Sends `GET /health` on an open connection and reads the answer.
fn health_on(stream: &mut TcpStream) -> Result<u16, String> {
    // Only a guard against a broker that never answers.
    stream
        .set_read_timeout(Some(hang_guard()))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    read_response(stream).map(|r| r.status)
}

#[test]
fn connections_over_the_limit_are_closed_and_the_broker_keeps_serving() {
    const WANT: usize = 2000;
    let limit = raise_open_files_limit(WANT as u64 + 1000);
    let n = WANT.min(limit.saturating_sub(300) as usize);
    if n < WANT {
        eprintln!("open-files limit {limit}: opening {n} connections instead of {WANT}");
    }
    let mut b = Broker::start_with(&["--connections-max", "500"]);
    let addr = b.addr();

    let mut streams: Vec<TcpStream> = Vec::with_capacity(n);
    let mut connect_errors = Vec::new();
    for _ in 0..n {
        // A guard against a hang only: a slow broker's full accept queue
        // makes a connect retry, not fail.
        match TcpStream::connect_timeout(&addr, hang_guard()) {
            Ok(s) => streams.push(s),
            Err(e) => {
                connect_errors.push(e.to_string());
                if connect_errors.len() > 20 {
                    break;
                }
            }
        }
    }
    eprintln!(
        "{} connections open, {} connect errors {connect_errors:?}",
        streams.len(),
        connect_errors.len()
    );
    b.assert_running();
    assert!(
        streams.len() > 500,
        "only {} of {n} connections could be opened",
        streams.len()
    );

    // The first connections are within the limit: they are served.
    let mut served = None;
    let mut failures = Vec::new();
    for (i, s) in streams.iter_mut().take(20).enumerate() {
        match health_on(s) {
            Ok(200) => {
                served = Some(i);
                break;
            }
            Ok(status) => failures.push(format!("connection {i}: status {status}")),
            Err(e) => failures.push(format!("connection {i}: {e}")),
        }
    }
    assert!(
        served.is_some(),
        "no connection within the limit was served: {failures:?}"
    );

    // The last one is over the limit: the broker has closed it (the read
    // waits for that close however long it takes, up to the hang guard).
    let count = streams.len();
    let last = streams.last_mut().expect("connections");
    last.set_read_timeout(Some(hang_guard()))
        .expect("set_read_timeout");
    let mut buf = [0u8; 1024];
    loop {
        match last.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue, // a parting error response is fine
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("connection {count} (over --connections-max 500) was not closed")
            }
            Err(_) => break, // reset: closed
        }
    }
    b.assert_running();

    // Once they are gone, new connections are served again. Each shard
    // counts its own connections against its share of the limit and sees
    // the flood's go at its own pace: wait until the broker counts them
    // all closed (a few of the test client's own may stay open).
    drop(streams);
    wait_for("the broker to count the flood's connections closed", || {
        let text = match b.try_request_text("GET", "/metrics", None, None) {
            Ok((200, text)) => text,
            _ => return false,
        };
        text.lines()
            .find_map(|l| l.strip_prefix("es_connections_open{listener=\"http\"} "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .is_some_and(|open| open < 10.0)
    });
    wait_for("GET /health on a new connection", || {
        matches!(b.try_get("/health"), Ok((200, _)))
    });
    create_topic(&b, "after-flood", 1);
    assert_eq!(
        produce_values(&b, "after-flood", 0, &["alive".to_string()]),
        vec![0]
    );
    assert_eq!(values_of(&b, "after-flood", 0), vec!["alive"]);
    b.assert_running();
}

/// A deterministic pseudo-random byte stream (xorshift64).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

#[test]
fn raw_garbage_on_a_connection_does_not_hurt_the_broker() {
    let mut b = Broker::start(2);
    create_topic(&b, "steady", 1);
    let addr = b.addr();

    let mut cases: Vec<Vec<u8>> = vec![
        noise(64 << 10, 0x9e37_79b9_7f4a_7c15),
        noise(100, 42),
        vec![0u8; 64 << 10],
        // A TLS ClientHello prefix, as from a client that expected HTTPS.
        vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03],
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"GET\r\n\r\n".to_vec(),
        b"\r\n\r\n\r\n\r\n".to_vec(),
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n".to_vec(),
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n".to_vec(),
        b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"name\":".to_vec(),
        b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n".to_vec(),
        b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            .to_vec(),
        b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n".to_vec(),
        b"GET /hea\x00lth HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"G\xffT /health HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /health HTTP/1.1\r\nHost: x\r\n".to_vec(), // never finished
    ];
    // A 1 MiB header line and 10 000 headers.
    let mut long_header = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: ".to_vec();
    long_header.resize(long_header.len() + (1 << 20), b'a');
    long_header.extend_from_slice(b"\r\n\r\n");
    cases.push(long_header);
    let mut many_headers = b"GET /health HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..10_000 {
        many_headers.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    many_headers.extend_from_slice(b"\r\n");
    cases.push(many_headers);
    // A long pipeline of valid requests, cut off in the middle.
    let mut pipeline = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1000);
    pipeline.extend_from_slice(b"GET /heal");
    cases.push(pipeline);

    for (i, case) in cases.iter().enumerate() {
        // Whatever comes back in 2 s is ignored (the verdict is the health
        // check after it): the 2 s only bound how long the test listens.
        let _ = send_garbage(addr, case, Duration::from_secs(2));
        b.assert_running();
        let (status, body) = b.get("/health");
        assert_eq!(
            (status, body),
            (200, json!({ "status": "ok" })),
            "after garbage case {i}"
        );
    }
    // Everything still works.
    let topics = b.get("/v1/topics");
    assert_eq!(
        topics,
        (
            200,
            json!({ "topics": [ { "name": "steady", "partitions": 1 } ] })
        )
    );
    assert_eq!(produce_values(&b, "steady", 0, &["ok".to_string()]), vec![0]);
    assert_eq!(values_of(&b, "steady", 0), vec!["ok"]);
    b.assert_running();
}
