//! The binary protocol against the real broker: handshake, topic requests,
//! produce and fetch (plain and gzip), pipelining many requests on one
//! connection, long-poll, error frames with the HTTP codes, and hostile
//! frames that get an error frame and a closed connection while the broker
//! keeps serving everyone else.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{hang_guard, wait_for, Broker};
use es_protocol::client::{Client, ClientError, Options};
use es_protocol::frame;
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::hello::Hello;
use es_protocol::requests::produce::{Produce, ProduceRecord};
use es_protocol::{Kind, Request, Response};
use serde_json::json;

/// The largest `--frame-stall-ms` (an hour): for tests whose frames must
/// never be refused as stalled, whatever the pauses of a slow machine.
const FRAME_STALL_MS_MAX: &str = "3600000";

fn connect(b: &Broker, gzip: bool) -> Client {
    Client::connect(
        &b.binary_addr(),
        Options {
            client_id: "binary-test".into(),
            gzip,
            ..Options::default()
        },
    )
    .expect("connect and handshake")
}

fn record(key: Option<&str>, value: &[u8], partition: Option<u32>) -> ProduceRecord {
    ProduceRecord {
        partition,
        timestamp_ms: None,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.to_vec(),
    }
}

/// A producer's batch of `values`, without keys, all at `timestamp_ms`.
fn batch_of(values: &[Vec<u8>], timestamp_ms: i64) -> Vec<u8> {
    let mut bb = es_protocol::batch::BatchBuilder::default();
    for v in values {
        bb.push(None, v, timestamp_ms);
    }
    bb.finish(0, None).unwrap()
}

fn fetch_all(c: &Client, topic: &str, partition: u32) -> Vec<(u64, Option<Vec<u8>>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let ok = c
            .fetch(Fetch {
                topic: topic.into(),
                partition,
                offset: Some(offset),
                max_records: 10_000,
                max_bytes: 1 << 20,
                wait_ms: 0,
            })
            .expect("fetch");
        if ok.is_empty() {
            return out;
        }
        offset = ok.next_offset;
        out.extend(ok.to_records().into_iter().map(|r| (r.offset, r.key, r.value)));
    }
}

#[test]
fn topic_requests_over_binary_match_http() {
    let b = Broker::start(2);
    let c = connect(&b, false);
    assert_eq!(c.hello().version, es_protocol::PROTOCOL_VERSION);
    let created = c
        .admin(
            Kind::CreateTopic,
            json!({"name": "bin", "partitions": 3, "config": {"segment_bytes": 1048576}}),
        )
        .unwrap();
    assert_eq!(created["partitions"], 3);
    assert_eq!(created["config"]["segment_bytes"], 1048576);
    let err = c
        .admin(Kind::CreateTopic, json!({"name": "bin", "partitions": 3}))
        .unwrap_err();
    assert_eq!(err.code(), Some("topic_exists"));
    let err = c
        .admin(Kind::CreateTopic, json!({"name": "a/b", "partitions": 1}))
        .unwrap_err();
    assert_eq!(err.code(), Some("invalid_topic_name"));
    let list = c.admin(Kind::ListTopics, json!({})).unwrap();
    assert_eq!(list, json!({"topics": [{"name": "bin", "partitions": 3}]}));
    let desc = c.admin(Kind::DescribeTopic, json!({"name": "bin"})).unwrap();
    let (status, http_desc) = b.get("/v1/topics/bin");
    assert_eq!(status, 200);
    assert_eq!(desc, http_desc);
    let patched = c
        .admin(
            Kind::PatchTopicConfig,
            json!({"name": "bin", "config": {"segment_ms": 60000}}),
        )
        .unwrap();
    assert_eq!(patched["config"]["segment_ms"], 60000);
    let deleted = c.admin(Kind::DeleteTopic, json!({"name": "bin"})).unwrap();
    assert_eq!(deleted, json!({"name": "bin", "deleted": true}));
    let err = c.admin(Kind::DescribeTopic, json!({"name": "bin"})).unwrap_err();
    assert_eq!(err.code(), Some("topic_not_found"));
}

#[test]
fn produce_and_fetch_round_trip_plain_and_gzip() {
    let b = Broker::start(2);
    let (status, _) = b.post("/v1/topics", json!({"name": "rt", "partitions": 4}));
    assert_eq!(status, 201);
    let keyed = es_test_partition(b"user-42", 4);
    let other = (keyed + 1) % 4;
    for gzip in [false, true] {
        let c = connect(&b, gzip);
        let binary_value: Vec<u8> = (0..=255u8).collect();
        let offsets = c
            .produce(
                "rt",
                vec![
                    record(Some("user-42"), b"first", None),
                    record(None, &binary_value, Some(other)),
                    record(Some("user-42"), b"second", None),
                ],
            )
            .unwrap();
        assert_eq!(offsets[0].0, keyed);
        assert_eq!(
            offsets[2],
            (keyed, offsets[0].1 + 1),
            "same key, same partition, in order"
        );
        assert_eq!(offsets[1].0, other);
        let got = fetch_all(&c, "rt", other);
        assert!(got
            .iter()
            .any(|(o, k, v)| *o == offsets[1].1 && k.is_none() && *v == binary_value));
        let got = fetch_all(&c, "rt", keyed);
        let values: Vec<&[u8]> = got.iter().map(|(_, _, v)| v.as_slice()).collect();
        assert!(values
            .windows(2)
            .any(|w| w == [b"first".as_slice(), b"second".as_slice()]));
    }
    // HTTP sees what binary wrote.
    let (status, body) = b.get(&format!(
        "/v1/topics/rt/partitions/{}/records?offset=0",
        es_test_partition(b"user-42", 4)
    ));
    assert_eq!(status, 200);
    assert_eq!(body["records"][0]["value"], "first");
}

fn es_test_partition(key: &[u8], partitions: u32) -> u32 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in key {
        h = (h ^ *b as u64).wrapping_mul(0x100000001b3);
    }
    (h % partitions as u64) as u32
}

#[test]
fn many_pipelined_requests_on_one_connection_all_land_once() {
    let b = Broker::start(2);
    let (status, _) = b.post("/v1/topics", json!({"name": "pipe", "partitions": 2}));
    assert_eq!(status, 201);
    let c = connect(&b, false);
    const REQUESTS: usize = 1000;
    let pending: Vec<_> = (0..REQUESTS)
        .map(|i| {
            c.send(&Request::Produce(Produce {
                topic: "pipe".into(),
                records: vec![record(None, format!("r{i}").as_bytes(), Some((i % 2) as u32))],
            }))
            .expect("send")
        })
        .collect();
    let mut per_partition = [Vec::new(), Vec::new()];
    for (i, p) in pending.into_iter().enumerate() {
        match p.wait().expect("ack") {
            Response::ProduceOk(ok) => {
                assert_eq!(ok.offsets.len(), 1);
                assert_eq!(ok.offsets[0].0, (i % 2) as u32);
                per_partition[i % 2].push((ok.offsets[0].1, format!("r{i}")));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    for (p, acked) in per_partition.iter_mut().enumerate() {
        acked.sort();
        let offsets: Vec<u64> = acked.iter().map(|(o, _)| *o).collect();
        assert_eq!(
            offsets,
            (0..(REQUESTS / 2) as u64).collect::<Vec<_>>(),
            "dense, each once"
        );
        let stored = fetch_all(&c, "pipe", p as u32);
        assert_eq!(stored.len(), REQUESTS / 2);
        for ((o, v), (so, _, sv)) in acked.iter().zip(&stored) {
            assert_eq!((o, v.as_bytes()), (so, sv.as_slice()));
        }
    }
}

#[test]
fn errors_carry_the_http_codes() {
    let b = Broker::start(1);
    let (status, _) = b.post("/v1/topics", json!({"name": "errs", "partitions": 1}));
    assert_eq!(status, 201);
    let c = connect(&b, false);
    let e = c.produce("nope", vec![record(None, b"x", None)]).unwrap_err();
    assert_eq!(e.code(), Some("topic_not_found"));
    let e = c.produce("errs", vec![record(None, b"x", Some(5))]).unwrap_err();
    assert_eq!(e.code(), Some("partition_not_found"));
    let e = c.produce("errs", vec![]).unwrap_err();
    assert_eq!(e.code(), Some("invalid_request"));
    c.produce("errs", vec![record(None, b"x", None)]).unwrap();
    let e = c
        .fetch(Fetch {
            topic: "errs".into(),
            partition: 0,
            offset: Some(7),
            max_records: 10,
            max_bytes: 1000,
            wait_ms: 0,
        })
        .unwrap_err();
    assert_eq!(e.code(), Some("offset_out_of_range"));
    assert!(e.to_string().contains("high watermark 1"), "{e}");
    // The connection is still good after request errors.
    assert_eq!(fetch_all(&c, "errs", 0).len(), 1);
}

/// How long the long-poll test's parked fetch waits.
const PARKED_WAIT_MS: u32 = 20_000;

#[test]
fn long_poll_returns_the_record_produced_while_it_waits() {
    let b = Broker::start(2);
    let (status, _) = b.post("/v1/topics", json!({"name": "lp", "partitions": 1}));
    assert_eq!(status, 201);
    let c = Arc::new(connect(&b, false));
    let producer = connect(&b, false);
    // A round whose record was acknowledged only once the fetch's wait
    // could have run out proves nothing (the machine was slow): it is done
    // again, a record further.
    for offset in 0u64.. {
        let waiter = {
            let c = c.clone();
            std::thread::spawn(move || {
                let sent = Instant::now();
                let got = c.fetch(Fetch {
                    topic: "lp".into(),
                    partition: 0,
                    offset: Some(offset),
                    max_records: 10,
                    max_bytes: 1 << 20,
                    wait_ms: PARKED_WAIT_MS,
                });
                (sent, got)
            })
        };
        // Give the fetch time to park. This cannot change the verdict: a
        // fetch that reaches the broker after the record returns it at once.
        std::thread::sleep(Duration::from_millis(200));
        producer
            .produce("lp", vec![record(None, b"wake up", None)])
            .unwrap();
        let acked = Instant::now();
        let (sent, got) = waiter.join().unwrap();
        let got = got.unwrap();
        if got.record_count() == 0 {
            // The broker's wait began after `sent` and the record was
            // durable before `acked`: within the wait, it had to come back.
            let after = acked.saturating_duration_since(sent);
            assert!(
                after >= Duration::from_millis(u64::from(PARKED_WAIT_MS)),
                "the parked fetch ran out empty, though the record was acknowledged {after:?} \
                 after it was sent, within its {PARKED_WAIT_MS} ms wait"
            );
            eprintln!("the fetch ran out before the record came ({after:?}); again");
            continue;
        }
        assert_eq!(got.record_count(), 1);
        let records = got.to_records();
        assert_eq!(
            (records[0].offset, records[0].value.as_slice()),
            (offset, &b"wake up"[..])
        );
        return;
    }
}

/// Sends raw bytes and returns the frames read back until the broker closes.
/// Frames larger than the broker's 256 KiB read buffer, between small
/// ones, written in odd-sized pieces: each decodes once, in order.
#[test]
fn frames_larger_than_the_read_buffer_and_split_writes() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    let b = Broker::start(2);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "big", "partitions": 1}))
        .unwrap();
    let batch_of = |value: &[u8]| {
        let mut bb = BatchBuilder::default();
        bb.push(None, value, 0);
        bb.finish(0, None).unwrap()
    };
    // Odd ones are ProduceBatch frames: the large ones have their batch
    // read into a buffer of its own.
    let sizes = [10usize, 3 << 20, 7, 700 << 10, 1, 5 << 20, 12, 90 << 10];
    let mut stream = hello_frame();
    for (i, size) in sizes.iter().enumerate() {
        let value: Vec<u8> = (0..*size).map(|j| (i * 31 + j) as u8).collect();
        let req = if i % 2 == 1 {
            Request::ProduceBatch(ProduceBatch {
                topic: "big".into(),
                partition: 0,
                batch: batch_of(&value),
            })
        } else {
            Request::Produce(Produce {
                topic: "big".into(),
                records: vec![record(None, &value, Some(0))],
            })
        };
        stream.extend_from_slice(&req.to_frame(i as u64 + 1, false));
    }
    // A large batch whose checksum is wrong: an error answer, nothing
    // written, the connection goes on.
    let mut bad = batch_of(&vec![7u8; 300 << 10]);
    bad[100] ^= 1;
    let req = Request::ProduceBatch(ProduceBatch {
        topic: "big".into(),
        partition: 0,
        batch: bad,
    });
    stream.extend_from_slice(&req.to_frame(100, false));
    let last = Request::Produce(Produce {
        topic: "big".into(),
        records: vec![record(None, b"last", Some(0))],
    });
    stream.extend_from_slice(&last.to_frame(101, false));
    let mut s = TcpStream::connect(b.binary_addr()).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    // Pieces that cut headers and payloads anywhere.
    for piece in stream.chunks(65_537) {
        s.write_all(piece).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut answers = Vec::new();
    while answers.len() < sizes.len() + 3 {
        let n = s.read(&mut buf).expect("answers arrive");
        assert!(
            n > 0,
            "the broker closed the connection after {} answers",
            answers.len()
        );
        got.extend_from_slice(&buf[..n]);
        answers.clear();
        let mut at = 0;
        while let Ok((f, used)) = frame::parse(&got[at..], 1 << 24) {
            at += used;
            answers.push(f);
        }
    }
    let bad_answer = answers
        .iter()
        .find(|f| f.request_id == 100)
        .expect("an answer to the bad batch");
    match Response::from_frame(bad_answer).unwrap() {
        Response::Error(e) => assert_eq!(e.code, "invalid_request", "{}", e.message),
        other => panic!("expected an error, got {other:?}"),
    }
    let all = fetch_all(&c, "big", 0);
    assert_eq!(all.len(), sizes.len() + 1);
    for (i, (offset, _, value)) in all.iter().take(sizes.len()).enumerate() {
        assert_eq!(*offset, i as u64);
        assert_eq!(value.len(), sizes[i]);
        assert!(
            value.iter().enumerate().all(|(j, v)| *v == (i * 31 + j) as u8),
            "record {i} intact"
        );
    }
    assert_eq!(all[sizes.len()].2, b"last".to_vec());
}

/// A large batch arrives in small pieces with pauses (the broker drains the
/// socket and waits for more many times), and another is cut off by the
/// client closing mid-batch: the first lands whole, the second not at all,
/// and the broker serves on.
#[test]
fn a_large_batch_that_trickles_in_or_is_cut_off() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    // A trickle never stalls long enough to be refused, however slow the
    // machine (--frame-stall-ms at its largest, an hour).
    let b = Broker::start_with(&["--shards", "2", "--frame-stall-ms", FRAME_STALL_MS_MAX]);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "slow", "partitions": 1}))
        .unwrap();
    let frame_of = |id: u64, value: &[u8]| {
        let mut bb = BatchBuilder::default();
        bb.push(None, value, 0);
        Request::ProduceBatch(ProduceBatch {
            topic: "slow".into(),
            partition: 0,
            batch: bb.finish(0, None).unwrap(),
        })
        .to_frame(id, false)
    };
    let value: Vec<u8> = (0..(300usize << 10)).map(|j| (j % 251) as u8).collect();
    // The bytes the shards hold for large frames being received: a batch's
    // once its header has been read, until it is handled or dropped.
    let held = || b.metric_sum("es_request_budget_bytes_held").unwrap_or(0.0);

    // Cut off: the frame's first 200 KiB, then, once the broker is
    // receiving the batch, the connection closes.
    let mut cut = TcpStream::connect(b.binary_addr()).unwrap();
    cut.write_all(&hello_frame()).unwrap();
    cut.write_all(&frame_of(1, &value)[..200 << 10]).unwrap();
    wait_for("the cut-off batch to be received", || {
        held() >= value.len() as f64
    });
    drop(cut);
    wait_for("the cut-off batch's room to be freed", || held() == 0.0);

    // Trickling: 1000-byte pieces, a pause after each of the first 64,
    // then after every 64th. The broker starts its receive clock when it
    // has read the batch header (and holds the batch's room, which is
    // seen); from then on the test measures how long it takes to send the
    // rest, which the broker cannot have received sooner.
    let mut s = TcpStream::connect(b.binary_addr()).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s.write_all(&hello_frame()).unwrap();
    let mut sending = None;
    for (i, piece) in frame_of(7, &value).chunks(1000).enumerate() {
        s.write_all(piece).unwrap();
        if i == 0 {
            wait_for("the broker to read the trickled batch's header", || {
                held() >= value.len() as f64
            });
            sending = Some(Instant::now());
        }
        if i < 64 || i % 64 == 63 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // At least 63 pauses of 2 ms.
    let sent_in = sending.expect("a first piece").elapsed().as_secs_f64();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let answer = loop {
        let n = s.read(&mut buf).expect("an answer arrives");
        assert!(n > 0, "the broker closed the connection");
        got.extend_from_slice(&buf[..n]);
        let mut at = 0;
        let mut found = None;
        while let Ok((f, used)) = frame::parse(&got[at..], 1 << 24) {
            at += used;
            if f.request_id == 7 {
                found = Some(Response::from_frame(&f).unwrap());
            }
        }
        if let Some(r) = found {
            break r;
        }
    };
    match answer {
        Response::ProduceBatchOk(ok) => assert_eq!((ok.base_offset, ok.record_count), (0, 1)),
        other => panic!("expected ProduceBatchOk, got {other:?}"),
    }
    let all = fetch_all(&c, "slow", 0);
    assert_eq!(all.len(), 1, "the cut-off batch wrote nothing");
    assert_eq!(all[0].2, value);
    // The trickled batch took the pauses to arrive after its header was
    // read, and the broker's receive histogram says so (the cut-off batch
    // is not in it: it never finished arriving).
    let received = b
        .metric_sum("es_binary_batch_receive_duration_seconds_sum")
        .expect("es_binary_batch_receive_duration_seconds");
    assert!(
        received >= sent_in,
        "{received} s receiving a batch whose last {sent_in} s of sending came after its header was read"
    );
}

/// The broker speaks versions 1 and 2 and agrees on the newest both
/// speak; a version 1 connection gets error frames without details.
/// DescribeCluster on a broker without --peers is `not_found`.
#[test]
fn versions_1_and_2_and_a_standalone_cluster_describe() {
    let b = Broker::start(1);
    for ((min, max), agreed) in [((1, 1), 1), ((1, 2), 2), ((2, 9), 2)] {
        let mut s = TcpStream::connect(b.binary_addr()).unwrap();
        s.set_read_timeout(Some(hang_guard())).unwrap();
        let hello = Request::Hello(Hello {
            min_version: min,
            max_version: max,
            client_id: "versions".into(),
            api_key: String::new(),
        });
        s.write_all(&hello.to_frame(0, false)).unwrap();
        match es_protocol::client::read_response(&mut s).unwrap() {
            Some((_, Response::HelloOk(ok))) => assert_eq!(ok.version, agreed, "{min}..={max}"),
            other => panic!("{min}..={max}: {other:?}"),
        }
        let describe = Request::Admin(Kind::DescribeTopic, json!({"name": "nope"}));
        s.write_all(&describe.to_frame(1, false)).unwrap();
        match es_protocol::client::read_response(&mut s).unwrap() {
            Some((1, Response::Error(e))) => {
                assert_eq!((e.code.as_str(), e.details), ("topic_not_found", None))
            }
            other => panic!("{other:?}"),
        }
    }
    let c = connect(&b, false);
    let e = c.admin(Kind::DescribeCluster, json!({})).unwrap_err();
    assert_eq!(e.code(), Some("not_found"));
    assert!(e.to_string().contains("runs standalone (no --peers)"), "{e}");
}

fn raw_exchange(addr: &str, bytes: &[u8]) -> Vec<Response> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok((f, used)) = frame::parse(&got[at..], 1 << 24) {
        out.push(Response::from_frame(&f).expect("a response frame"));
        at += used;
    }
    assert_eq!(at, got.len(), "only whole frames come back");
    out
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

fn last_error_code(frames: &[Response]) -> String {
    match frames.last() {
        Some(Response::Error(e)) => e.code.clone(),
        other => panic!("expected an error frame last, got {other:?}"),
    }
}

#[test]
fn hostile_frames_get_an_error_frame_and_a_closed_connection() {
    let b = Broker::start_with(&["--shards", "2", "--frame-bytes-max", "65536"]);
    let (status, _) = b.post("/v1/topics", json!({"name": "safe", "partitions": 1}));
    assert_eq!(status, 201);
    let addr = b.binary_addr();

    // No handshake first.
    let produce = Request::Produce(Produce {
        topic: "safe".into(),
        records: vec![record(None, b"x", None)],
    });
    let frames = raw_exchange(&addr, &produce.to_frame(5, false));
    assert_eq!(last_error_code(&frames), "handshake_required");

    // Unsupported version.
    let bad_hello = Request::Hello(Hello {
        min_version: 7,
        max_version: 9,
        client_id: "x".into(),
        api_key: String::new(),
    });
    assert_eq!(
        last_error_code(&raw_exchange(&addr, &bad_hello.to_frame(0, false))),
        "unsupported_version"
    );

    // Garbage after a good handshake.
    let mut bytes = hello_frame();
    bytes.extend_from_slice(b"\x00\x00\x00\x0cGARBAGE-GARBAGE");
    let frames = raw_exchange(&addr, &bytes);
    assert!(matches!(frames[0], Response::HelloOk(_)));
    assert_eq!(last_error_code(&frames), "malformed_frame");

    // An oversized frame, refused from its header alone.
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&frame::encode(Kind::Produce, 9, &vec![0u8; 70_000], false)[..64]);
    let frames = raw_exchange(&addr, &bytes);
    assert_eq!(last_error_code(&frames), "frame_too_large");
    if let Some(Response::Error(_)) = frames.last() {
        // The error names the request id when the header was readable.
    }

    // A response kind sent as a request; an unknown kind byte.
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&frame::encode(Kind::FetchOk, 3, &[], false));
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "unknown_request");
    let mut bytes = hello_frame();
    let mut unknown = frame::encode(Kind::Produce, 3, &[], false);
    unknown[4] = 0x42;
    bytes.extend_from_slice(&unknown);
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "malformed_frame");

    // A truncated produce payload.
    let mut bytes = hello_frame();
    let good = produce.to_frame(4, false);
    let mut cut = frame::encode(
        Kind::Produce,
        4,
        &good[frame::HEADER_BYTES..good.len() - 3],
        false,
    );
    bytes.append(&mut cut);
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "malformed_frame");

    // Random noise on many connections.
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..50 {
        let noise: Vec<u8> = (0..512)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let mut bytes = hello_frame();
        bytes.extend_from_slice(&noise);
        let _ = raw_exchange(&addr, &bytes);
    }

    // Nothing was written, and everyone else is served.
    let c = connect(&b, false);
    assert!(fetch_all(&c, "safe", 0).is_empty());
    assert_eq!(
        c.produce("safe", vec![record(None, b"ok", None)]).unwrap(),
        vec![(0, 0)]
    );
    let (status, _) = b.get("/health");
    assert_eq!(status, 200);
    let err = match Client::connect(&addr, Options::default()) {
        Ok(c) => c
            .produce("safe", vec![record(None, &vec![0u8; 70_000], None)])
            .unwrap_err(),
        Err(e) => e,
    };
    assert!(
        matches!(err, ClientError::Protocol(_)),
        "the client refuses frames over the broker's limit: {err}"
    );
}

/// What a frame header announces costs a client 16 bytes: the broker's
/// memory must follow what a client sends, not what it announces. Before
/// the handshake no frame may be larger than a Hello can be; after it, a
/// header announcing 16 MiB grows no buffer until the bytes come.
#[test]
fn announced_frame_sizes_cost_the_broker_nothing_until_sent() {
    let b = Broker::start_with(&["--shards", "2"]);
    let addr = b.binary_addr();

    // Before the handshake: a Hello header announcing 1 MiB, and 100 bytes
    // of it, is refused at once (not waited for).
    let mut bytes = frame::encode(Kind::Hello, 7, &vec![0u8; 1 << 20], false);
    bytes.truncate(frame::HEADER_BYTES + 100);
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "frame_too_large");

    // After it: 64 connections each announce a 15 MiB frame and send
    // 100 bytes of it. The HelloOk comes after the broker read both (one
    // write, one shard task), so the buffers are sized by then.
    let rss = || broker_rss(&b);
    let before = rss();
    let mut held = Vec::new();
    for i in 0..64u64 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(hang_guard())).unwrap();
        let mut bytes = hello_frame();
        let mut big = frame::encode(Kind::Fetch, i, &vec![0u8; 15 << 20], false);
        big.truncate(frame::HEADER_BYTES + 100);
        bytes.extend_from_slice(&big);
        s.write_all(&bytes).unwrap();
        let mut head = [0u8; frame::HEADER_BYTES];
        s.read_exact(&mut head).unwrap();
        assert_eq!(head[4], 0x81, "HelloOk first");
        held.push(s);
    }
    // Looked at twice, half a second apart, for a broker that would grow
    // its buffers later. The pause cannot fail a broker that sizes them by
    // what has arrived: with nothing more sent, there is nothing to grow by,
    // however long the pause lasts or however slow the broker is.
    for _ in 0..2 {
        let grown = rss().saturating_sub(before);
        assert!(
            grown < 256 << 20,
            "64 announced 15 MiB frames grew the broker by {} MiB",
            grown >> 20
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Everyone else is served meanwhile.
    let (status, _) = b.post("/v1/topics", json!({"name": "t", "partitions": 1}));
    assert_eq!(status, 201);
    let c = connect(&b, false);
    assert_eq!(
        c.produce("t", vec![record(None, b"x", None)]).unwrap(),
        vec![(0, 0)]
    );
    drop(held);
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

/// An idle connection holds a small read buffer: 400 connections past
/// their handshake grow the broker by well under what 256 KiB buffers
/// would (100 MiB; 10,000 such connections would hold 2.5 GB).
#[test]
fn idle_connections_hold_little_memory() {
    let b = Broker::start_with(&["--shards", "2"]);
    let addr = b.binary_addr();
    let before = broker_rss(&b);
    let mut held = Vec::new();
    for _ in 0..400 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(hang_guard())).unwrap();
        s.write_all(&hello_frame()).unwrap();
        held.push(s);
    }
    let answer = |s: &mut TcpStream| {
        let mut head = [0u8; frame::HEADER_BYTES];
        s.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; len + 4 - frame::HEADER_BYTES];
        s.read_exact(&mut rest).unwrap();
        head[4]
    };
    for s in &mut held {
        assert_eq!(answer(s), 0x81, "HelloOk");
    }
    let grown = broker_rss(&b).saturating_sub(before);
    assert!(
        grown < 48 << 20,
        "400 idle connections grew the broker by {} MiB",
        grown >> 20
    );
    // They still work, for small requests and large ones.
    let big =
        Request::Admin(Kind::DescribeTopic, json!({ "name": "x".repeat(300 << 10) })).to_frame(1, false);
    for s in held.iter_mut().take(3) {
        s.write_all(&big).unwrap();
        assert_eq!(answer(s), 0xff, "an error frame: no such topic");
        s.write_all(&Request::Admin(Kind::ListTopics, json!({})).to_frame(2, false))
            .unwrap();
        assert_eq!(answer(s), Kind::AdminOk as u8, "the topic list");
    }
}

/// A shard holds at most `--request-shard-bytes` of large requests, from
/// a frame's header until its answer: a client that sends most of a large
/// frame and stalls holds that frame's bytes, so another client's large
/// frame waits, unread and unanswered, while small requests are still
/// answered; once the first client goes away the waiting frame is read
/// and answered.
#[test]
fn large_requests_wait_for_the_shards_request_budget() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    // A's frame stays unfinished as long as the test needs, however slow
    // the machine: --frame-stall-ms at its largest (an hour).
    let b = Broker::start_with(&[
        "--shards",
        "1",
        "--frame-bytes-max",
        "1048576",
        "--request-shard-bytes",
        "1048576",
        "--frame-stall-ms",
        FRAME_STALL_MS_MAX,
    ]);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "rb", "partitions": 1}))
        .unwrap();
    let large = |id: u64| {
        let mut bb = BatchBuilder::default();
        for i in 0..600 {
            bb.push(None, &[i as u8; 1000], 1_700_000_000_000);
        }
        Request::ProduceBatch(ProduceBatch {
            topic: "rb".into(),
            partition: 0,
            batch: bb.finish(0, None).unwrap(),
        })
        .to_frame(id, false)
    };
    let handshaken = || {
        let mut s = TcpStream::connect(b.binary_addr()).unwrap();
        s.write_all(&hello_frame()).unwrap();
        let mut head = [0u8; frame::HEADER_BYTES];
        s.read_exact(&mut head).unwrap();
        let mut rest = vec![0u8; u32::from_be_bytes(head[..4].try_into().unwrap()) as usize + 4 - 16];
        s.read_exact(&mut rest).unwrap();
        s
    };
    let held = || {
        b.metric(r#"es_request_budget_bytes_held{shard="0"}"#)
            .unwrap_or(0.0)
    };

    // A: all but the last kilobyte of a 600 KB frame, then nothing.
    let mut a = handshaken();
    let frame_a = large(1);
    a.write_all(&frame_a[..frame_a.len() - 1000]).unwrap();
    wait_for("A's frame is charged", || held() >= frame_a.len() as f64);

    // B: a whole 600 KB frame, which does not fit beside A's.
    let mut bc = handshaken();
    bc.write_all(&large(2)).unwrap();
    wait_for("B's frame waits", || {
        b.metric(r#"es_request_budget_waits_total{listener="binary"}"#)
            .unwrap_or(0.0)
            >= 1.0
    });
    // Small requests still flow, and are appended before B's frame (its
    // records would come first otherwise).
    assert_eq!(
        c.produce("rb", vec![record(None, b"small", None)]).unwrap(),
        vec![(0, 0)]
    );
    // No answer to B while the budget is held: after the broker has
    // answered a request that came later, B's connection has nothing to
    // read (looked at without waiting).
    bc.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    match bc.read(&mut byte) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("no answer while the budget is held, got {other:?}"),
    }
    bc.set_nonblocking(false).unwrap();

    // A goes away: B's frame is read, appended and answered.
    drop(a);
    bc.set_read_timeout(Some(hang_guard())).unwrap();
    let mut head = [0u8; frame::HEADER_BYTES];
    bc.read_exact(&mut head).unwrap();
    assert_eq!(head[4], Kind::ProduceBatchOk as u8, "B's answer");
    let mut rest = vec![0u8; u32::from_be_bytes(head[..4].try_into().unwrap()) as usize + 4 - 16];
    bc.read_exact(&mut rest).unwrap();
    assert_eq!(fetch_all(&c, "rb", 0).len(), 601, "the small record and B's 600");
    wait_for("every charge is released", || held() == 0.0);
}

/// A client that sends most of a large frame and then nothing is closed
/// with `frame_stalled` after `--frame-stall-ms`, and the room its frame
/// held in the shard's request budget is freed: a frame read into the
/// connection's buffer (a large admin request) and a large ProduceBatch
/// read into memory of its own alike.
#[test]
fn a_large_frame_that_stops_arriving_is_refused_and_its_room_freed() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    let b = Broker::start_with(&["--shards", "1", "--frame-stall-ms", "300"]);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "st", "partitions": 1}))
        .unwrap();
    let mut bb = BatchBuilder::default();
    for i in 0..300 {
        bb.push(None, &[i as u8; 1000], 1_700_000_000_000);
    }
    let frames = [
        Request::Admin(Kind::DescribeTopic, json!({ "name": "x".repeat(200 << 10) })).to_frame(7, false),
        Request::ProduceBatch(ProduceBatch {
            topic: "st".into(),
            partition: 0,
            batch: bb.finish(0, None).unwrap(),
        })
        .to_frame(8, false),
    ];
    for (i, frame) in frames.iter().enumerate() {
        let mut bytes = hello_frame();
        bytes.extend_from_slice(&frame[..frame.len() - 1000]);
        let got = raw_exchange(&b.binary_addr(), &bytes);
        assert_eq!(last_error_code(&got), "frame_stalled", "frame {i}: {got:?}");
        wait_for("the stalled frame's room is freed", || {
            b.metric(r#"es_request_budget_bytes_held{shard="0"}"#)
                .unwrap_or(0.0)
                == 0.0
        });
    }
    assert_eq!(b.metric("es_binary_stalled_frames_total"), Some(2.0));
    // Nothing was appended.
    assert!(fetch_all(&c, "st", 0).is_empty());
}

/// ProduceBatch: a batch the producer built is appended as it came (same
/// records, timestamps and keys back from a fetch), at the next offsets;
/// a bad one changes nothing; an idempotent one is written once; a
/// compacted topic refuses keyless records in it.
#[test]
fn produce_batch_appends_the_producers_batch() {
    use es_protocol::batch::BatchBuilder;
    let b = Broker::start(2);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "pb", "partitions": 2}))
        .unwrap();
    c.produce("pb", vec![record(None, b"first", Some(1))]).unwrap();
    let build = |producer: Option<(i64, i16, i32)>| {
        let mut bb = BatchBuilder::default();
        bb.push(Some(b"k1"), b"one", 1_700_000_000_001);
        bb.push(None, b"two", 1_700_000_000_002);
        bb.push(Some(b""), b"", 1_700_000_000_003);
        bb.finish(0, producer).unwrap()
    };
    assert_eq!(
        c.produce_batch("pb", 1, build(None)).unwrap(),
        1,
        "after the record already there"
    );
    let got = fetch_all(&c, "pb", 1);
    let tail: Vec<_> = got[1..]
        .iter()
        .map(|(o, k, v)| (*o, k.clone(), v.clone()))
        .collect();
    assert_eq!(
        tail,
        vec![
            (1, Some(b"k1".to_vec()), b"one".to_vec()),
            (2, None, b"two".to_vec()),
            (3, Some(vec![]), vec![]),
        ]
    );
    let ok = c
        .fetch(Fetch {
            topic: "pb".into(),
            partition: 1,
            offset: Some(2),
            max_records: 10,
            max_bytes: 1 << 20,
            wait_ms: 0,
        })
        .unwrap();
    assert_eq!(
        ok.records()
            .map(|r| (r.offset, r.timestamp_ms))
            .collect::<Vec<_>>(),
        vec![(2, 1_700_000_000_002), (3, 1_700_000_000_003)],
        "the producer's timestamps; records before the asked offset are skipped"
    );

    // A flipped bit: refused by the storage's checksum check, nothing
    // written, the connection still serves.
    let mut bad = build(None);
    let v = bad.windows(3).position(|w| w == b"one").expect("a value");
    bad[v] ^= 1;
    let err = c.produce_batch("pb", 0, bad).unwrap_err();
    assert_eq!(err.code(), Some("invalid_request"), "{err}");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    assert!(fetch_all(&c, "pb", 0).is_empty(), "nothing written");
    // Broken framing is the decoder's: a malformed frame, connection closed.
    let mut cut = build(None);
    cut.truncate(cut.len() - 1);
    let req = Request::ProduceBatch(es_protocol::requests::produce_batch::ProduceBatch {
        topic: "pb".into(),
        partition: 0,
        batch: cut,
    });
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&req.to_frame(1, false));
    assert_eq!(
        last_error_code(&raw_exchange(&b.binary_addr(), &bytes)),
        "malformed_frame"
    );
    assert!(fetch_all(&c, "pb", 0).is_empty());
    let err = c.produce_batch("pb", 5, build(None)).unwrap_err();
    assert_eq!(err.code(), Some("partition_not_found"));

    // Idempotent: a retry is answered with the original offset, written once.
    let (id, epoch) = c.init_producer(None).unwrap();
    let first = c.produce_batch("pb", 0, build(Some((id, epoch, 0)))).unwrap();
    let retry = c.produce_batch("pb", 0, build(Some((id, epoch, 0)))).unwrap();
    assert_eq!((first, retry), (0, 0));
    assert_eq!(fetch_all(&c, "pb", 0).len(), 3);
    let gap = c.produce_batch("pb", 0, build(Some((id, epoch, 9)))).unwrap_err();
    assert_eq!(gap.code(), Some("out_of_order_sequence"));
    let next = c.produce_batch("pb", 0, build(Some((id, epoch, 3)))).unwrap();
    assert_eq!(next, 3);

    // Compacted: every record needs a key.
    c.admin(
        Kind::CreateTopic,
        json!({"name": "pbc", "partitions": 1, "config": {"cleanup_policy": "compact"}}),
    )
    .unwrap();
    let err = c.produce_batch("pbc", 0, build(None)).unwrap_err();
    assert_eq!(err.code(), Some("invalid_request"), "{err}");
    assert!(fetch_all(&c, "pbc", 0).is_empty());
}

#[test]
fn groups_and_idempotent_producers_over_binary() {
    let b = Broker::start(2);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "gb", "partitions": 2}))
        .unwrap();
    let (id, epoch) = c.init_producer(None).unwrap();
    assert_eq!(epoch, 0);
    let batch = || vec![record(None, b"once", Some(1))];
    let first = c.produce_idempotent("gb", (id, epoch, 0), batch()).unwrap();
    let retry = c.produce_idempotent("gb", (id, epoch, 0), batch()).unwrap();
    assert_eq!(first, retry, "a retry is answered with the original offsets");
    assert_eq!(fetch_all(&c, "gb", 1).len(), 1, "and written once");
    let gap = c.produce_idempotent("gb", (id, epoch, 9), batch()).unwrap_err();
    assert_eq!(gap.code(), Some("out_of_order_sequence"));
    let (_, epoch1) = c.init_producer(Some(id)).unwrap();
    assert_eq!(epoch1, 1);
    let fenced = c.produce_idempotent("gb", (id, 0, 1), batch()).unwrap_err();
    assert_eq!(fenced.code(), Some("producer_fenced"));

    let joined = c
        .admin(Kind::JoinGroup, json!({"group": "g", "topics": ["gb"]}))
        .unwrap();
    let member = joined["member_id"].as_str().unwrap().to_string();
    let generation = joined["generation"].as_u64().unwrap();
    assert_eq!(joined["assignments"].as_array().unwrap().len(), 2);
    let hb = c
        .admin(Kind::Heartbeat, json!({"group": "g", "member_id": member}))
        .unwrap();
    assert_eq!(hb["generation"], generation);
    c.admin(
        Kind::CommitOffsets,
        json!({"group": "g", "member_id": member, "generation": generation,
               "offsets": [{"topic": "gb", "partition": 1, "offset": 1}]}),
    )
    .unwrap();
    let stale = c
        .admin(
            Kind::CommitOffsets,
            json!({"group": "g", "member_id": member, "generation": generation + 7,
                   "offsets": [{"topic": "gb", "partition": 1, "offset": 1}]}),
        )
        .unwrap_err();
    assert_eq!(stale.code(), Some("stale_generation"));
    let commits = c.admin(Kind::FetchCommits, json!({"group": "g"})).unwrap();
    assert_eq!(
        commits["offsets"],
        json!([{"topic": "gb", "partition": 1, "offset": 1}])
    );
    let desc = c.admin(Kind::DescribeGroup, json!({"group": "g"})).unwrap();
    assert_eq!(desc, b.get("/v1/groups/g").1, "binary and HTTP describe agree");
    let list = c.admin(Kind::ListGroups, json!({})).unwrap();
    assert_eq!(list["groups"][0]["name"], "g");
    assert_eq!(
        c.admin(Kind::DeleteGroup, json!({"group": "g"}))
            .unwrap_err()
            .code(),
        Some("group_not_empty")
    );
    c.admin(Kind::LeaveGroup, json!({"group": "g", "member_id": member}))
        .unwrap();
    let reset = c
        .admin(
            Kind::ResetGroup,
            json!({"group": "g", "topic": "gb", "to": "earliest"}),
        )
        .unwrap();
    assert_eq!(reset["offsets"].as_array().unwrap().len(), 2);
    c.admin(Kind::DeleteGroup, json!({"group": "g"})).unwrap();
    assert_eq!(
        c.admin(Kind::FetchCommits, json!({"group": "g"}))
            .unwrap_err()
            .code(),
        Some("group_not_found")
    );
}

/// The durability contract through the binary protocol, with direct
/// segment writes: four producers pipeline ProduceBatch requests of odd
/// sizes (batches end anywhere in a page, so partial pages are rewritten
/// all the time; some large enough to be written while they arrive) on
/// two partitions; the broker is killed with SIGKILL in
/// the middle of the load; after a restart every acknowledged batch reads
/// back byte-identical at the offsets its acknowledgement gave.
#[test]
fn acknowledged_batches_survive_kill9_mid_load() {
    use es_protocol::requests::produce_batch::ProduceBatch;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    let mut b = Broker::start(2);
    connect(&b, false)
        .admin(Kind::CreateTopic, json!({"name": "k9", "partitions": 2}))
        .unwrap();
    type Acked = (u32, u64, Vec<Vec<u8>>);
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let acks = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..4u32)
        .map(|t| {
            let client = connect(&b, false);
            let (acked, acks, stop) = (acked.clone(), acks.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut inflight: VecDeque<_> = VecDeque::new();
                for i in 0u32.. {
                    if inflight.len() == 4 || (stop.load(Ordering::Relaxed) && !inflight.is_empty()) {
                        let (partition, values, pending): (
                            u32,
                            Vec<Vec<u8>>,
                            es_protocol::client::PendingResponse,
                        ) = inflight.pop_front().expect("in flight");
                        match pending.wait() {
                            Ok(Response::ProduceBatchOk(ok)) => {
                                acked.lock().unwrap().push((partition, ok.base_offset, values));
                                acks.fetch_add(1, Ordering::Relaxed);
                            }
                            // The broker was killed: nothing more is acknowledged.
                            _ => return,
                        }
                        continue;
                    }
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let partition = t % 2;
                    // Every sixth batch is large (~120 KiB): received apart
                    // and written while it arrives (early writes).
                    let count = if i % 6 == 5 { 40 } else { 1 + i % 5 };
                    let values: Vec<Vec<u8>> = (0..count)
                        .map(|j| {
                            let len = ((i * 37 + j * 101 + t * 13) % 3000 + 1) as usize;
                            (0..len).map(|k| (k as u32 ^ i ^ (t << 5)) as u8).collect()
                        })
                        .collect();
                    let req = Request::ProduceBatch(ProduceBatch {
                        topic: "k9".into(),
                        partition,
                        batch: batch_of(&values, 1_700_000_000_000),
                    });
                    match client.send(&req) {
                        Ok(pending) => inflight.push_back((partition, values, pending)),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    // (Or every producer has stopped: the assertion below says so.)
    wait_for("300 acknowledged batches", || {
        acks.load(Ordering::Relaxed) >= 300 || producers.iter().all(|p| p.is_finished())
    });
    b.kill9();
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.join().expect("a producer thread");
    }
    b.restart();
    let c = connect(&b, false);
    let logs: Vec<_> = (0..2).map(|p| fetch_all(&c, "k9", p)).collect();
    let acked = acked.lock().unwrap();
    assert!(acked.len() >= 300);
    for (partition, base, values) in acked.iter() {
        for (j, v) in values.iter().enumerate() {
            let offset = base + j as u64;
            let got = logs[*partition as usize]
                .get(offset as usize)
                .unwrap_or_else(|| panic!("acknowledged offset {offset} of partition {partition} is gone"));
            assert_eq!(got.0, offset);
            assert_eq!(&got.2, v, "partition {partition} offset {offset} intact");
        }
    }
}

/// Contract: a pipelining producer's large batches, queued behind each
/// other and joined into one write, are each written from the
/// page-aligned memory they were received into
/// (`es_paged_batch_writes_total{outcome="in_place"}` counts every one;
/// docs/storage.md, "Batches written as they lie"), and read back as
/// sent.
#[test]
fn a_pipelining_producers_large_batches_are_written_where_they_were_received() {
    use es_protocol::requests::produce_batch::ProduceBatch;
    let b = Broker::start(1);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "pl", "partitions": 1}))
        .unwrap();
    // Batches of 90-110 KiB whose lengths end anywhere in a page.
    let batches: Vec<Vec<Vec<u8>>> = (0..8usize)
        .map(|i| {
            (0..30usize)
                .map(|j| (0..3000 + i * 97 + j).map(|k| (k ^ i ^ j) as u8).collect())
                .collect()
        })
        .collect();
    let pending: Vec<_> = batches
        .iter()
        .map(|values| {
            let req = Request::ProduceBatch(ProduceBatch {
                topic: "pl".into(),
                partition: 0,
                batch: batch_of(values, 1_700_000_000_000),
            });
            c.send(&req).expect("sent")
        })
        .collect();
    for p in pending {
        assert!(matches!(p.wait(), Ok(Response::ProduceBatchOk(_))));
    }
    let count = |outcome: &str| {
        b.metric(&format!(r#"es_paged_batch_writes_total{{outcome="{outcome}"}}"#))
            .unwrap_or(0.0)
    };
    assert_eq!(
        (count("in_place"), count("copied")),
        (8.0, 0.0),
        "every batch written from its own pages"
    );
    let got = fetch_all(&c, "pl", 0);
    let sent: Vec<&Vec<u8>> = batches.iter().flatten().collect();
    assert_eq!(got.len(), sent.len());
    for (i, (offset, _, value)) in got.iter().enumerate() {
        assert_eq!(*offset, i as u64);
        assert_eq!(value, sent[i], "offset {i}");
    }
}
