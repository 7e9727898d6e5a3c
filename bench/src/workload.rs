//! The soak's workloads (issue 19): each a request, or a short exchange,
//! that an ordinary client repeats for months. One [`Worker`] per client
//! connection (or per thread, for the workloads that open a connection per
//! operation) does one operation per [`Worker::once`].

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use es_protocol::client::{self, Client, Options as ClientOptions};
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::produce::ProduceRecord;
use es_protocol::{Kind, Request, Response};
use serde_json::json;

use crate::fetcher::Fetcher;
use crate::http::{expect_json, HttpConn};

/// Bytes of each produced record's value (binary-produce).
pub const PRODUCE_VALUE_BYTES: usize = 100;
/// Records fetched per binary-fetch.
const FETCH_RECORDS: u32 = 10;
/// binary-fetch reads among the newest this many records: about 500 KB
/// of 100-byte values, within the 1 MiB of recent writes per partition a
/// broker keeps in memory (docs/cli.md, `--recent-writes-shard-bytes`).
const FETCH_SPAN: u64 = 4_000;
/// `max_bytes` of a binary-fetch: its 10 records take about 1.4 KB.
const FETCH_MAX_BYTES: u32 = 4096;

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// GET .../records?offset=<hw>&wait_ms=1 on a keep-alive connection: each times out empty.
    HttpLongPollTimeout,
    /// A binary Fetch at the high watermark with wait_ms=1: each times out empty.
    BinaryLongPollTimeout,
    /// Binary fetches of existing records, one request at a time.
    BinaryFetch,
    /// Binary produces of one small record.
    BinaryProduce,
    /// A new HTTP connection per operation: connect, GET /health, closed.
    HttpConnections,
    /// A new binary connection per operation: handshake, one fetch, close.
    BinaryConnections,
    /// A consumer group joined and left, under a few names.
    GroupJoin,
    /// An offset commit to a new group name (refused once the broker holds
    /// its --groups-max groups).
    GroupCommitNew,
    /// A group created by a commit, then deleted.
    GroupCreateDelete,
    /// POST /v1/producers: a new idempotent producer id.
    ProducerInit,
}

impl Workload {
    pub const ALL: [Workload; 10] = [
        Workload::HttpLongPollTimeout,
        Workload::BinaryLongPollTimeout,
        Workload::BinaryFetch,
        Workload::BinaryProduce,
        Workload::HttpConnections,
        Workload::BinaryConnections,
        Workload::GroupJoin,
        Workload::GroupCommitNew,
        Workload::GroupCreateDelete,
        Workload::ProducerInit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::HttpLongPollTimeout => "http-long-poll-timeout",
            Workload::BinaryLongPollTimeout => "binary-long-poll-timeout",
            Workload::BinaryFetch => "binary-fetch",
            Workload::BinaryProduce => "binary-produce",
            Workload::HttpConnections => "http-connections",
            Workload::BinaryConnections => "binary-connections",
            Workload::GroupJoin => "group-join",
            Workload::GroupCommitNew => "group-commit-new",
            Workload::GroupCreateDelete => "group-create-delete",
            Workload::ProducerInit => "producer-init",
        }
    }

    /// Worker `index` of this workload against `target`, connected.
    pub fn worker(self, target: &Target, index: usize) -> Result<Box<dyn Worker>, String> {
        let topic = target.topic.clone();
        Ok(match self {
            Workload::HttpLongPollTimeout => Box::new(HttpLongPoll {
                conn: HttpConn::connect(&target.http)?,
                path: format!("/v1/topics/{topic}/partitions/0/records"),
                offset: target.records,
            }),
            Workload::BinaryLongPollTimeout => Box::new(BinaryLongPoll {
                fetcher: Fetcher::connect(&target.binary, "es-bench-soak")?,
                topic,
                offset: target.records,
            }),
            Workload::BinaryFetch => Box::new(BinaryFetch {
                fetcher: Fetcher::connect(&target.binary, "es-bench-soak")?,
                topic,
                records: target.records.max(1),
                next: (index as u64) << 32,
            }),
            Workload::BinaryProduce => Box::new(BinaryProduce {
                client: binary_client(&target.binary)?,
                topic,
                value: vec![b'v'; PRODUCE_VALUE_BYTES],
            }),
            Workload::HttpConnections => Box::new(HttpConnections {
                addr: target.http.clone(),
            }),
            Workload::BinaryConnections => Box::new(BinaryConnections {
                addr: target.binary.clone(),
                topic,
            }),
            Workload::GroupJoin | Workload::GroupCommitNew | Workload::GroupCreateDelete => {
                Box::new(Groups {
                    workload: self,
                    client: binary_client(&target.binary)?,
                    topic,
                    worker: index,
                    done: 0,
                    refused: target.refused.clone(),
                })
            }
            Workload::ProducerInit => Box::new(ProducerInit {
                conn: HttpConn::connect(&target.http)?,
            }),
        })
    }
}

/// Where the workloads go.
pub struct Target {
    /// Binary-protocol address.
    pub binary: String,
    /// HTTP address.
    pub http: String,
    /// The topic (partition 0 is used).
    pub topic: String,
    /// Records partition 0 held when the workload started.
    pub records: u64,
    /// Operations the broker refused at a limit (group-commit-new at
    /// `--groups-max`).
    pub refused: Arc<AtomicU64>,
}

/// One client doing one workload's operations in turn.
pub trait Worker: Send {
    /// One operation, answered.
    fn once(&mut self) -> Result<(), String>;
}

fn binary_client(addr: &str) -> Result<Client, String> {
    let options = ClientOptions {
        client_id: "es-bench-soak".into(),
        ..crate::connect::options()
    };
    Client::connect(addr, options).map_err(|e| format!("connect to {addr}: {e}"))
}

struct HttpLongPoll {
    conn: HttpConn,
    path: String,
    offset: u64,
}

impl Worker for HttpLongPoll {
    fn once(&mut self) -> Result<(), String> {
        let path = format!("{}?offset={}&wait_ms=1", self.path, self.offset);
        let reply = self.conn.request("GET", &path, b"", false)?;
        let doc = expect_json(reply, 200, "long-poll")?;
        // At the high watermark it times out empty; if another client
        // produced meanwhile, the next poll starts past what it got.
        self.offset = doc["next_offset"]
            .as_u64()
            .ok_or_else(|| format!("long-poll: no next_offset in {doc}"))?;
        Ok(())
    }
}

struct BinaryLongPoll {
    fetcher: Fetcher,
    topic: String,
    offset: u64,
}

impl Worker for BinaryLongPoll {
    fn once(&mut self) -> Result<(), String> {
        let ok = self.fetcher.fetch(Fetch {
            topic: self.topic.clone(),
            partition: 0,
            offset: Some(self.offset),
            max_records: 1,
            max_bytes: 64 << 10,
            wait_ms: 1,
        })?;
        self.offset = ok.next_offset;
        Ok(())
    }
}

struct BinaryFetch {
    fetcher: Fetcher,
    topic: String,
    records: u64,
    next: u64,
}

impl Worker for BinaryFetch {
    fn once(&mut self) -> Result<(), String> {
        // Offsets spread over the newest FETCH_SPAN records from the first
        // fetch on (a multiplicative hash of the count), so the warm-up
        // reads what the rest reads, from the broker's memory of recent
        // writes. Reads from disk allocate buffers that are given back at
        // the allocator's whim (readings megabytes apart: docs/design/soak.md);
        // walking the offsets in order read the old records from
        // disk during the warm-up only, and the measured run then gave
        // those buffers back, reading as negative growth.
        let span = self.records.min(FETCH_SPAN);
        let offset = self.records - span + self.next.wrapping_mul(0x9E37_79B9_7F4A_7C15) % span;
        self.next += 1;
        let ok = self.fetcher.fetch(Fetch {
            topic: self.topic.clone(),
            partition: 0,
            offset: Some(offset),
            max_records: FETCH_RECORDS,
            max_bytes: FETCH_MAX_BYTES,
            wait_ms: 0,
        })?;
        if ok.is_empty() {
            return Err(format!(
                "fetch at offset {offset} of {} records came back empty",
                self.records
            ));
        }
        Ok(())
    }
}

struct BinaryProduce {
    client: Client,
    topic: String,
    value: Vec<u8>,
}

impl Worker for BinaryProduce {
    fn once(&mut self) -> Result<(), String> {
        let record = ProduceRecord {
            partition: Some(0),
            timestamp_ms: None,
            key: None,
            value: self.value.clone(),
        };
        self.client
            .produce(&self.topic, vec![record])
            .map(|_| ())
            .map_err(|e| format!("produce: {e}"))
    }
}

struct HttpConnections {
    addr: String,
}

impl Worker for HttpConnections {
    fn once(&mut self) -> Result<(), String> {
        let mut conn = HttpConn::connect(&self.addr)?;
        let reply = conn.request("GET", "/health", b"", true)?;
        expect_json(reply, 200, "GET /health").map(|_| ())
    }
}

struct BinaryConnections {
    addr: String,
    topic: String,
}

impl Worker for BinaryConnections {
    fn once(&mut self) -> Result<(), String> {
        let options = ClientOptions {
            client_id: "es-bench-soak".into(),
            ..crate::connect::options()
        };
        let (mut sock, _) =
            client::connect(&self.addr, &options).map_err(|e| format!("connect to {}: {e}", self.addr))?;
        let fetch = Request::Fetch(Fetch {
            topic: self.topic.clone(),
            partition: 0,
            offset: None,
            max_records: 1,
            max_bytes: 4096,
            wait_ms: 0,
        });
        sock.write_all(&fetch.to_frame(1, false))
            .map_err(|e| format!("send: {e}"))?;
        match client::read_response(&mut sock).map_err(|e| format!("receive: {e}"))? {
            Some((1, Response::FetchOk(_))) => Ok(()),
            Some((_, Response::Error(e))) => Err(format!("fetch: {}: {}", e.code, e.message)),
            Some((id, other)) => Err(format!("fetch: unexpected {:?} for request {id}", other.kind())),
            None => Err("the broker closed the connection before answering".into()),
        }
        // Dropping the socket closes it.
    }
}

/// The three group workloads, over the binary protocol's JSON requests.
struct Groups {
    workload: Workload,
    client: Client,
    topic: String,
    worker: usize,
    /// Operations this worker has done (names new groups).
    done: u64,
    /// Commits to a new group refused with `too_many_groups`.
    refused: Arc<AtomicU64>,
}

impl Groups {
    fn admin(&self, kind: Kind, body: serde_json::Value) -> Result<serde_json::Value, String> {
        self.client
            .admin(kind, body)
            .map_err(|e| format!("{kind:?}: {e}"))
    }

    fn commit(&self, group: &str) -> Result<(), String> {
        self.admin(
            Kind::CommitOffsets,
            json!({"group": group, "offsets": [{"topic": self.topic, "partition": 0, "offset": 0}]}),
        )
        .map(|_| ())
    }
}

impl Worker for Groups {
    fn once(&mut self) -> Result<(), String> {
        let n = self.done;
        self.done += 1;
        let w = self.worker;
        match self.workload {
            Workload::GroupJoin => {
                // A few names, reused: two per worker.
                let group = format!("soak-join-{w}-{}", n % 2);
                let joined = self.admin(
                    Kind::JoinGroup,
                    json!({"group": group, "topics": [self.topic], "session_timeout_ms": 30000}),
                )?;
                let member = joined["member_id"]
                    .as_str()
                    .ok_or_else(|| format!("join: no member_id in {joined}"))?;
                self.admin(Kind::LeaveGroup, json!({"group": group, "member_id": member}))
                    .map(|_| ())
            }
            Workload::GroupCommitNew => {
                // A broker at its --groups-max refuses a new group: that
                // answer is the operation, once the limit is reached.
                let body = json!({"group": format!("soak-new-{w}-{n}"),
                                  "offsets": [{"topic": self.topic, "partition": 0, "offset": 0}]});
                match self.client.admin(Kind::CommitOffsets, body) {
                    Ok(_) => Ok(()),
                    Err(e) if e.code() == Some("too_many_groups") => {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    }
                    Err(e) => Err(format!("CommitOffsets: {e}")),
                }
            }
            Workload::GroupCreateDelete => {
                let group = format!("soak-gone-{w}-{n}");
                self.commit(&group)?;
                self.admin(Kind::DeleteGroup, json!({ "group": group }))
                    .map(|_| ())
            }
            other => Err(format!("{} is not a group workload", other.name())),
        }
    }
}

struct ProducerInit {
    conn: HttpConn,
}

impl Worker for ProducerInit {
    fn once(&mut self) -> Result<(), String> {
        let reply = self.conn.request("POST", "/v1/producers", b"", false)?;
        let doc = expect_json(reply, 200, "POST /v1/producers")?;
        doc["producer_id"]
            .as_i64()
            .map(|_| ())
            .ok_or_else(|| format!("POST /v1/producers: no producer_id in {doc}"))
    }
}
