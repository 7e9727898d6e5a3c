//! Producer operations, independent of the transport: a new producer id,
//! or the next epoch of an existing one (which fences its older
//! instances), allocated on the controller shard. HTTP and the binary
//! protocol both call these.

use std::rc::Rc;

use crate::error::ApiError;
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};

/// Runs the allocation on the controller; JSON `{"producer_id","epoch"}`.
/// The caller needs `write` on at least one topic grant (docs/security.md).
pub async fn init(
    shard: &Rc<Shard>,
    p: &crate::auth::Principal,
    existing: Option<i64>,
) -> Result<serde_json::Value, ApiError> {
    p.require_some_topic_write()?;
    if existing.is_some_and(|id| id < 0) {
        return Err(ApiError::invalid("producer_id must be non-negative"));
    }
    match shard
        .call(CONTROLLER_SHARD, Op::InitProducer(existing, p.clone()))
        .await
    {
        Reply::Producer(Ok((id, epoch))) => Ok(serde_json::json!({"producer_id": id, "epoch": epoch})),
        Reply::Producer(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}
