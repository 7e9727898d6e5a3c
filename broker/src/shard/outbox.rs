//! The sending side of one shard's channel mesh: a message for another
//! shard goes now when its channel has room and nothing queued for that
//! shard waits ahead of it; else it queues, and one task per target shard
//! sends the queue in order. Lives on its shard.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use crate::shard::mesh::Senders;
use crate::shard::message::Envelope;
use crate::shard::placement::ShardId;

pub struct Outbox {
    senders: Option<Senders<Envelope>>,
    /// Per target shard, operations that must run to completion and found
    /// its channel full: sent in order by one task (`send_in_order`), and
    /// every later one queues behind them, so that a producer's pipelined
    /// batches reach their partition in the order they were called.
    overflow: RefCell<Vec<VecDeque<Envelope>>>,
    /// Per target shard, whether a `send_in_order` task runs for it.
    draining: Vec<Cell<bool>>,
}

impl Outbox {
    pub fn new(shards: usize, senders: Option<Senders<Envelope>>) -> Rc<Outbox> {
        Rc::new(Outbox {
            senders,
            overflow: RefCell::new((0..shards).map(|_| VecDeque::new()).collect()),
            draining: (0..shards).map(|_| Cell::new(false)).collect(),
        })
    }

    /// Sends `env` to shard `target` now if its channel has room and no
    /// earlier operation waits to go there; else queues it for
    /// `send_in_order`, a task of its own that a dropped caller does not
    /// cut. Unsent (the target is gone), the envelope's reply is dropped
    /// with it: the caller hears `unavailable`.
    pub fn send_whole(self: &Rc<Self>, target: ShardId, env: Envelope) {
        if self.draining[target].get() {
            self.overflow.borrow_mut()[target].push_back(env);
            return;
        }
        if let Err(Some(env)) = self.senders().try_send_to(target, env) {
            self.overflow.borrow_mut()[target].push_back(env);
            self.draining[target].set(true);
            glommio::spawn_local(self.clone().send_in_order(target)).detach();
        }
    }

    /// Sends `env` to shard `target`, waiting while its channel is full.
    /// `Err` when `target` is gone.
    pub async fn send_to(&self, target: ShardId, env: Envelope) -> Result<(), ()> {
        self.senders().send_to(target, env).await
    }

    /// Sends the operations queued for `target` one after the other, in
    /// order, until none is left.
    async fn send_in_order(self: Rc<Self>, target: ShardId) {
        loop {
            let next = self.overflow.borrow_mut()[target].pop_front();
            let Some(env) = next else {
                self.draining[target].set(false);
                return;
            };
            let _ = self.senders().send_to(target, env).await;
        }
    }

    fn senders(&self) -> &Senders<Envelope> {
        self.senders.as_ref().expect("more than one shard has a mesh")
    }
}
