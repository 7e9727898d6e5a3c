//! Requests over the binary protocol and their answers: topics, produce
//! and fetch (plain and gzip), pipelining, error codes, long-poll,
//! protocol versions.

use super::*;

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
