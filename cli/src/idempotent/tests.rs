use std::cell::RefCell;
use std::rc::Rc;

use super::fake_broker::*;
use super::*;

fn broker(faults: &[(usize, Fault)]) -> Rc<RefCell<Broker>> {
    Rc::new(RefCell::new(Broker {
        connected: true,
        faults: faults.iter().copied().collect(),
        ..Default::default()
    }))
}

/// Every record is its own batch (`batch_bytes` 1), nothing lingers.
fn producer(b: &Rc<RefCell<Broker>>, partitions: u32) -> IdempotentProducer<FakeLink> {
    let settings = Settings {
        batch_bytes: 1,
        linger: Duration::from_secs(3600),
        max_in_flight: 8,
    };
    IdempotentProducer::new(
        FakeLink(b.clone()),
        "t",
        Partitioner::new(partitions, 0),
        settings,
    )
    .expect("a producer")
}

fn record(partition: u32, value: &str) -> ProduceRecord {
    ProduceRecord {
        partition: Some(partition),
        timestamp_ms: None,
        key: None,
        value: value.as_bytes().to_vec(),
    }
}

fn values(b: &Rc<RefCell<Broker>>, p: u32) -> Vec<String> {
    b.borrow()
        .logs
        .get(&p)
        .map(|l| {
            l.iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn backoff_doubles_from_100ms_to_1s() {
    let waits: Vec<u64> = (1..=RECONNECT_ATTEMPTS_MAX)
        .map(|a| backoff(a).as_millis() as u64)
        .collect();
    assert_eq!(waits[..5], [100, 200, 400, 800, 1000]);
    assert!(waits[5..].iter().all(|&w| w == 1000));
    assert_eq!(backoff(u32::MAX), Duration::from_secs(1));
}

#[test]
fn sequences_count_records_per_partition() {
    let b = broker(&[]);
    let mut p = producer(&b, 2);
    for (partition, v) in [(0, "a"), (1, "b"), (0, "c"), (0, "d")] {
        p.send(record(partition, v)).expect("send");
    }
    let acks = p.flush().expect("flush");
    assert_eq!(acks, vec![(0, 0), (1, 0), (0, 1), (0, 2)]);
    assert_eq!(b.borrow().seen, vec![(0, 0, 1), (1, 0, 1), (0, 1, 1), (0, 2, 1)]);
}

#[test]
fn a_lost_answer_is_resent_with_its_sequence_and_written_once() {
    // Request 1 (partition 1, sequence 0) is written but its answer is
    // lost with the connection; requests 2 and 3 go nowhere.
    let b = broker(&[(1, Fault::AnswerLost)]);
    let mut p = producer(&b, 2);
    for (partition, v) in [(0, "a"), (1, "b"), (0, "c"), (0, "d")] {
        p.send(record(partition, v)).expect("send");
    }
    let acks = p.flush().expect("flush");
    assert_eq!(acks, vec![(0, 0), (1, 0), (0, 1), (0, 2)]);
    let broker = b.borrow();
    assert_eq!(
        broker.seen,
        vec![
            (0, 0, 1),
            (1, 0, 1),
            // resent after reconnecting: every unacknowledged batch, in
            // order, with its original sequence
            (1, 0, 1),
            (0, 1, 1),
            (0, 2, 1),
        ],
        "requests 2 and 3 failed before reaching the broker"
    );
    assert_eq!(broker.pauses, vec![Duration::from_millis(100)]);
    assert_eq!(broker.reconnects, 1);
    drop(broker);
    assert_eq!(values(&b, 0), vec!["a", "c", "d"]);
    assert_eq!(values(&b, 1), vec!["b"], "written once");
}

#[test]
fn batches_after_an_unavailable_one_are_resent_in_order() {
    // Partition 0's batch at sequence 1 gets `unavailable`; the next
    // two (sequences 2 and 3) are then out of order. Partition 1's
    // batch in between is acknowledged and not resent.
    let b = broker(&[(1, Fault::Unavailable)]);
    let mut p = producer(&b, 2);
    for (partition, v) in [(0, "a"), (0, "b"), (1, "x"), (0, "c"), (0, "d")] {
        p.send(record(partition, v)).expect("send");
    }
    let acks = p.flush().expect("flush");
    assert_eq!(acks, vec![(0, 0), (0, 1), (1, 0), (0, 2), (0, 3)]);
    assert_eq!(
        b.borrow().seen,
        vec![
            (0, 0, 1),
            (0, 1, 1),
            (1, 0, 1),
            (0, 2, 1),
            (0, 3, 1),
            (0, 1, 1),
            (0, 2, 1),
            (0, 3, 1)
        ]
    );
    assert_eq!(values(&b, 0), vec!["a", "b", "c", "d"]);
    assert_eq!(values(&b, 1), vec!["x"]);
}

#[test]
fn a_batch_sent_on_a_dead_connection_is_resent() {
    // The connection drops before request 0 is read: nothing written.
    let b = broker(&[(0, Fault::Lost)]);
    let mut p = producer(&b, 1);
    p.send(record(0, "a")).expect("send");
    p.send(record(0, "b"))
        .expect("send (fails on the dead connection, queued)");
    assert_eq!(p.flush().expect("flush"), vec![(0, 0), (0, 1)]);
    assert_eq!(b.borrow().seen, vec![(0, 0, 1), (0, 0, 1), (0, 1, 1)]);
    assert_eq!(values(&b, 0), vec!["a", "b"]);
}

#[test]
fn refused_reconnects_back_off_then_succeed() {
    let b = broker(&[(0, Fault::AnswerLost)]);
    b.borrow_mut().refuse_reconnects = 3;
    let mut p = producer(&b, 1);
    p.send(record(0, "a")).expect("send");
    assert_eq!(p.flush().expect("flush"), vec![(0, 0)]);
    let ms: Vec<u128> = b.borrow().pauses.iter().map(Duration::as_millis).collect();
    assert_eq!(ms, vec![100, 200, 400, 800]);
    assert_eq!(values(&b, 0), vec!["a"]);
    // the count starts again after an acknowledgement
    b.borrow_mut().faults.insert(2, Fault::AnswerLost);
    p.send(record(0, "b")).expect("send");
    assert_eq!(p.flush().expect("flush"), vec![(0, 1)]);
    let ms: Vec<u128> = b.borrow().pauses.iter().map(Duration::as_millis).collect();
    assert_eq!(ms, vec![100, 200, 400, 800, 100]);
    assert_eq!(values(&b, 0), vec!["a", "b"]);
}

#[test]
fn gives_up_after_ten_attempts() {
    let b = broker(&[(0, Fault::Lost)]);
    b.borrow_mut().refuse_reconnects = u32::MAX;
    let mut p = producer(&b, 1);
    p.send(record(0, "a")).expect("send");
    let err = p.flush().expect_err("no broker to reconnect to");
    assert!(matches!(err, ClientError::Io(_)), "{err:?}");
    assert_eq!(b.borrow().reconnects, RECONNECT_ATTEMPTS_MAX);
    assert_eq!(b.borrow().pauses.len(), RECONNECT_ATTEMPTS_MAX as usize);
}

#[test]
fn fenced_stops_without_retrying() {
    let b = broker(&[(1, Fault::Fenced)]);
    let mut p = producer(&b, 1);
    p.send(record(0, "a")).expect("send");
    p.send(record(0, "b")).expect("send");
    let err = p.flush().expect_err("fenced");
    assert_eq!(err.code(), Some("producer_fenced"));
    assert!(b.borrow().pauses.is_empty());
    assert_eq!(b.borrow().seen.len(), 2);
}

#[test]
fn an_expired_id_is_replaced_when_no_batch_can_have_been_written() {
    let b = broker(&[]);
    let mut p = producer(&b, 2);
    p.send(record(0, "a")).expect("send");
    p.send(record(1, "b")).expect("send");
    assert_eq!(p.flush().expect("flush"), vec![(0, 0), (1, 0)]);
    // The broker forgets the id (it expired while the producer was
    // idle): the next three batches are refused on their first send.
    b.borrow_mut().expire_from = Some(2);
    for (partition, v) in [(0, "c"), (0, "d"), (1, "e")] {
        p.send(record(partition, v)).expect("send");
    }
    assert_eq!(p.flush().expect("a new id"), vec![(0, 1), (0, 2), (1, 1)]);
    let broker = b.borrow();
    assert_eq!(
        broker.seen[5..],
        [(0, 0, 1), (0, 1, 1), (1, 0, 1)],
        "sent again in order, from sequence 0 on each partition"
    );
    assert_eq!(broker.seen_ids, vec![7, 7, 7, 7, 7, 8, 8, 8]);
    assert!(broker.pauses.is_empty());
    drop(broker);
    assert_eq!(values(&b, 0), vec!["a", "c", "d"]);
    assert_eq!(values(&b, 1), vec!["b", "e"]);
}

#[test]
fn an_expired_id_is_not_replaced_when_a_batch_may_have_been_written() {
    // Request 1 is written but its answer is lost with the connection;
    // when it is sent again, the broker no longer knows the id.
    let b = broker(&[(1, Fault::AnswerLost)]);
    b.borrow_mut().expire_from = Some(2);
    let mut p = producer(&b, 1);
    p.send(record(0, "a")).expect("send");
    p.send(record(0, "b")).expect("send");
    let err = p
        .flush()
        .expect_err("b may be written: not sent under another id");
    assert_eq!(err.code(), Some("unknown_producer_id"));
    assert_eq!(b.borrow().issued, 1, "no new id");
    assert_eq!(values(&b, 0), vec!["a", "b"], "written once");
}

#[test]
fn at_most_five_batches_per_partition_unacknowledged() {
    let b = broker(&[]);
    let mut p = producer(&b, 2);
    for i in 0..40 {
        let partition = u32::from(i % 4 == 0);
        p.send(record(partition, &i.to_string())).expect("send");
        assert!(p.unacked.len() <= 8);
    }
    let acks = p.flush().expect("flush");
    assert_eq!(acks.len(), 40);
    assert_eq!(b.borrow().most_outstanding, PARTITION_BATCHES_INFLIGHT_MAX);
    assert_eq!(values(&b, 0).len(), 30);
    assert_eq!(values(&b, 1).len(), 10);
}

#[test]
fn keyless_records_rotate_per_batch_and_keys_hash() {
    let b = broker(&[]);
    let settings = Settings {
        batch_bytes: 1 << 20,
        linger: Duration::from_secs(3600),
        max_in_flight: 8,
    };
    let mut p = IdempotentProducer::new(FakeLink(b.clone()), "t", Partitioner::new(3, 0), settings)
        .expect("a producer");
    let keyless = |v: &str| ProduceRecord {
        partition: None,
        timestamp_ms: None,
        key: None,
        value: v.as_bytes().to_vec(),
    };
    p.send(keyless("a")).expect("send");
    p.send(keyless("b")).expect("send");
    p.send(ProduceRecord {
        key: Some(b"user-42".to_vec()),
        ..keyless("k")
    })
    .expect("send");
    assert_eq!(p.flush().expect("flush"), vec![(0, 0), (0, 1), (0, 2)]);
    p.send(keyless("c")).expect("send");
    assert_eq!(p.flush().expect("flush"), vec![(1, 0)]);
    assert_eq!(values(&b, 0), vec!["a", "b", "k"]);
    assert_eq!(b.borrow().seen, vec![(0, 0, 3), (1, 0, 1)]);
}

#[test]
fn a_full_sequence_moves_to_the_next_epoch() {
    assert_eq!(sequence_after(5, 3), Some(8));
    assert_eq!(sequence_after(i32::MAX - 1, 1), Some(i32::MAX));
    assert_eq!(sequence_after(i32::MAX - 1, 2), None);
    let b = broker(&[]);
    let mut p = producer(&b, 1);
    p.send(record(0, "a")).expect("send");
    p.flush().expect("flush");
    p.next_sequence.insert(0, i32::MAX);
    p.send(record(0, "b")).expect("send");
    p.flush().expect("flush");
    assert_eq!(p.epoch, 1);
    assert_eq!(
        b.borrow().seen.last(),
        Some(&(0, 0, 1)),
        "sequence 0 in the new epoch"
    );
}
