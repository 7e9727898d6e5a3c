//! The idempotent producer behind `es produce` (docs/groups.md,
//! "Idempotent producers"): records are batched per partition (the
//! partition is chosen here, see `partitioner`), every batch carries the
//! producer id, epoch and its sequence (the number of records this
//! producer already sent to that partition), and every batch stays queued
//! until it is acknowledged.
//!
//! On a transient failure (the connection is lost, or the broker answers
//! `unavailable`) the answers still due on the old connection are
//! collected, then the producer reconnects, with a backoff doubling from
//! 100 ms to 5 s, at most 10 times in a row, and resends every
//! unacknowledged batch, in the order first sent, with its ORIGINAL
//! sequence: a batch the broker already wrote is answered with its original
//! offsets and not written again, the others are appended in order. At
//! most 5 batches per partition are unacknowledged at once (the broker
//! remembers each producer's last 5 batches per partition), so every retry
//! is recognised.
//!
//! A producer id the broker no longer knows (`unknown_producer_id`: it
//! expired, `--producer-id-expiry-ms`, after writing nothing for that long)
//! is replaced once: when every unacknowledged batch was refused the first
//! time it was sent (so none of them can have been written), the producer
//! gets a new id and sends them again under it from sequence 0. If one of
//! them was sent before (its answer lost with a connection), it may have
//! been written, and sending it under another id could write it twice: the
//! error is returned instead.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use es_protocol::client::ClientError;
use es_protocol::requests::produce::{IdempotentProduce, Produce, ProduceRecord};
use es_protocol::Request;

use crate::error::is_transient;
use crate::limits::{
    PARTITION_BATCHES_INFLIGHT_MAX, RECONNECT_ATTEMPTS_MAX, RECONNECT_BACKOFF_FIRST_MS,
    RECONNECT_BACKOFF_MAX_MS,
};
use crate::link::{Answer, Link};
use crate::partitioner::Partitioner;

const BACKOFF_FIRST: Duration = Duration::from_millis(RECONNECT_BACKOFF_FIRST_MS);
const BACKOFF_MAX: Duration = Duration::from_millis(RECONNECT_BACKOFF_MAX_MS);
/// Bytes counted per record besides its key and value (as the plain producer does).
const RECORD_COST_BYTES: usize = 20;

/// How long to wait before reconnect attempt `attempt` (1, 2, ...).
pub fn backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    BACKOFF_FIRST.saturating_mul(1 << doublings).min(BACKOFF_MAX)
}

/// The sequence after a batch of `count` records at `sequence`, if it
/// still fits in the protocol's non-negative i32.
fn sequence_after(sequence: i32, count: usize) -> Option<i32> {
    i32::try_from(count).ok().and_then(|c| sequence.checked_add(c))
}

/// Settings of an [`IdempotentProducer`].
pub struct Settings {
    /// Send a partition's batch once this much is buffered for it.
    pub batch_bytes: usize,
    /// Send a batch once its first record waited this long.
    pub linger: Duration,
    /// Unacknowledged batches, all partitions together.
    pub max_in_flight: usize,
}

/// Records buffered for one partition.
#[derive(Default)]
struct Buffer {
    records: Vec<ProduceRecord>,
    /// Each record's place among the records sent since the last flush.
    indices: Vec<usize>,
    bytes: usize,
    first_at: Option<Instant>,
}

/// A batch sent and not yet acknowledged.
struct Batch<P> {
    partition: u32,
    indices: Vec<usize>,
    /// Kept as sent: a resend is the same request, same sequence.
    request: Request,
    /// The answer due on the current connection; `None` when the send
    /// failed or the answer was already taken.
    pending: Option<P>,
    /// Sent again after a lost connection: it may have been written.
    resent: bool,
}

pub struct IdempotentProducer<L: Link> {
    link: L,
    topic: String,
    producer_id: i64,
    epoch: i16,
    partitioner: Partitioner,
    settings: Settings,
    buffers: BTreeMap<u32, Buffer>,
    /// The oldest `first_at` of the buffers.
    oldest: Option<Instant>,
    next_sequence: HashMap<u32, i32>,
    /// In the order first sent.
    unacked: VecDeque<Batch<L::Pending>>,
    /// (partition, offset) of every record sent since the last flush, once acknowledged.
    acks: Vec<Option<(u32, u64)>>,
    /// Reconnect attempts since the last acknowledgement.
    attempts: u32,
    /// Whether the producer id was replaced since the last acknowledgement.
    renewed: bool,
}

impl<L: Link> IdempotentProducer<L> {
    /// Gets a producer id (InitProducer) and starts at sequence 0 everywhere.
    pub fn new(
        mut link: L,
        topic: &str,
        partitioner: Partitioner,
        settings: Settings,
    ) -> Result<IdempotentProducer<L>, ClientError> {
        let (producer_id, epoch) = link.init_producer(None)?;
        Ok(IdempotentProducer {
            link,
            topic: topic.to_string(),
            producer_id,
            epoch,
            partitioner,
            settings: Settings {
                batch_bytes: settings.batch_bytes.max(1),
                max_in_flight: settings.max_in_flight.max(1),
                ..settings
            },
            buffers: BTreeMap::new(),
            oldest: None,
            next_sequence: HashMap::new(),
            unacked: VecDeque::new(),
            acks: Vec::new(),
            attempts: 0,
            renewed: false,
        })
    }

    /// Buffers a record for its partition, sending that partition's batch
    /// when full and any batch that lingered too long.
    pub fn send(&mut self, mut record: ProduceRecord) -> Result<(), ClientError> {
        let partition = self
            .partitioner
            .partition(record.partition, record.key.as_deref());
        record.partition = Some(partition);
        let bytes = record.value.len() + record.key.as_ref().map_or(0, Vec::len) + RECORD_COST_BYTES;
        let index = self.acks.len();
        self.acks.push(None);
        let now = Instant::now();
        let buffer = self.buffers.entry(partition).or_default();
        if buffer.first_at.is_none() {
            buffer.first_at = Some(now);
            self.oldest = Some(self.oldest.map_or(now, |o| o.min(now)));
        }
        buffer.records.push(record);
        buffer.indices.push(index);
        buffer.bytes += bytes;
        if buffer.bytes >= self.settings.batch_bytes {
            self.send_batch(partition)?;
        }
        if self
            .oldest
            .is_some_and(|o| now.duration_since(o) >= self.settings.linger)
        {
            let due: Vec<u32> = self
                .buffers
                .iter()
                .filter(|(_, b)| {
                    b.first_at
                        .is_some_and(|t| now.duration_since(t) >= self.settings.linger)
                })
                .map(|(p, _)| *p)
                .collect();
            for p in due {
                self.send_batch(p)?;
            }
        }
        Ok(())
    }

    /// Sends every buffer and waits until every batch is acknowledged;
    /// returns the (partition, offset) of every record sent since the last
    /// flush, in the order they were sent.
    pub fn flush(&mut self) -> Result<Vec<(u32, u64)>, ClientError> {
        let partitions: Vec<u32> = self.buffers.keys().copied().collect();
        for p in partitions {
            self.send_batch(p)?;
        }
        while !self.unacked.is_empty() {
            self.collect_front()?;
        }
        std::mem::take(&mut self.acks)
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ClientError::Protocol("a record was never acknowledged".into()))
    }

    fn send_batch(&mut self, partition: u32) -> Result<(), ClientError> {
        let Some(buffer) = self.buffers.remove(&partition) else {
            return Ok(());
        };
        self.oldest = self.buffers.values().filter_map(|b| b.first_at).min();
        if buffer.records.is_empty() {
            return Ok(());
        }
        self.partitioner.batch_sent(partition);
        while self.unacked.len() >= self.settings.max_in_flight
            || self.unacked.iter().filter(|b| b.partition == partition).count()
                >= PARTITION_BATCHES_INFLIGHT_MAX
        {
            self.collect_front()?;
        }
        let sequence = self.sequence_for(partition, buffer.records.len())?;
        let request = Request::IdempotentProduce(IdempotentProduce {
            producer_id: self.producer_id,
            epoch: self.epoch,
            sequence,
            produce: Produce {
                topic: self.topic.clone(),
                records: buffer.records,
            },
        });
        let pending = match self.link.send(&request) {
            Ok(p) => Some(p),
            // Resent with the others once the connection is back.
            Err(e) if is_transient(&e) => None,
            Err(e) => return Err(e),
        };
        self.unacked.push_back(Batch {
            partition,
            indices: buffer.indices,
            request,
            pending,
            resent: false,
        });
        Ok(())
    }

    /// The sequence of the next batch of `count` records to `partition`.
    /// Once a partition's sequence would pass i32::MAX, every batch is
    /// awaited and the producer moves to its next epoch, which starts every
    /// partition at 0 again.
    fn sequence_for(&mut self, partition: u32, count: usize) -> Result<i32, ClientError> {
        let current = self.next_sequence.get(&partition).copied().unwrap_or(0);
        if let Some(next) = sequence_after(current, count) {
            self.next_sequence.insert(partition, next);
            return Ok(current);
        }
        while !self.unacked.is_empty() {
            self.collect_front()?;
        }
        let (id, epoch) = self.link.init_producer(Some(self.producer_id))?;
        self.producer_id = id;
        self.epoch = epoch;
        self.next_sequence.clear();
        let next = sequence_after(0, count)
            .ok_or_else(|| ClientError::Protocol(format!("a batch of {count} records")))?;
        self.next_sequence.insert(partition, next);
        Ok(0)
    }

    /// Waits for the oldest batch's answer; recovers from a transient
    /// failure (then the oldest batch has been resent and is waited for
    /// again).
    fn collect_front(&mut self) -> Result<(), ClientError> {
        loop {
            let Some(front) = self.unacked.front_mut() else {
                return Ok(());
            };
            let answer = match front.pending.take() {
                Some(p) => p.offsets(),
                None => Err(ClientError::Closed),
            };
            match answer {
                Ok(offsets) => {
                    if let Some(batch) = self.unacked.pop_front() {
                        self.acknowledge(&batch, offsets)?;
                    }
                    self.attempts = 0;
                    self.renewed = false;
                    return Ok(());
                }
                Err(e) if is_transient(&e) => self.recover(e)?,
                Err(e) if e.code() == Some("unknown_producer_id") => self.renew(e)?,
                Err(e) => return Err(e),
            }
        }
    }

    fn acknowledge(
        &mut self,
        batch: &Batch<L::Pending>,
        offsets: Vec<(u32, u64)>,
    ) -> Result<(), ClientError> {
        if offsets.len() != batch.indices.len() || offsets.iter().any(|(p, _)| *p != batch.partition) {
            return Err(ClientError::Protocol(format!(
                "the broker acknowledged a batch of {} records for partition {} with {offsets:?}",
                batch.indices.len(),
                batch.partition
            )));
        }
        for (&i, ack) in batch.indices.iter().zip(offsets) {
            if let Some(slot) = self.acks.get_mut(i) {
                *slot = Some(ack);
            }
        }
        Ok(())
    }

    /// After `error`: takes the answers still due, reconnects with backoff
    /// and resends every unacknowledged batch in order.
    fn recover(&mut self, error: ClientError) -> Result<(), ClientError> {
        let mut last = error;
        loop {
            self.take_due_answers()?;
            if self.unacked.is_empty() {
                return Ok(());
            }
            self.attempts += 1;
            if self.attempts > RECONNECT_ATTEMPTS_MAX {
                return Err(last);
            }
            self.link.follow(&last);
            self.link.pause(backoff(self.attempts));
            if let Err(e) = self.link.reconnect() {
                if is_transient(&e) {
                    last = e;
                    continue;
                }
                return Err(e);
            }
            match self.resend() {
                Ok(()) => return Ok(()),
                Err(e) if is_transient(&e) => last = e,
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits for every answer still due (on a lost connection they come
    /// back at once as errors): an acknowledged batch is done, any other is
    /// kept for the resend (a batch after a lost one gets
    /// `out_of_order_sequence`, for example).
    fn take_due_answers(&mut self) -> Result<(), ClientError> {
        let batches = std::mem::take(&mut self.unacked);
        for mut batch in batches {
            if let Some(Ok(offsets)) = batch.pending.take().map(Answer::offsets) {
                self.acknowledge(&batch, offsets)?;
            } else {
                self.unacked.push_back(batch);
            }
        }
        Ok(())
    }

    fn resend(&mut self) -> Result<(), ClientError> {
        for batch in self.unacked.iter_mut() {
            batch.resent = true;
            batch.pending = Some(self.link.send(&batch.request)?);
        }
        Ok(())
    }

    /// After `error` (`unknown_producer_id`): takes the answers still due;
    /// if no batch left unacknowledged can have been written (each was
    /// refused on its first send), gets a new producer id and sends them
    /// again under it, in order, from sequence 0 on each partition.
    /// Otherwise, or if the id was replaced already since the last
    /// acknowledgement, returns `error`.
    fn renew(&mut self, error: ClientError) -> Result<(), ClientError> {
        self.take_due_answers()?;
        if self.unacked.is_empty() {
            return Ok(());
        }
        if self.renewed || self.unacked.iter().any(|b| b.resent) {
            return Err(error);
        }
        let (producer_id, epoch) = self.link.init_producer(None)?;
        self.producer_id = producer_id;
        self.epoch = epoch;
        self.next_sequence.clear();
        self.renewed = true;
        let batches = std::mem::take(&mut self.unacked);
        for mut batch in batches {
            let sequence = self.sequence_for(batch.partition, batch.indices.len())?;
            if let Request::IdempotentProduce(ip) = &mut batch.request {
                ip.producer_id = producer_id;
                ip.epoch = epoch;
                ip.sequence = sequence;
            }
            batch.pending = match self.link.send(&batch.request) {
                Ok(p) => Some(p),
                // Resent with the others once the connection is back.
                Err(e) if is_transient(&e) => None,
                Err(e) => return Err(e),
            };
            self.unacked.push_back(batch);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// What the fake broker does with the next request.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Fault {
        /// Written; the connection drops before the answer arrives.
        AnswerLost,
        /// The connection drops before the broker reads the request.
        Lost,
        /// Answered `unavailable`, nothing written; the connection stays.
        Unavailable,
        /// Answered `producer_fenced`.
        Fenced,
    }

    /// The producer id the fake broker hands out first.
    const FIRST_ID: i64 = 7;

    /// A partition's producer window: its epoch, and (sequence, count, base offset) of the last batches.
    type Window = (i16, VecDeque<(i32, usize, u64)>);

    /// A broker with the real idempotence rules (a window of 5 batches per
    /// partition), a script of faults by request number, and a record of
    /// every request it saw.
    #[derive(Default)]
    struct Broker {
        connected: bool,
        faults: HashMap<usize, Fault>,
        /// Reconnects that fail (connection refused) before one succeeds.
        refuse_reconnects: u32,
        epoch: i16,
        /// Per partition: the values; per producer id and partition, the
        /// window (sequence, count, base offset).
        logs: BTreeMap<u32, Vec<Vec<u8>>>,
        windows: BTreeMap<(i64, u32), Window>,
        /// Every request: (partition, sequence, record count), in order.
        seen: Vec<(u32, i32, usize)>,
        pauses: Vec<Duration>,
        reconnects: u32,
        /// Unanswered requests per partition now, and the most ever.
        outstanding: BTreeMap<u32, usize>,
        most_outstanding: usize,
        /// From this request number on, the first id is unknown (expired).
        expire_from: Option<usize>,
        /// New ids handed out (InitProducer without an id).
        issued: i64,
        /// The producer id of every request, in order.
        seen_ids: Vec<i64>,
    }

    impl Broker {
        fn produce(&mut self, ip: &IdempotentProduce) -> Result<Vec<(u32, u64)>, ClientError> {
            if ip.epoch < self.epoch {
                return Err(broker_error("producer_fenced"));
            }
            let p = ip.produce.records[0].partition.expect("a partition");
            assert!(
                ip.produce.records.iter().all(|r| r.partition == Some(p)),
                "one partition per request"
            );
            let n = ip.produce.records.len();
            let (window_epoch, window) = self.windows.entry((ip.producer_id, p)).or_default();
            if ip.epoch > *window_epoch {
                *window_epoch = ip.epoch;
                window.clear();
            }
            let log = self.logs.entry(p).or_default();
            if let Some(&(_, count, base)) = window.iter().find(|w| w.0 == ip.sequence) {
                assert_eq!(count, n, "a retry has the original records");
                return Ok((0..n as u64).map(|k| (p, base + k)).collect());
            }
            let expected = window.back().map_or(0, |w| w.0 + w.1 as i32);
            if ip.sequence != expected {
                return Err(broker_error("out_of_order_sequence"));
            }
            let base = log.len() as u64;
            log.extend(ip.produce.records.iter().map(|r| r.value.clone()));
            window.push_back((ip.sequence, n, base));
            if window.len() > PARTITION_BATCHES_INFLIGHT_MAX {
                window.pop_front();
            }
            Ok((0..n as u64).map(|k| (p, base + k)).collect())
        }
    }

    fn broker_error(code: &str) -> ClientError {
        ClientError::Broker {
            code: code.into(),
            message: code.into(),
            details: None,
        }
    }

    struct FakeLink(Rc<RefCell<Broker>>);

    struct FakeAnswer {
        broker: Rc<RefCell<Broker>>,
        partition: u32,
        answer: Result<Vec<(u32, u64)>, ClientError>,
    }

    impl Answer for FakeAnswer {
        fn offsets(self) -> Result<Vec<(u32, u64)>, ClientError> {
            if let Some(n) = self.broker.borrow_mut().outstanding.get_mut(&self.partition) {
                *n -= 1;
            }
            self.answer
        }
    }

    impl Link for FakeLink {
        type Pending = FakeAnswer;

        fn send(&mut self, request: &Request) -> Result<FakeAnswer, ClientError> {
            let Request::IdempotentProduce(ip) = request else {
                panic!("not an idempotent produce: {request:?}");
            };
            let mut b = self.0.borrow_mut();
            if !b.connected {
                return Err(ClientError::Closed);
            }
            let partition = ip.produce.records[0].partition.expect("a partition");
            let number = b.seen.len();
            b.seen.push((partition, ip.sequence, ip.produce.records.len()));
            b.seen_ids.push(ip.producer_id);
            let expired = ip.producer_id == FIRST_ID && b.expire_from.is_some_and(|n| number >= n);
            let answer = match b.faults.get(&number).copied() {
                None if expired => Err(broker_error("unknown_producer_id")),
                None => b.produce(ip),
                Some(Fault::AnswerLost) => {
                    let _ = b.produce(ip);
                    b.connected = false;
                    Err(ClientError::Protocol(
                        "connection lost: closed by the broker".into(),
                    ))
                }
                Some(Fault::Lost) => {
                    b.connected = false;
                    Err(ClientError::Protocol(
                        "connection lost: closed by the broker".into(),
                    ))
                }
                Some(Fault::Unavailable) => Err(broker_error("unavailable")),
                Some(Fault::Fenced) => Err(broker_error("producer_fenced")),
            };
            let n = b.outstanding.entry(partition).or_default();
            *n += 1;
            let n = *n;
            b.most_outstanding = b.most_outstanding.max(n);
            drop(b);
            Ok(FakeAnswer {
                broker: self.0.clone(),
                partition,
                answer,
            })
        }

        fn reconnect(&mut self) -> Result<(), ClientError> {
            let mut b = self.0.borrow_mut();
            b.reconnects += 1;
            if b.refuse_reconnects > 0 {
                b.refuse_reconnects -= 1;
                return Err(ClientError::Io(std::io::ErrorKind::ConnectionRefused.into()));
            }
            b.connected = true;
            Ok(())
        }

        fn pause(&mut self, d: Duration) {
            self.0.borrow_mut().pauses.push(d);
        }

        fn init_producer(&mut self, existing: Option<i64>) -> Result<(i64, i16), ClientError> {
            let mut b = self.0.borrow_mut();
            match existing {
                Some(id) => {
                    b.epoch += 1;
                    Ok((id, b.epoch))
                }
                None => {
                    b.issued += 1;
                    Ok((FIRST_ID + b.issued - 1, 0))
                }
            }
        }
    }

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
    fn backoff_doubles_from_100ms_to_5s() {
        let waits: Vec<u64> = (1..=RECONNECT_ATTEMPTS_MAX)
            .map(|a| backoff(a).as_millis() as u64)
            .collect();
        assert_eq!(
            waits,
            vec![100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]
        );
        assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
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
}
