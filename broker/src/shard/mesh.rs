//! The channel mesh between shards: one bounded channel for every ordered
//! pair of shards, made on the main thread before any shard runs.
//!
//! Not glommio's `MeshBuilder`, for two reasons. It is `Send` while it
//! holds an `Rc` that every shard clones and drops at once (a data race on
//! the count). And its join waits on `shared_channel` connections, whose
//! `connect` records the peer's id without waking the peer's executor: an
//! executor that parked just before its peer connected sleeps until
//! something else wakes it, and at start-up nothing else may (a hang in
//! the join, seen about once in a hundred starts with 8 shards on 2 cores).
//! Here each channel's two ends are moved, never cloned, to the two shards
//! that use them, and a shard keeps a timer ticking while it connects so a
//! missed wake-up costs one tick, not the start.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::shared_channel::{
    self, ConnectedReceiver, ConnectedSender, SharedReceiver, SharedSender,
};

use crate::limits::CONNECT_TICK_MS;
use crate::shard::placement::ShardId;

/// One shard's unconnected ends: a sender to every other shard and a
/// receiver from every other shard. `Send`: it moves to the shard's thread
/// once, whole.
pub struct MeshEnds<T: Send + 'static> {
    id: ShardId,
    senders: Vec<(ShardId, SharedSender<T>)>,
    receivers: Vec<(ShardId, SharedReceiver<T>)>,
}

/// Every shard's ends, indexed by shard id: `shards * (shards - 1)`
/// channels of `depth` messages each. Made on one thread; nothing in it is
/// shared between ends.
pub fn build<T: Send + 'static>(shards: usize, depth: usize) -> Vec<MeshEnds<T>> {
    let mut ends: Vec<MeshEnds<T>> = (0..shards)
        .map(|id| MeshEnds {
            id,
            senders: Vec::with_capacity(shards.saturating_sub(1)),
            receivers: Vec::with_capacity(shards.saturating_sub(1)),
        })
        .collect();
    for from in 0..shards {
        for to in (0..shards).filter(|&to| to != from) {
            let (tx, rx) = shared_channel::new_bounded(depth);
            ends[from].senders.push((to, tx));
            ends[to].receivers.push((from, rx));
        }
    }
    ends
}

/// This shard's connected senders, one per other shard.
pub struct Senders<T: Send + 'static> {
    id: ShardId,
    to: Vec<Option<ConnectedSender<T>>>,
}

impl<T: Send + 'static> Senders<T> {
    /// This shard's id.
    pub fn peer_id(&self) -> ShardId {
        self.id
    }

    /// Sends `msg` to shard `target`, waiting while its channel is full.
    /// `Err` when `target` is this shard, out of range, or gone.
    pub async fn send_to(&self, target: ShardId, msg: T) -> Result<(), ()> {
        match self.to.get(target).and_then(Option::as_ref) {
            Some(sender) => sender.send(msg).await.map_err(drop),
            None => Err(()),
        }
    }
}

impl<T: Send + 'static> Senders<T> {
    /// Sends `msg` to shard `target` if its channel has room now:
    /// `Err(Some(msg))` when the channel is full, `Err(None)` (the message
    /// dropped) when `target` is this shard, out of range, or gone.
    pub fn try_send_to(&self, target: ShardId, msg: T) -> Result<(), Option<T>> {
        let Some(sender) = self.to.get(target).and_then(Option::as_ref) else {
            return Err(None);
        };
        match sender.try_send(msg) {
            Ok(()) => Ok(()),
            Err(glommio::GlommioError::WouldBlock(glommio::ResourceType::Channel(msg))) => Err(Some(msg)),
            Err(_) => Err(None),
        }
    }
}

impl<T: Send + 'static> MeshEnds<T> {
    /// The shard these ends belong to.
    #[cfg(test)]
    pub fn id(&self) -> ShardId {
        self.id
    }

    /// Connects every end (on the shard's own executor), returning the
    /// senders and, per other shard, the receiver of what it sends here.
    /// All ends connect at once: each waits for its peer end, which the
    /// peer shard connects at the same time.
    pub async fn connect(self) -> (Senders<T>, Vec<(ShardId, ConnectedReceiver<T>)>) {
        let connecting = Rc::new(Cell::new(true));
        let ticking = connecting.clone();
        glommio::spawn_local(async move {
            while ticking.get() {
                glommio::timer::sleep(Duration::from_millis(CONNECT_TICK_MS)).await;
            }
        })
        .detach();
        let shards = self.senders.len() + 1;
        let senders = futures::future::join_all(
            self.senders
                .into_iter()
                .map(|(to, tx)| async move { (to, tx.connect().await) }),
        );
        let receivers = futures::future::join_all(
            self.receivers
                .into_iter()
                .map(|(from, rx)| async move { (from, rx.connect().await) }),
        );
        let (senders, receivers) = futures::future::join(senders, receivers).await;
        connecting.set(false);
        let mut to: Vec<Option<ConnectedSender<T>>> = (0..shards).map(|_| None).collect();
        for (target, sender) in senders {
            to[target] = Some(sender);
        }
        (Senders { id: self.id, to }, receivers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ordered_pair_has_one_channel() {
        let ends = build::<u32>(4, 8);
        assert_eq!(ends.len(), 4);
        for (id, end) in ends.iter().enumerate() {
            assert_eq!(end.id(), id);
            let to: Vec<ShardId> = end.senders.iter().map(|(t, _)| *t).collect();
            let from: Vec<ShardId> = end.receivers.iter().map(|(f, _)| *f).collect();
            let others: Vec<ShardId> = (0..4).filter(|&o| o != id).collect();
            assert_eq!(to, others, "shard {id} sends to every other shard once");
            let mut from_sorted = from.clone();
            from_sorted.sort_unstable();
            assert_eq!(
                from_sorted, others,
                "shard {id} receives from every other shard once"
            );
        }
        assert!(build::<u32>(1, 8)[0].senders.is_empty());
    }

    /// Three executors on their own threads connect their ends and pass a
    /// message around the ring, each through the channel of its pair.
    #[test]
    fn ends_connect_across_executors_and_carry_messages() {
        let shards = 3;
        let ends = std::sync::Arc::new(std::sync::Mutex::new(
            // blocking-ok: a test
            build::<(ShardId, u64)>(shards, 4)
                .into_iter()
                .map(Some)
                .collect::<Vec<_>>(),
        ));
        let handles = glommio::LocalExecutorPoolBuilder::new(glommio::PoolPlacement::Unbound(shards))
            .on_all_shards(move || {
                let mine = ends
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter_mut()
                    .find_map(Option::take)
                    .expect("one end each");
                async move {
                    let id = mine.id();
                    let (senders, receivers) = mine.connect().await;
                    assert_eq!(senders.peer_id(), id);
                    assert!(
                        senders.send_to(id, (id, 0)).await.is_err(),
                        "no channel to itself"
                    );
                    let next = (id + 1) % shards;
                    senders.send_to(next, (id, 7)).await.expect("send");
                    let prev = (id + shards - 1) % shards;
                    let (_, rx) = receivers
                        .iter()
                        .find(|(from, _)| *from == prev)
                        .expect("a receiver from prev");
                    let got = rx.recv().await.expect("a message");
                    assert_eq!(got, (prev, 7));
                    id
                }
            })
            .expect("executors start");
        let mut ids: Vec<ShardId> = handles
            .join_all()
            .into_iter()
            .map(|r| r.expect("an executor ended"))
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 1, 2]);
    }
}
