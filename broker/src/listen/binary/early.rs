//! Early writes on a binary connection: a large ProduceBatch for a
//! partition this shard owns has its pages written while the rest of it
//! arrives (es-storage's `early.rs` says how and why that is safe), so that
//! receiving a megabyte and writing it overlap instead of adding up. Only
//! while the connection waits for more of the batch: one that is already
//! in the socket (a fast network, a pipelining producer) is read whole and
//! written in one go, which costs less than writing it in pieces.
//! Batches with a producer id go the usual way: the idempotence check must
//! see the whole batch before anything is placed.

use es_storage::{EarlyWrite, PartitionLog};

use crate::shard::Shard;

/// One large batch arriving on a connection, and its early write once the
/// batch header has shown it can have one.
pub struct EarlyFeed {
    /// The partition's log, until the batch header has arrived (with
    /// `--early-writes`).
    log: Option<PartitionLog>,
    len: usize,
    write: Option<EarlyWrite>,
    /// Where in its page the batch will start if nothing else is placed
    /// first (0 when the partition lives on another shard).
    in_page: usize,
}

impl EarlyFeed {
    /// A batch of `len` bytes for `partition` of `topic` starts arriving.
    /// `allowed`: the connection's key may write the topic (authorization
    /// runs before an early write starts).
    pub fn new(shard: &Shard, topic: &str, partition: u32, len: usize, allowed: bool) -> EarlyFeed {
        let local = shard.owner(topic, partition) == shard.id && !shard.is_shutting_down();
        let log = local
            .then(|| {
                shard
                    .partitions
                    .borrow()
                    .get(topic, partition)
                    .map(|o| o.log.clone())
            })
            .flatten();
        let in_page = log.as_ref().map_or(0, |l| l.next_in_page_offset(len));
        EarlyFeed {
            // Cluster mode: a replica's log is written by its Raft group only.
            log: log.filter(|_| shard.config.early_writes && allowed && !shard.config.cluster.enabled()),
            len,
            write: None,
            in_page,
        }
    }

    /// Where in its page the batch is expected to start: receive it there
    /// (es-storage's `ReceivingBatch`) and it is written as it lies.
    pub fn in_page_offset(&self) -> usize {
        self.in_page
    }

    /// The batch's first `batch.len()` bytes have arrived and the rest is
    /// not there yet: the connection is about to wait for it.
    pub fn arrived(&mut self, batch: &[u8]) {
        if self.log.is_some() && batch.len() >= es_protocol::batch::HEADER_BYTES {
            let log = self.log.take().expect("checked above");
            if es_protocol::batch::producer_of(batch).is_none() {
                self.write = log.begin_early(self.len);
            }
        }
        if let Some(w) = &mut self.write {
            w.arrived(batch);
        }
    }

    /// The early write, to keep until the batch is placed.
    pub fn into_write(self) -> Option<EarlyWrite> {
        self.write
    }
}
