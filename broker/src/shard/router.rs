//! The router: `call` runs an operation on the shard that owns it, here or
//! forwarded over the channel mesh with the reply coming back the same
//! way (a shard cannot send to itself on the mesh); `serve_mesh` runs
//! what other shards forward here. It owns no state: what a shard owns is
//! `Shard` (local.rs), and the queues of the mesh are its `Outbox`. Either
//! way an operation that changes state, once called, runs to its end
//! whatever becomes of the caller; every operation runs inside
//! `ops::handle`, which contains its panics.

use std::future::Future;
use std::rc::Rc;

use futures::channel::oneshot;

use crate::error::ApiError;
use crate::shard::local::Shard;
use crate::shard::message::{Envelope, Op, Reply};
use crate::shard::placement::ShardId;

impl Shard {
    /// Runs `op` on shard `target`: here, or forwarded over the mesh.
    ///
    /// An operation that changes state (`runs_to_completion`) runs to its
    /// end whatever becomes of the caller: hyper drops a handler's future
    /// when its client disconnects, and an operation cut between two of its
    /// steps (a topic's `meta.json` written, its catalog entry not) would
    /// leave the broker inconsistent. Here it runs in a detached task whose
    /// reply the caller awaits; forwarded, the owning shard runs it in a
    /// detached task of its own (`serve_mesh`) once the envelope is sent,
    /// and the send is made from a detached task too when the channel is
    /// full. Reads run in the caller's future: dropping one cuts nothing.
    pub fn call(self: &Rc<Self>, target: ShardId, op: Op) -> impl Future<Output = Reply> + 'static {
        let shard = self.clone();
        let pending = if !runs_to_completion(&op) {
            Pending::Inline(op)
        } else if target == self.id {
            let (tx, rx) = oneshot::channel();
            let here = self.clone();
            glommio::spawn_local(async move {
                let _ = tx.send(crate::ops::handle(here, op).await);
            })
            .detach();
            Pending::Reply(rx)
        } else {
            let (tx, rx) = oneshot::channel();
            self.outbox.send_whole(target, Envelope { op, reply: tx });
            Pending::Reply(rx)
        };
        async move {
            match pending {
                Pending::Inline(op) => shard.route(target, op).await,
                Pending::Reply(rx) => rx.await.unwrap_or_else(|_| dropped(target)),
            }
        }
    }

    /// Runs `op` on `target` in the caller's future: here, or forwarded.
    async fn route(self: &Rc<Self>, target: ShardId, op: Op) -> Reply {
        if target == self.id {
            // Boxed: the operation's state is not part of every call future.
            return Box::pin(crate::ops::handle(self.clone(), op)).await;
        }
        let (tx, rx) = oneshot::channel();
        if self
            .outbox
            .send_to(target, Envelope { op, reply: tx })
            .await
            .is_err()
        {
            return Reply::Done(Err(ApiError::unavailable(format!(
                "shard {target} is not reachable"
            ))));
        }
        rx.await.unwrap_or_else(|_| dropped(target))
    }
}

/// What `Shard::call` has left to do when its future is polled.
enum Pending {
    /// A read, run in the caller's future.
    Inline(Op),
    /// An operation already under way in a detached task, here or on its
    /// shard: its reply.
    Reply(oneshot::Receiver<Reply>),
}

/// The reply to an operation whose reply never came: its shard stopped
/// (shutdown) or it could not be sent there.
fn dropped(target: ShardId) -> Reply {
    Reply::Done(Err(ApiError::unavailable(format!(
        "shard {target} did not answer (stopping, or not reachable)"
    ))))
}

/// Whether `op` changes state, and so must run to its end once started
/// whatever becomes of its caller (`Shard::call`). Reads (a fetch, a
/// describe, a scrape) may be dropped midway.
fn runs_to_completion(op: &Op) -> bool {
    use crate::groups::coordinator::GroupOp;
    match op {
        Op::Fetch(_)
        | Op::Describe { .. }
        | Op::Series
        | Op::ListGroups
        | Op::OffsetForTime { .. }
        | Op::MaxTimestamp { .. }
        | Op::ReadBarrier
        | Op::CheckProducer { .. }
        | Op::Leader { .. }
        | Op::Cluster
        | Op::LeaderViews { .. }
        | Op::PartitionCounts => false,
        Op::Group { op, .. } => !matches!(op, GroupOp::Commits | GroupOp::Describe),
        Op::Registry { op, .. } => op.is_write(),
        Op::Classic { op, .. } => !matches!(op, crate::groups::classic::ClassicOp::Describe),
        Op::Produce { .. }
        | Op::GroupOffsets(_)
        | Op::AdoptOffsets { .. }
        | Op::Open { .. }
        | Op::OpenReplica { .. }
        | Op::Remove { .. }
        | Op::Configure { .. }
        | Op::CreateTopic(_)
        | Op::DeleteTopic(_)
        | Op::PatchTopic { .. }
        | Op::InitProducer(..)
        | Op::Producers(_)
        | Op::Keys(_)
        | Op::AdoptConnection { .. }
        | Op::AdoptRaft { .. } => true,
    }
}

/// Serves operations other shards forward to this one, each in its own
/// detached task so a slow one (a long-poll fetch) never holds up the rest,
/// and each runs to its end whether or not its caller still waits
/// (`ops::handle` turns a panic into an `internal` reply).
pub fn serve_mesh(
    shard: Rc<Shard>,
    receivers: Vec<(
        ShardId,
        glommio::channels::shared_channel::ConnectedReceiver<Envelope>,
    )>,
) {
    for (_peer, rx) in receivers {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(env) = rx.recv().await {
                let shard = shard.clone();
                glommio::spawn_local(async move {
                    let reply = crate::ops::handle(shard, env.op).await;
                    let _ = env.reply.send(reply);
                })
                .detach();
            }
        })
        .detach();
    }
}
