//! What one client connection can pin, against the real broker: fetch
//! answers are charged before they are read, so a client that pipelines
//! large fetches and never reads holds at most its connection's budget
//! (`--response-connection-bytes`) and is closed once its writer has
//! waited `--frame-stall-ms`; HTTP bodies are refused from an
//! over-limit `Content-Length`, charged while they arrive, and answered
//! 408 when they stop; idle connections close after
//! `--connection-idle-ms` while long-polls stay; each listener has its own
//! share of `--connections-max`.
//!
//! No verdict depends on time: a limit under test is set small by its
//! flag and the test waits for its effect (a closed connection, a metric).
//! Where a broker without the limit would never show the effect, the wait
//! also ends on what that broker does instead, and the assertion after it
//! fails.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use common::{hang_guard, wait_for, Broker};
use es_protocol::batch::BatchBuilder;
use es_protocol::client::{Client, Options};
use es_protocol::frame;
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::hello::Hello;
use es_protocol::{Kind, Request};
use serde_json::json;

const MIB: usize = 1 << 20;
/// The largest `--frame-stall-ms` (an hour): for tests where no
/// connection may be closed as stalled, however slow the machine.
const FRAME_STALL_MS_MAX: &str = "3600000";

fn connect(b: &Broker) -> Client {
    Client::connect(&b.binary_addr(), Options::default()).expect("connect and handshake")
}

/// `count` batches of one record of `bytes` bytes each in partition 0 of
/// `topic` (created with one partition).
fn fill(b: &Broker, topic: &str, count: usize, bytes: usize) {
    let c = connect(b);
    c.admin(Kind::CreateTopic, json!({"name": topic, "partitions": 1}))
        .unwrap();
    for i in 0..count {
        let mut bb = BatchBuilder::default();
        bb.push(None, &vec![b'a' + (i % 26) as u8; bytes], 1_700_000_000_000);
        c.produce_batch(topic, 0, bb.finish(0, None).unwrap()).unwrap();
    }
}

fn hello_frame() -> Vec<u8> {
    Request::Hello(Hello {
        min_version: 1,
        max_version: 1,
        client_id: "raw".into(),
        api_key: String::new(),
    })
    .to_frame(0, false)
}

/// One frame's kind and payload; `None` once the broker closed the
/// connection (or reset it).
fn read_frame(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; frame::HEADER_BYTES];
    s.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
    let mut payload = vec![0u8; len + 4 - frame::HEADER_BYTES];
    s.read_exact(&mut payload).ok()?;
    Some((head[4], payload))
}

/// A connection past its handshake, or `None` when the broker closed it
/// instead (over its listener's limit).
fn handshaken(b: &Broker) -> Option<TcpStream> {
    let mut s = TcpStream::connect(b.binary_addr()).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s.write_all(&hello_frame()).ok()?;
    match read_frame(&mut s)? {
        (0x81, _) => Some(s),
        (kind, _) => panic!("a HelloOk, not kind {kind:#04x}"),
    }
}

/// A connection to `addr` whose kernel buffers little of what the broker
/// sends (a small receive buffer): a client that does not read stops the
/// broker's writes soon.
fn small_window(addr: std::net::SocketAddr) -> TcpStream {
    let sk = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sk.set_recv_buffer_size(4096).unwrap();
    sk.connect(&addr.into()).unwrap();
    let s: TcpStream = sk.into();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s
}

/// A binary connection past its handshake, with a small receive buffer.
fn non_reader(b: &Broker) -> TcpStream {
    let mut s = small_window(b.binary_addr().parse().unwrap());
    s.write_all(&hello_frame()).unwrap();
    assert_eq!(read_frame(&mut s).expect("HelloOk").0, 0x81);
    s
}

/// `count` fetches of partition 0 of `topic` from offset 0, `max_bytes`
/// each, as one write.
fn fetches(topic: &str, count: u64, max_bytes: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for id in 1..=count {
        let f = Request::Fetch(Fetch {
            topic: topic.into(),
            partition: 0,
            offset: Some(0),
            max_records: 10_000,
            max_bytes,
            wait_ms: 0,
        });
        out.extend_from_slice(&f.to_frame(id, false));
    }
    out
}

/// The broker's resident memory, in bytes.
fn broker_rss(b: &Broker) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", b.pid())).unwrap(); // blocking-ok: a test
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .expect("VmRSS");
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() << 10
}

fn held(b: &Broker) -> f64 {
    b.metric_sum("es_request_budget_bytes_held").unwrap_or(0.0)
}

fn metric(b: &Broker, series: &str) -> f64 {
    b.metric(series).unwrap_or(0.0)
}

/// Two clients pipeline 256 fetches of 4 MiB each and never read: each
/// holds at most its connection's budget (twice `--fetch-bytes-max`, the
/// default), charged before the answers are read, so the broker grows by
/// tens of MiB, not by the 2 GiB of 512 answers; everyone else is served
/// meanwhile, and all of it is freed once they go.
#[test]
fn clients_that_pipeline_fetches_and_never_read_hold_a_bounded_amount() {
    // Every answer read from the segment (nothing kept in memory), and no
    // connection closed as stalled while the test looks.
    let b = Broker::start_with(&[
        "--shards",
        "1",
        "--fetch-bytes-max",
        "4194304",
        "--recent-writes-shard-bytes",
        "0",
        "--frame-stall-ms",
        FRAME_STALL_MS_MAX,
    ]);
    fill(&b, "big", 4, MIB);
    let before = broker_rss(&b);
    let per_connection = 2 * 4 * MIB as u64;
    let hostile: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = non_reader(&b);
            s.write_all(&fetches("big", 256, 4 * MIB as u32)).unwrap();
            s
        })
        .collect();
    // Either fetches wait for room on both connections, or (a broker
    // without the bound) all 512 were answered into memory.
    wait_for("the pipelined fetches to wait for room, or be answered", || {
        metric(&b, r#"es_request_budget_waits_total{listener="binary"}"#) >= 2.0
            || metric(&b, r#"es_binary_requests_total{endpoint="fetch",status="ok"}"#) >= 512.0
    });
    // Others are served meanwhile: a produce, and a fetch of what it wrote.
    let c = connect(&b);
    c.admin(Kind::CreateTopic, json!({"name": "other", "partitions": 1}))
        .unwrap();
    let offsets = c
        .produce(
            "other",
            vec![es_protocol::requests::produce::ProduceRecord {
                partition: None,
                timestamp_ms: None,
                key: None,
                value: b"served".to_vec(),
            }],
        )
        .unwrap();
    assert_eq!(offsets, vec![(0, 0)]);
    let got = c
        .fetch(Fetch {
            topic: "other".into(),
            partition: 0,
            offset: Some(0),
            max_records: 10,
            max_bytes: 4096,
            wait_ms: 0,
        })
        .unwrap();
    assert_eq!(got.to_records()[0].value, b"served");
    // Besides theirs, only the small fetch above was charged (and freed).
    let held_now = held(&b) as u64;
    assert!(
        held_now <= 2 * per_connection,
        "{held_now} bytes held for two connections of {per_connection} each"
    );
    let grown = broker_rss(&b).saturating_sub(before);
    assert!(
        grown < 256 << 20,
        "two non-reading clients grew the broker by {} MiB",
        grown >> 20
    );
    drop(hostile);
    wait_for("everything they held is freed", || held(&b) == 0.0);
}

/// A client that pipelines fetches and stops reading is closed once its
/// writer has waited `--frame-stall-ms` for it to read anything, and what
/// its unwritten answers held is freed; an HTTP client that does not
/// read its answer the same.
#[test]
fn a_client_that_stops_reading_is_closed_after_the_stall_limit() {
    let b = Broker::start_with(&["--shards", "1", "--frame-stall-ms", "300"]);
    fill(&b, "big", 16, MIB);
    let mut s = non_reader(&b);
    s.write_all(&fetches("big", 64, 16 * MIB as u32)).unwrap();
    wait_for("the binary connection to be closed as stalled", || {
        metric(&b, r#"es_connections_write_stalled_total{listener="binary"}"#) >= 1.0
    });
    wait_for("what it held to be freed", || held(&b) == 0.0);
    // What the client reads ends: the broker closed it.
    let mut sink = vec![0u8; MIB];
    loop {
        match s.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }

    let mut h = small_window(b.addr());
    h.write_all(
        b"GET /v1/topics/big/partitions/0/records?offset=0&max_bytes=16777216&max_records=10000 HTTP/1.1\r\n\
          Host: 127.0.0.1\r\n\r\n",
    )
    .unwrap();
    wait_for("the HTTP connection to be closed as stalled", || {
        metric(&b, r#"es_connections_write_stalled_total{listener="http"}"#) >= 1.0
    });
    wait_for("what its answer held to be freed", || held(&b) == 0.0);
    assert_eq!(b.get("/health").0, 200);
}

/// A request body that stops arriving is answered 408 `request_timeout`
/// after `--frame-stall-ms` and its connection closed; nothing is written.
#[test]
fn a_body_that_stops_arriving_is_answered_408_and_closed() {
    let b = Broker::start_with(&["--shards", "1", "--frame-stall-ms", "300"]);
    b.post("/v1/topics", json!({"name": "t", "partitions": 1}));
    let mut s = TcpStream::connect(b.addr()).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    let body = format!("{{\"records\":[{{\"value\":\"{}\"}}]}}", "x".repeat(100_000));
    let head = format!(
        "POST /v1/topics/t/records HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body.as_bytes()[..1000]).unwrap();
    let resp = common::read_response(&mut s).expect("an answer");
    assert_eq!(resp.status, 408, "{resp:?}");
    assert_eq!(resp.json()["error"]["code"], "request_timeout");
    assert!(
        resp.head.to_ascii_lowercase().contains("connection: close"),
        "{}",
        resp.head
    );
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed after the answer");
    assert_eq!(b.metric("es_http_body_stalled_total"), Some(1.0));
    assert_eq!(common::high_watermarks(&b, "t"), vec![0], "nothing written");
}

/// A `Content-Length` over `--http-body-bytes-max` is answered 413 before
/// any of the body is sent, and the connection closes.
#[test]
fn a_content_length_over_the_limit_is_413_before_any_body() {
    let b = Broker::start_with(&["--shards", "1", "--http-body-bytes-max", "1000"]);
    b.post("/v1/topics", json!({"name": "t", "partitions": 1}));
    for target in ["/v1/topics/t/records", "/v1/groups/g/members", "/v1/topics"] {
        let mut s = TcpStream::connect(b.addr()).unwrap();
        s.set_read_timeout(Some(hang_guard())).unwrap();
        s.write_all(
            format!(
                "POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                 Content-Length: 1001\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let resp = common::read_response(&mut s).expect("an answer");
        assert_eq!(resp.status, 413, "{target}: {resp:?}");
        assert_eq!(resp.json()["error"]["code"], "payload_too_large");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{target}: closed after the answer");
    }
    // At the limit, a body is read as ever.
    let body = format!("{{\"records\":[{{\"value\":\"{}\"}}]}}", "x".repeat(900));
    assert!(body.len() <= 1000);
    assert_eq!(b.post_raw("/v1/topics/t/records", &body).0, 200);
}

/// Partial bodies of 15 MiB on 20 connections: the shard holds at most
/// `--request-shard-bytes` of them (the rest wait, unread), so the broker
/// grows by little of the 300 MiB they send, and all of it is freed, and
/// given back to the system, once they go.
#[test]
fn partial_bodies_hold_at_most_the_shards_budget() {
    let budget = 32 * MIB;
    let b = Broker::start_with(&[
        "--shards",
        "1",
        "--request-shard-bytes",
        &budget.to_string(),
        "--frame-stall-ms",
        FRAME_STALL_MS_MAX,
    ]);
    b.post("/v1/topics", json!({"name": "t", "partitions": 1}));
    let before = broker_rss(&b);
    let announced = 16 * MIB;
    let sent = 15 * MIB;
    let spaces = Arc::new(vec![b' '; sent]);
    let mut writers = Vec::new();
    let mut sockets = Vec::new();
    for _ in 0..20 {
        let s = TcpStream::connect(b.addr()).unwrap();
        sockets.push(s.try_clone().unwrap());
        let spaces = spaces.clone();
        writers.push(std::thread::spawn(move || {
            let mut s = s;
            let head = format!(
                "POST /v1/topics/t/records HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                 Content-Length: {announced}\r\n\r\n"
            );
            let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(&spaces));
        }));
    }
    // Either bodies wait for room, or (a broker without the bound) all
    // 20 were taken whole.
    wait_for("the bodies to wait for room, or all to be sent", || {
        metric(&b, r#"es_request_budget_waits_total{listener="http"}"#) >= 1.0
            || writers.iter().all(|w| w.is_finished())
    });
    let held_now = held(&b) as usize;
    assert!(
        held_now <= budget,
        "{held_now} bytes held, over the budget of {budget}"
    );
    let grown = broker_rss(&b).saturating_sub(before);
    assert!(
        grown < 128 << 20,
        "20 partial bodies grew the broker by {} MiB",
        grown >> 20
    );
    for s in &sockets {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    for w in writers {
        let _ = w.join();
    }
    drop(sockets);
    wait_for("what the bodies held to be freed", || held(&b) == 0.0);
    assert_eq!(common::high_watermarks(&b, "t"), vec![0], "nothing written");
    // The memory goes back to the system once they are gone, with nothing
    // else happening on the shard (mimalloc purges lazily; the shard
    // collects its heap: broker/src/operate/allocator.rs).
    wait_for("the broker's memory to fall back", || {
        broker_rss(&b) < before + (64 << 20)
    });
}

/// `--connection-idle-ms`: a binary connection and an HTTP keep-alive one
/// with nothing in flight are closed (the binary one without an error
/// frame), while a long-poll on another connection of each is not: it
/// answers with the record produced after the idle ones were closed.
#[test]
fn idle_connections_are_closed_and_long_polls_are_not() {
    let b = Broker::start_with(&["--shards", "1", "--connection-idle-ms", "300"]);
    let c = connect(&b);
    c.admin(Kind::CreateTopic, json!({"name": "lp", "partitions": 1}))
        .unwrap();
    drop(c);
    // The long-polls, at the high watermark, for as long as a fetch may.
    let mut poll = handshaken(&b).expect("a binary connection");
    let lp = Request::Fetch(Fetch {
        topic: "lp".into(),
        partition: 0,
        offset: Some(0),
        max_records: 10,
        max_bytes: 4096,
        wait_ms: 30_000,
    });
    poll.write_all(&lp.to_frame(9, false)).unwrap();
    let mut http_poll = TcpStream::connect(b.addr()).unwrap();
    http_poll.set_read_timeout(Some(hang_guard())).unwrap();
    http_poll
        .write_all(b"GET /v1/topics/lp/partitions/0/records?offset=0&wait_ms=30000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    // The idle ones: a binary connection past its handshake, and an HTTP
    // one after a request.
    let mut idle = handshaken(&b).expect("a binary connection");
    let mut byte = [0u8; 1];
    assert_eq!(idle.read(&mut byte).expect("a clean close"), 0, "no error frame");
    let mut http_idle = TcpStream::connect(b.addr()).unwrap();
    http_idle.set_read_timeout(Some(hang_guard())).unwrap();
    http_idle
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    assert_eq!(common::read_response(&mut http_idle).unwrap().status, 200);
    assert_eq!(http_idle.read(&mut byte).unwrap_or(0), 0, "closed");
    assert!(metric(&b, r#"es_connections_idle_closed_total{listener="binary"}"#) >= 1.0);
    // The long-polls were in flight all along: they answer.
    let offsets = connect(&b)
        .produce(
            "lp",
            vec![es_protocol::requests::produce::ProduceRecord {
                partition: None,
                timestamp_ms: None,
                key: None,
                value: b"late".to_vec(),
            }],
        )
        .unwrap();
    assert_eq!(offsets, vec![(0, 0)]);
    let (kind, _) = read_frame(&mut poll).expect("the long-poll answers, not a close");
    assert_eq!(kind, Kind::FetchOk as u8);
    let resp = common::read_response(&mut http_poll).expect("the HTTP long-poll answers");
    assert_eq!(resp.status, 200, "{resp:?}");
}

/// Each listener has its own share of `--connections-max`: binary
/// sockets up to the binary share are kept (idle), more are closed at
/// once and counted, and HTTP clients are still served.
#[test]
fn idle_binary_sockets_cannot_lock_http_out() {
    let b = Broker::start_with(&["--shards", "1", "--connections-max", "20"]);
    let kept: Vec<TcpStream> = (0..30).filter_map(|_| handshaken(&b)).collect();
    assert_eq!(kept.len(), 10, "the binary share: 20 less HTTP's half");
    assert_eq!(b.get("/health").0, 200, "HTTP is served");
    assert_eq!(
        b.metric(r#"es_connections_refused_total{listener="binary"}"#),
        Some(20.0)
    );
    assert_eq!(
        b.metric(r#"es_connections_refused_total{listener="http"}"#),
        Some(0.0)
    );
}
