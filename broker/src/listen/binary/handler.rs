//! Binary requests to the transport-neutral operations, and errors to error
//! frames with the same codes as HTTP.

use std::rc::Rc;
use std::time::{Duration, Instant};

use es_protocol::batch;
use es_protocol::requests::fetch::{Fetch, FetchOk};
use es_protocol::requests::produce::ProduceOk;
use es_protocol::requests::produce_batch::{ProduceBatch, ProduceBatchOk};
use es_protocol::{Kind, Request, Response};

use es_storage::{BatchBuf, EarlyWrite};

use crate::auth::grants::{Operation, Resource};
use crate::auth::quota::Direction;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::ops::fetch::{Charger, FetchQuery};
use crate::ops::produce::Item;
use crate::producers::idempotence::ProducerFields;
use crate::shard::budget::Budget;
use crate::shard::message::{FetchForm, FetchedData, Op, Payload, Reply};
use crate::shard::Shard;
use crate::topics::admin::{self, CreateTopic};

use super::outgoing::Outgoing;
use crate::limits::WRITE_DIRECT_BYTES_MIN;

/// A request as a connection's read loop hands it over.
pub enum Incoming {
    /// Decoded from a whole frame.
    Request(Request),
    /// A large ProduceBatch whose batch was received into page-aligned
    /// memory (es-storage's `ReceivingBatch`), with the early write of its
    /// pages (early.rs) if one ran: kept until the batch is placed.
    Batch(ProduceBatch<BatchBuf>, Option<EarlyWrite>),
}

impl Incoming {
    /// The decoded request, if it is one.
    pub fn request(&self) -> Option<&Request> {
        match self {
            Incoming::Request(r) => Some(r),
            Incoming::Batch(..) => None,
        }
    }

    /// Its endpoint, as metrics and logs name it.
    pub fn endpoint(&self) -> &'static str {
        match self {
            Incoming::Request(req) => endpoint(req),
            Incoming::Batch(..) => "produce_batch",
        }
    }

    /// The topic a produce or fetch names.
    fn record_topic(&self) -> Option<&str> {
        match self {
            Incoming::Request(Request::Produce(p)) => Some(&p.topic),
            Incoming::Request(Request::IdempotentProduce(ip)) => Some(&ip.produce.topic),
            Incoming::Request(Request::ProduceBatch(pb)) => Some(&pb.topic),
            Incoming::Request(Request::Fetch(f)) => Some(&f.topic),
            Incoming::Request(_) => None,
            Incoming::Batch(pb, _) => Some(&pb.topic),
        }
    }

    /// What a produce or fetch needs of the connection's key: `write` or
    /// `read` on its topic. Other requests are checked where they run.
    fn authorize(&self, p: &Principal) -> Result<(), ApiError> {
        match self {
            Incoming::Request(Request::Fetch(f)) => p.require(Operation::Read, Resource::Topic, &f.topic),
            Incoming::Request(Request::Admin(..) | Request::Hello(_)) => Ok(()),
            other => match other.record_topic() {
                Some(topic) => p.require(Operation::Write, Resource::Topic, topic),
                None => Ok(()),
            },
        }
    }

    /// The stored bytes of a produce batch whose batch is whole: what the
    /// read loop charges its key's produce quota on arrival (records are
    /// charged by `ops::produce`, once grouped into the batches they
    /// become).
    pub fn batch_bytes(&self) -> Option<(&str, u64)> {
        match self {
            Incoming::Request(Request::ProduceBatch(pb)) => Some((&pb.topic, pb.batch.len() as u64)),
            Incoming::Batch(pb, _) => Some((&pb.topic, pb.batch.len() as u64)),
            Incoming::Request(_) => None,
        }
    }

    /// The producer id of an idempotent produce.
    fn producer_id(&self) -> Option<i64> {
        match self {
            Incoming::Request(Request::IdempotentProduce(ip)) => Some(ip.producer_id),
            Incoming::Request(Request::ProduceBatch(pb)) => pb.producer().map(|(id, _, _)| id),
            Incoming::Batch(pb, _) => pb.producer().map(|(id, _, _)| id),
            Incoming::Request(_) => None,
        }
    }

    /// The partition it reads or appends to, for a request that names
    /// exactly one.
    pub fn partition(&self) -> Option<(&str, u32)> {
        match self {
            Incoming::Request(Request::ProduceBatch(pb)) => Some((&pb.topic, pb.partition)),
            Incoming::Request(Request::Fetch(f)) => Some((&f.topic, f.partition)),
            Incoming::Request(_) => None,
            Incoming::Batch(pb, _) => Some((&pb.topic, pb.partition)),
        }
    }
}

/// Runs one request and frames its answer (or its error) for the writer;
/// a fetch's answer is charged to the connection's `responses` budget and
/// the shard's (ops/fetch.rs), and holds its charge until written. With
/// the answer, the throttle its key's produce quota asks for records
/// produced (docs/security.md, "Quotas"); a fetch pays its key's debt
/// before it reads.
pub async fn handle(
    shard: &Rc<Shard>,
    incoming: Incoming,
    (request_id, gzip, version): (u64, bool, u16),
    responses: &Rc<Budget>,
    principal: &Principal,
) -> (Outgoing, Duration) {
    let mut throttle = Duration::ZERO;
    let started = Instant::now();
    let endpoint = incoming.endpoint();
    if let Some(topic) = incoming.record_topic() {
        crate::listen::listener::test_panic_hook(topic);
    }
    let allowed = incoming
        .authorize(principal)
        .and_then(|()| match incoming.producer_id() {
            Some(id) => shard.producers.check_owner(id, principal),
            None => Ok(()),
        });
    let answer = match (allowed, incoming) {
        (Err(e), _) => Err(e),
        (Ok(()), Incoming::Request(Request::Fetch(f))) => {
            Box::pin(fetch(shard, f, request_id, gzip, responses, principal)).await
        }
        (Ok(()), Incoming::Request(other)) => run(shard, principal, other, &mut throttle)
            .await
            .map(|resp| Outgoing::frame(resp.into_frame(request_id, gzip))),
        (Ok(()), Incoming::Batch(pb, early)) => Box::pin(produce_batch(shard, pb, early))
            .await
            .map(|resp| Outgoing::frame(resp.into_frame(request_id, gzip))),
    };
    let m = shard.hot.binary(endpoint);
    let out = match answer {
        Ok(out) => {
            m.ok.increment(1);
            out
        }
        Err(e) => {
            m.error.increment(1);
            // Version 2 carries the error's details (a not_leader's leader).
            let resp = Response::error_with_details(e.code.wire(), e.message, e.details, version);
            Outgoing::frame(resp.into_frame(request_id, gzip))
        }
    };
    m.duration.record(started.elapsed().as_secs_f64());
    (out, throttle)
}

/// A fetch answers with the stored batches as storage read them: the frame
/// header and fixed fields, then the batches' buffers, not copied into one
/// (unless the reply is gzipped, or small: then the writer would copy it
/// anyway, and the copy frees the larger buffers it was read into). The
/// answer holds its charge, resized to its length, until written.
async fn fetch(
    shard: &Rc<Shard>,
    f: Fetch,
    request_id: u64,
    gzip: bool,
    responses: &Rc<Budget>,
    principal: &Principal,
) -> Result<Outgoing, ApiError> {
    let meta = admin::lookup_synced(shard, &f.topic).await?;
    // A key in debt waits until it is paid, holding nothing read.
    let quotas = shard.config.quotas();
    quotas.pay_debt(shard, principal, Direction::Fetch).await;
    let q = FetchQuery {
        offset: f.offset,
        max_records: Some(f.max_records as u64),
        max_bytes: Some(f.max_bytes as u64),
        wait_ms: Some(f.wait_ms as u64),
        form: FetchForm::Batches,
    };
    let charger = Charger {
        connection: Some(responses),
        listener: "binary",
    };
    let (fetched, charge) = crate::ops::fetch::fetch(shard, &meta, f.partition as u64, q, &charger).await?;
    let FetchedData::Batches { parts, count } = fetched.data else {
        return Err(ApiError::internal("a batches fetch answered with records"));
    };
    let (hw, next, start) = (fetched.high_watermark, fetched.next_offset, fetched.start_offset);
    // The stored batches answered; their throttle is paid by the key's
    // next fetch, before it reads.
    let stored: u64 = parts.iter().map(|p| p.len() as u64).sum();
    if stored > 0 {
        quotas.charge(principal, Direction::Fetch, stored);
    }
    // Storage verified every checksum on read; the framing is checked
    // again before the batches go out (by `trusted` when gzipped).
    let bad = |e: es_protocol::DecodeError| ApiError::internal(format!("stored batches: {e}"));
    let mut out = if gzip {
        let ok = FetchOk::trusted(hw, next, start, count, in_version_1(parts)?.concat(), 0).map_err(bad)?;
        Outgoing::frame(Response::FetchOk(ok).into_frame(request_id, true))
    } else {
        batch::validate_framing_parts(parts.iter().map(|p| &p[..]), count, start, hw).map_err(bad)?;
        let parts = in_version_1(parts)?;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut head = FetchOk::frame_prefix(request_id, hw, next, start, count, len);
        if len < WRITE_DIRECT_BYTES_MIN {
            head.reserve_exact(len);
            for p in &parts {
                head.extend_from_slice(p);
            }
            Outgoing::frame(head)
        } else {
            Outgoing {
                body: parts,
                ..Outgoing::frame(head)
            }
        }
    };
    out.charge = charge.map(|mut c| {
        c.resize(out.len() as u64);
        c
    });
    Ok(out)
}

/// The stored batches in the protocol's batch layout (version 1): a
/// replicated log's version 2 batch goes out as its version 1 header
/// (`downgrade_header`, O(1): the records are not read) followed by its
/// records, a slice of the buffer they were read into (two parts, not a
/// copy). Version 1 batches (a standalone broker's) are passed as they are.
fn in_version_1(parts: Vec<bytes::Bytes>) -> Result<Vec<bytes::Bytes>, ApiError> {
    if !parts.iter().any(|p| p.get(16) == Some(&batch::MAGIC_V2)) {
        return Ok(parts);
    }
    let mut out = Vec::with_capacity(parts.len() * 2);
    for p in parts {
        if p.get(16) != Some(&batch::MAGIC_V2) {
            out.push(p);
            continue;
        }
        let head = batch::downgrade_header(&p)
            .ok_or_else(|| ApiError::internal("a stored version 2 batch has no version 1 form"))?;
        out.push(bytes::Bytes::copy_from_slice(&head));
        out.push(p.slice(batch::HEADER_V2_BYTES..));
    }
    Ok(out)
}

fn endpoint(req: &Request) -> &'static str {
    match req {
        Request::Hello(_) => "hello",
        Request::Produce(_) => "produce",
        Request::IdempotentProduce(_) => "idempotent_produce",
        Request::ProduceBatch(_) => "produce_batch",
        Request::Fetch(_) => "fetch",
        Request::Admin(Kind::CreateTopic, _) => "create_topic",
        Request::Admin(Kind::ListTopics, _) => "list_topics",
        Request::Admin(Kind::DescribeTopic, _) => "describe_topic",
        Request::Admin(Kind::DeleteTopic, _) => "delete_topic",
        Request::Admin(Kind::PatchTopicConfig, _) => "patch_config",
        Request::Admin(Kind::InitProducer, _) => "init_producer",
        Request::Admin(Kind::DescribeCluster, _) => "describe_cluster",
        Request::Admin(
            Kind::CreateKey
            | Kind::ListKeys
            | Kind::DescribeKey
            | Kind::PatchKey
            | Kind::RevokeKey
            | Kind::WhoAmI,
            _,
        ) => "keys",
        Request::Admin(_, _) => "group",
    }
}

/// A batch the producer built: checked by the decoder, appended as it came
/// on the partition's shard (idempotently when its header carries a
/// producer id). `early` lives until the batch is placed: dropping it
/// sooner would void its early write.
async fn produce_batch(
    shard: &Rc<Shard>,
    pb: ProduceBatch<BatchBuf>,
    early: Option<EarlyWrite>,
) -> Result<Response, ApiError> {
    let meta = admin::lookup_synced(shard, &pb.topic).await?;
    if pb.partition >= meta.partitions {
        return Err(ApiError::partition_not_found(
            &meta.name,
            pb.partition as u64,
            meta.partitions,
        ));
    }
    let producer = pb
        .producer()
        .map(|(producer_id, epoch, sequence)| ProducerFields {
            producer_id,
            epoch,
            sequence,
        });
    let record_count = pb.record_count();
    let owner = shard.owner(&meta.name, pb.partition);
    // The request's topic is the catalog's name (looked up by it): moved,
    // not copied.
    let op = Op::Produce {
        topic: pb.topic,
        partition: pb.partition,
        payload: Payload::Batch(pb.batch, early.as_ref().map(EarlyWrite::ticket)),
        producer,
    };
    let reply = shard.call(owner, op).await;
    drop(early);
    match reply {
        Reply::Produced(Ok(base_offset)) => Ok(Response::ProduceBatchOk(ProduceBatchOk {
            partition: pb.partition,
            base_offset,
            record_count,
        })),
        Reply::Produced(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

async fn produce(
    shard: &Rc<Shard>,
    principal: &Principal,
    p: es_protocol::requests::produce::Produce,
    producer: Option<ProducerFields>,
    throttle: &mut Duration,
) -> Result<Vec<(u32, u64)>, ApiError> {
    let meta = admin::lookup_synced(shard, &p.topic).await?;
    let items = p
        .records
        .into_iter()
        .map(|r| Item {
            key: r.key,
            value: r.value,
            partition: r.partition,
            timestamp_ms: r.timestamp_ms,
        })
        .collect();
    let quotas = shard.config.quotas();
    let mut charge = |bytes| *throttle = quotas.charge(principal, Direction::Produce, bytes);
    crate::ops::produce::produce(shard, &meta, items, producer, &mut charge).await
}

fn str_field<'a>(body: &'a serde_json::Value, field: &str) -> Result<&'a str, ApiError> {
    body.get(field)
        .and_then(|v| v.as_str())
        .ok_or_else(|| ApiError::invalid(format!("the request needs a string \"{field}\"")))
}

/// Group requests carry the group (and member) in the JSON body, with the
/// same fields as the HTTP bodies otherwise.
async fn group_request(
    shard: &Rc<Shard>,
    p: &Principal,
    kind: Kind,
    body: &serde_json::Value,
) -> Result<serde_json::Value, ApiError> {
    use crate::groups::coordinator::GroupOp;
    let group = str_field(body, "group")?;
    let member = || str_field(body, "member_id").map(String::from);
    let op = match kind {
        Kind::JoinGroup => crate::groups::admin::join_op(body)?,
        Kind::Heartbeat => GroupOp::Heartbeat { member_id: member()? },
        Kind::LeaveGroup => GroupOp::Leave { member_id: member()? },
        Kind::CommitOffsets => crate::groups::admin::commit_op(body)?,
        Kind::FetchCommits => GroupOp::Commits,
        Kind::DescribeGroup => return crate::groups::admin::describe(shard, p, group).await,
        Kind::DeleteGroup => GroupOp::Delete,
        Kind::PatchGroup => crate::groups::admin::set_owner_op(body)?,
        Kind::ResetGroup => {
            let (topic, to) = crate::groups::admin::reset_args(body)?;
            return crate::groups::admin::reset(shard, p, group, &topic, to).await;
        }
        other => return Err(ApiError::invalid(format!("{other:?} is not a group request"))),
    };
    crate::groups::admin::call(shard, p, group, op).await
}

fn id_of(body: &serde_json::Value) -> Result<&str, ApiError> {
    str_field(body, "id")
}

fn name_of(body: &serde_json::Value) -> Result<&str, ApiError> {
    body.get("name")
        .and_then(|v| v.as_str())
        .ok_or_else(|| ApiError::invalid("the request needs a string \"name\""))
}

async fn run(
    shard: &Rc<Shard>,
    p: &Principal,
    req: Request,
    throttle: &mut Duration,
) -> Result<Response, ApiError> {
    match req {
        Request::Hello(_) => Err(ApiError::invalid("Hello may only be the first frame")),
        Request::IdempotentProduce(ip) => {
            let producer = ProducerFields {
                producer_id: ip.producer_id,
                epoch: ip.epoch,
                sequence: ip.sequence,
            };
            let offsets = Box::pin(produce(shard, p, ip.produce, Some(producer), throttle)).await?;
            Ok(Response::ProduceOk(ProduceOk { offsets }))
        }
        Request::Produce(records) => {
            let offsets = Box::pin(produce(shard, p, records, None, throttle)).await?;
            Ok(Response::ProduceOk(ProduceOk { offsets }))
        }
        Request::ProduceBatch(pb) => Box::pin(produce_batch(shard, pb.map_batch(BatchBuf::from), None)).await,
        // Framed by `fetch` itself (its batches are not copied into a Response).
        Request::Fetch(_) => Err(ApiError::internal("a fetch is answered by handler::fetch")),
        Request::Admin(kind, body) => Box::pin(admin_request(shard, p, kind, body)).await,
    }
}

/// Topic, producer-id and group requests (JSON), boxed by `run`: rare, and
/// their state must not weigh on every produce and fetch.
async fn admin_request(
    shard: &Rc<Shard>,
    p: &Principal,
    kind: Kind,
    body: serde_json::Value,
) -> Result<Response, ApiError> {
    {
        {
            let value = match kind {
                Kind::CreateTopic => {
                    let create: CreateTopic = serde_json::from_value(body)
                        .map_err(|e| ApiError::invalid(format!("create topic: {e}")))?;
                    admin::create(shard, p, create).await?
                }
                Kind::ListTopics => admin::list(shard, p),
                Kind::DescribeTopic => admin::describe(shard, p, name_of(&body)?).await?,
                Kind::DeleteTopic => admin::delete(shard, p, name_of(&body)?).await?,
                Kind::InitProducer => {
                    let existing = match body.get("producer_id") {
                        None | Some(serde_json::Value::Null) => None,
                        Some(v) => Some(
                            v.as_i64()
                                .ok_or_else(|| ApiError::invalid("producer_id must be an integer"))?,
                        ),
                    };
                    crate::producers::admin::init(shard, p, existing).await?
                }
                k @ (Kind::JoinGroup
                | Kind::Heartbeat
                | Kind::LeaveGroup
                | Kind::CommitOffsets
                | Kind::FetchCommits
                | Kind::DescribeGroup
                | Kind::DeleteGroup
                | Kind::PatchGroup
                | Kind::ResetGroup) => group_request(shard, p, k, &body).await?,
                Kind::ListGroups => crate::groups::admin::list(shard, p).await?,
                Kind::CreateKey => crate::auth::admin::create(shard, p, &body).await?,
                Kind::ListKeys => crate::auth::admin::list(shard, p)?,
                Kind::DescribeKey => crate::auth::admin::get(shard, p, id_of(&body)?)?,
                Kind::PatchKey => {
                    let mut changes = body.clone();
                    if let Some(obj) = changes.as_object_mut() {
                        obj.remove("id");
                    }
                    crate::auth::admin::patch(shard, p, id_of(&body)?, &changes).await?
                }
                Kind::RevokeKey => crate::auth::admin::revoke(shard, p, id_of(&body)?).await?,
                Kind::WhoAmI => crate::auth::admin::whoami(shard, p)?,
                // `GET /v1/cluster`'s document; `not_found` standalone.
                Kind::DescribeCluster => crate::cluster::view::describe(shard, p).await?,
                Kind::PatchTopicConfig => {
                    let name = name_of(&body)?.to_string();
                    let changes = body
                        .get("config")
                        .and_then(|c| c.as_object())
                        .cloned()
                        .ok_or_else(|| ApiError::invalid("the request needs a \"config\" object"))?;
                    admin::patch(shard, p, &name, changes).await?
                }
                other => return Err(ApiError::invalid(format!("{other:?} is not a topic request"))),
            };
            Ok(Response::AdminOk(value))
        }
    }
}
