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
//! 100 ms to 1 s, at most 30 times in a row, and resends every
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
mod fake_broker;
#[cfg(test)]
mod tests;
