//! Control frames: the requests between nodes that are not openraft's
//! (kinds 0x48-0x4f: the controller's propose and read index, and the
//! broker's leader reports and describe). The server hands each to the
//! [`ControlHandler`] set on it ([`RaftServer::set_control_handler`]);
//! the client side sends one with [`ShardNetwork::control_call`]. The
//! transport moves their bytes and knows nothing of their content, so a
//! new kind needs a handler, not a change to the server.
//!
//! [`RaftServer::set_control_handler`]: super::RaftServer::set_control_handler
//! [`ShardNetwork::control_call`]: super::ShardNetwork::control_call

use bytes::Bytes;
use futures::future::LocalBoxFuture;

use crate::transport::codec::ErrorBody;
use crate::transport::frame::RaftKind;
use crate::types::NodeId;

/// Answers the control frames a shard receives.
pub trait ControlHandler {
    /// The answer to a control request of `kind` from node `from`: the
    /// payload of its response frame (`kind.response()`), or an error sent
    /// as an Error frame (`malformed` for a payload it cannot decode, or a
    /// kind it does not handle).
    fn handle(
        &self,
        from: NodeId,
        kind: RaftKind,
        payload: Bytes,
    ) -> LocalBoxFuture<'static, Result<Vec<u8>, ErrorBody>>;
}

/// A [`ControlHandler`] that sends each kind to the handler routed for it
/// (the controller's kinds to the controller, the broker's to its own),
/// and answers other kinds `unsupported`.
#[derive(Default)]
pub struct ControlRouter {
    routes: std::cell::RefCell<std::collections::BTreeMap<RaftKind, std::rc::Rc<dyn ControlHandler>>>,
}

impl ControlRouter {
    /// Sends the requests of `kinds` to `handler` from now on.
    pub fn route(&self, kinds: &[RaftKind], handler: std::rc::Rc<dyn ControlHandler>) {
        let mut routes = self.routes.borrow_mut();
        for &k in kinds {
            routes.insert(k, handler.clone());
        }
    }
}

impl ControlHandler for ControlRouter {
    fn handle(
        &self,
        from: NodeId,
        kind: RaftKind,
        payload: Bytes,
    ) -> LocalBoxFuture<'static, Result<Vec<u8>, ErrorBody>> {
        match self.routes.borrow().get(&kind) {
            Some(h) => h.handle(from, kind, payload),
            None => Box::pin(async move {
                Err(ErrorBody {
                    code: crate::transport::error::code::UNSUPPORTED.into(),
                    message: format!("{kind:?}: no handler on this shard"),
                })
            }),
        }
    }
}
