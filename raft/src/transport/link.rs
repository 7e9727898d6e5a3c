//! `GroupNetwork` (openraft's `RaftNetworkFactory` for one group) and
//! `GroupLink` (its `RaftNetwork` to one target): the group id goes in
//! every frame, the connection is the shard's to that peer (openraft-multi's
//! `GroupRouter`/`GroupNetworkAdapter` shape, by hand for 0.9).
//!
//! Every transport failure and every Error frame (`unknown_group`,
//! `not_ready`) becomes `RPCError::Unreachable`: openraft backs off and
//! retries. An AppendEntries of several entries over
//! `--raft-append-bytes-max` is `PayloadTooLarge` with the number of
//! entries that fit: openraft sends those.

use std::future::Future;
use std::rc::Rc;

use futures::future::Either;

use openraft::error::{
    Fatal, NetworkError, PayloadTooLarge, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::storage::Snapshot;
use openraft::{EmptyNode, RaftNetwork, RaftNetworkFactory};

use crate::entry::{EsEntry, EsPayload};
use crate::limits::FRAME_BYTES_MAX;
use crate::snapshot_send::SnapshotSource;
use crate::transport::codec::{self, ErrorBody, Heartbeat};
use crate::transport::conn::Reply;
use crate::transport::error::TransportError;
use crate::transport::frame::{self, RaftKind};
use crate::transport::mux;
use crate::transport::network::ShardNetwork;
use crate::transport::peer::Peer;
use crate::types::{EsRaft, GroupId, NodeId, Vote};

type RpcResult<T> = Result<T, RPCError<NodeId, EmptyNode, RaftError<NodeId>>>;

/// openraft's network factory for one group on this shard.
pub struct GroupNetwork {
    group: GroupId,
    net: ShardNetwork,
    snapshots: Option<Rc<SnapshotSource>>,
}

impl GroupNetwork {
    pub(crate) fn new(
        group: GroupId,
        net: ShardNetwork,
        snapshots: Option<Rc<SnapshotSource>>,
    ) -> GroupNetwork {
        GroupNetwork {
            group,
            net,
            snapshots,
        }
    }
}

/// One group's link to one target node.
pub struct GroupLink {
    group: GroupId,
    target: NodeId,
    peer: Option<Rc<Peer>>,
    append_bytes_max: usize,
    snapshots: Option<Rc<SnapshotSource>>,
}

impl RaftNetworkFactory<EsRaft> for GroupNetwork {
    type Network = GroupLink;

    async fn new_client(&mut self, target: NodeId, _: &EmptyNode) -> GroupLink {
        GroupLink {
            group: self.group,
            target,
            peer: self.net.peer(target),
            append_bytes_max: self.net.append_bytes_max(),
            snapshots: self.snapshots.clone(),
        }
    }
}

fn unreachable(e: TransportError) -> Unreachable {
    Unreachable::new(&e)
}

fn remote(node: NodeId, ErrorBody { code, message }: ErrorBody) -> TransportError {
    TransportError::Remote { node, code, message }
}

/// Bytes an entry takes in an AppendEntries payload.
fn entry_bytes(e: &EsEntry) -> usize {
    17 + match &e.payload {
        EsPayload::Blank => 0,
        EsPayload::Membership(_) => 4 + 256,
        EsPayload::Command(c) => 4 + c.len(),
        EsPayload::Batches(bs) => 4 + bs.iter().map(|b| b.bytes().len()).sum::<usize>(),
    }
}

impl GroupLink {
    fn peer(&self) -> Result<&Rc<Peer>, TransportError> {
        self.peer.as_ref().ok_or(TransportError::UnknownPeer(self.target))
    }

    /// The group.
    pub(crate) fn group(&self) -> GroupId {
        self.group
    }

    /// The target node.
    pub(crate) fn target(&self) -> NodeId {
        self.target
    }

    /// Sends a frame of `kind` whose payload `encode` writes; the answer.
    pub(crate) async fn call(
        &self,
        kind: RaftKind,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), TransportError>,
    ) -> Result<Reply, TransportError> {
        let peer = self.peer()?;
        let mut out = frame::header(kind, 0, 0).to_vec();
        encode(&mut out)?;
        if out.len() > FRAME_BYTES_MAX {
            return Err(TransportError::TooLarge {
                group: self.group,
                bytes: out.len(),
            });
        }
        let payload_len = out.len() - es_protocol::frame::HEADER_BYTES;
        out[..es_protocol::frame::HEADER_BYTES].copy_from_slice(&frame::header(kind, 0, payload_len));
        let (k, payload) = peer.call(out).await?;
        if k == RaftKind::Error {
            return Err(remote(self.target, codec::decode_error(payload)?));
        }
        if k != kind.response() {
            return Err(TransportError::Malformed(format!("{k:?} answers {kind:?}")));
        }
        Ok((k, payload))
    }

    async fn append(
        &self,
        rpc: AppendEntriesRequest<EsRaft>,
    ) -> Result<Result<AppendEntriesResponse<NodeId>, PayloadTooLarge>, TransportError> {
        if rpc.entries.is_empty() {
            let hb = Heartbeat {
                group: self.group,
                vote: rpc.vote,
                prev_log_id: rpc.prev_log_id,
                leader_commit: rpc.leader_commit,
            };
            return mux::send(self.peer()?, hb).await.map(Ok);
        }
        if rpc.entries.len() > 1 {
            let mut total = 0;
            let fit = rpc
                .entries
                .iter()
                .take_while(|e| {
                    total += entry_bytes(e);
                    total <= self.append_bytes_max
                })
                .count();
            if fit < rpc.entries.len() {
                return Ok(Err(PayloadTooLarge::new_entries_hint(fit.max(1) as u64)));
            }
        }
        let (_, payload) = self
            .call(RaftKind::AppendEntries, |out| {
                codec::encode_append(out, self.group, &rpc)
            })
            .await?;
        Ok(Ok(codec::decode_append_response(payload)?))
    }
}

impl RaftNetwork<EsRaft> for GroupLink {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<EsRaft>,
        _: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.append(rpc).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(too_large)) => Err(RPCError::PayloadTooLarge(too_large)),
            Err(e) => Err(RPCError::Unreachable(unreachable(e))),
        }
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, _: RPCOption) -> RpcResult<VoteResponse<NodeId>> {
        let r = async {
            let (_, payload) = self
                .call(RaftKind::Vote, |out| {
                    codec::encode_vote(out, self.group, &rpc);
                    Ok(())
                })
                .await?;
            codec::decode_vote_response(payload)
        }
        .await;
        r.map_err(|e| RPCError::Unreachable(unreachable(e)))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<EsRaft>,
        cancel: impl Future<Output = ReplicationClosed> + 'static,
        _: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<EsRaft, Fatal<NodeId>>> {
        let Some(source) = self.snapshots.clone() else {
            // A group without a snapshot source (the controller's) never
            // purges below what its followers hold.
            return Err(StreamingError::Network(NetworkError::new(
                &TransportError::Unreachable {
                    node: self.target,
                    why: "this group sends no snapshots".into(),
                },
            )));
        };
        let send = source.send(self, vote, &snapshot);
        futures::pin_mut!(send);
        futures::pin_mut!(cancel);
        match futures::future::select(send, cancel).await {
            Either::Left((Ok(vote), _)) => Ok(SnapshotResponse { vote }),
            Either::Left((Err(e), _)) => {
                tracing::info!(group = self.group, peer = self.target, error = %e, "a snapshot transfer failed; openraft retries");
                Err(StreamingError::Unreachable(unreachable(e)))
            }
            Either::Right((closed, _)) => Err(StreamingError::Closed(closed)),
        }
    }
}
