//! TEMP
use std::rc::Rc;
use kafka_protocol::messages::ApiKey;
use super::codec::Body;
use super::connection::Answer;
use crate::auth::Principal;
use crate::shard::Shard;
pub async fn handle(_shard: &Rc<Shard>, _p: &Principal, _body: Body, _key: ApiKey, _v: i16, _cid: i32) -> Answer {
    Answer::closing(None)
}
