//! Producers over the binary protocol: ProduceBatch, consumer groups and
//! idempotent producers, acknowledged batches across a kill -9, and
//! pipelined large batches written where they were received.

use super::*;

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
