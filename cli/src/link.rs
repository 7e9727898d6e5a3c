//! What the idempotent producer sends its batches through: a connection
//! to the broker that can be replaced by a new one once it is lost. The
//! producer's retry logic only sees this trait, so its unit tests run it
//! against a fake broker.

use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::{Client, ClientError, PendingResponse};
use es_protocol::{Request, Response};

use crate::session::Session;

/// A connection that batches are sent on.
pub trait Link {
    type Pending: Answer;
    /// Sends a request without waiting for its answer.
    fn send(&mut self, request: &Request) -> Result<Self::Pending, ClientError>;
    /// Replaces the connection with a new one.
    fn reconnect(&mut self) -> Result<(), ClientError>;
    /// Notes where `error` (a cluster's `not_leader`) says the partition is
    /// led, so that the next reconnect goes there.
    fn follow(&mut self, _error: &ClientError) {}
    /// Waits before the next reconnect attempt.
    fn pause(&mut self, d: Duration);
    /// A new producer id (`None`) or the next epoch of one: (id, epoch).
    fn init_producer(&mut self, existing: Option<i64>) -> Result<(i64, i16), ClientError>;
}

/// The answer to a produce request on its way.
pub trait Answer {
    /// (partition, offset) of every record of the batch, in order.
    fn offsets(self) -> Result<Vec<(u32, u64)>, ClientError>;
}

impl Answer for PendingResponse {
    fn offsets(self) -> Result<Vec<(u32, u64)>, ClientError> {
        match self.wait()? {
            Response::ProduceOk(ok) => Ok(ok.offsets),
            other => Err(ClientError::Protocol(format!(
                "the broker answered a produce with {:?}",
                other.kind()
            ))),
        }
    }
}

/// The session's connection, then new ones to the same broker.
pub struct ClientLink<'a> {
    session: &'a Session,
    client: Arc<Client>,
}

impl<'a> ClientLink<'a> {
    pub fn new(session: &'a Session) -> ClientLink<'a> {
        ClientLink {
            session,
            client: session.client.clone(),
        }
    }
}

impl Link for ClientLink<'_> {
    type Pending = PendingResponse;

    fn send(&mut self, request: &Request) -> Result<PendingResponse, ClientError> {
        self.client.send(request)
    }

    fn reconnect(&mut self) -> Result<(), ClientError> {
        self.client = Arc::new(self.session.reconnect()?);
        Ok(())
    }

    fn pause(&mut self, d: Duration) {
        std::thread::sleep(d);
    }

    fn follow(&mut self, error: &ClientError) {
        self.session.follow(error);
    }

    /// Asked where the cluster says (a `not_leader` is followed).
    fn init_producer(&mut self, existing: Option<i64>) -> Result<(i64, i16), ClientError> {
        let body = match existing {
            Some(id) => serde_json::json!({ "producer_id": id }),
            None => serde_json::json!({}),
        };
        let v = self
            .session
            .admin_routed(es_protocol::Kind::InitProducer, body)
            .map_err(|(_, e)| e)?;
        let field = |name: &str| v.get(name).and_then(serde_json::Value::as_i64);
        match (
            field("producer_id"),
            field("epoch").and_then(|e| i16::try_from(e).ok()),
        ) {
            (Some(id), Some(epoch)) => Ok((id, epoch)),
            _ => Err(ClientError::Protocol(format!("bad InitProducer answer {v}"))),
        }
    }
}
