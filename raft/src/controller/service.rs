//! The controller's side of its control frames: what a node answers when
//! a peer forwards it a command (0x48 ControllerPropose) or asks for the
//! committed index (0x49 ControllerReadIndex). Only the leader takes
//! either; any other node answers who it thinks leads, and the asker
//! tries again there.

use std::rc::Rc;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use openraft::error::{CheckIsLeaderError, RaftError};

use crate::controller::command::{encode_outcome, ControllerCommand};
use crate::controller::error::ControllerError;
use crate::controller::handle::Controller;
use crate::runtime::GlommioRuntime;
use crate::transport::codec::{self, ErrorBody, ProposeReply, ReadIndexReply};
use crate::transport::error::code;
use crate::transport::frame::RaftKind;
use crate::transport::ControlHandler;
use crate::types::NodeId;

fn malformed(e: impl std::fmt::Display) -> ErrorBody {
    ErrorBody {
        code: code::MALFORMED.into(),
        message: e.to_string(),
    }
}

impl Controller {
    /// The handler of the controller's control frames, to set on shard
    /// 0's `RaftServer` (directly, or in a `ControlRouter`).
    pub fn control_handler(&self) -> Rc<dyn ControlHandler> {
        Rc::new(self.clone())
    }

    /// The answer to a forwarded command.
    async fn answer_propose(&self, from: NodeId, command: Bytes) -> ProposeReply {
        if let Err(e) = self.check_running() {
            return ProposeReply::Unavailable(e.to_string());
        }
        if !self.is_leader() {
            return ProposeReply::NotLeader(self.leader().filter(|&l| l != self.node_id()));
        }
        // Bytes that are no command never enter the log.
        if let Err(r) = ControllerCommand::decode(&command) {
            return ProposeReply::Applied(encode_outcome(&Err(r)));
        }
        tracing::debug!(from, "controller command forwarded");
        match self.propose_local(command.to_vec()).await {
            Ok(outcome) => ProposeReply::Applied(encode_outcome(&outcome)),
            Err(ControllerError::NotLeader { leader }) => ProposeReply::NotLeader(leader),
            Err(ControllerError::Unavailable(why)) => ProposeReply::Unavailable(why),
            Err(ControllerError::OutcomeUnknown(why)) | Err(ControllerError::Fatal(why)) => {
                ProposeReply::OutcomeUnknown(why)
            }
        }
    }

    /// The answer to a read-index request: the committed index, once a
    /// quorum confirmed this node still leads.
    async fn answer_read_index(&self) -> ReadIndexReply {
        if let Err(e) = self.check_running() {
            return ReadIndexReply::Unavailable(e.to_string());
        }
        if !self.is_leader() {
            return ReadIndexReply::NotLeader(self.leader().filter(|&l| l != self.node_id()));
        }
        let bound = self.0.config.read_barrier_timeout;
        match GlommioRuntime::within(bound, self.raft().get_read_log_id()).await {
            Ok(Ok((read, _applied))) => ReadIndexReply::Index(read.map_or(0, |l| l.index)),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
                ReadIndexReply::NotLeader(f.leader_id)
            }
            Ok(Err(e)) => ReadIndexReply::Unavailable(e.to_string()),
            Err(_) => ReadIndexReply::Unavailable(format!("no quorum confirmed the leader within {bound:?}")),
        }
    }
}

impl ControlHandler for Controller {
    fn handle(
        &self,
        from: NodeId,
        kind: RaftKind,
        payload: Bytes,
    ) -> LocalBoxFuture<'static, Result<Vec<u8>, ErrorBody>> {
        let me = self.clone();
        Box::pin(async move {
            let mut out = Vec::new();
            match kind {
                RaftKind::ControllerPropose => {
                    let command = codec::decode_propose(payload).map_err(malformed)?;
                    let reply = me.answer_propose(from, command).await;
                    codec::encode_propose_reply(&mut out, &reply);
                }
                RaftKind::ControllerReadIndex => {
                    codec::decode_read_index(payload).map_err(malformed)?;
                    let reply = me.answer_read_index().await;
                    codec::encode_read_index_reply(&mut out, &reply);
                }
                other => {
                    return Err(ErrorBody {
                        code: code::UNSUPPORTED.into(),
                        message: format!("{other:?} is not a controller frame"),
                    })
                }
            }
            Ok(out)
        })
    }
}
