//! Every bound the broker keeps, its unit last, with why that value, and
//! the relations between them checked at compile time.
//!
//! Storage's bounds are es-storage's (`es_storage::limits`), the batch
//! format's es-format's and the frame's es-protocol's; those the broker's
//! must respect are checked here. The `es` CLI restates some of these
//! (cli/src/limits.rs: it depends on the protocol, not on the broker):
//! [`WAIT_MS_MAX`] as `BROKER_WAIT_MS_MAX`, [`PRODUCER_WINDOW_BATCHES`] as
//! `BROKER_PRODUCER_WINDOW_BATCHES` and [`FETCH_RECORDS_MAX`] as its own
//! `FETCH_RECORDS_MAX`: change one here, change it there.
//!
//! Formats are not bounds and stay with their codec: the groups log's
//! `MAGIC` and `HEADER_BYTES` (groups/log.rs), the producer epoch's range
//! (`EPOCH_MAX`, an `i16` on disk: producers/ids.rs).

use es_format::limits::BATCH_BYTES_MAX;
use es_protocol::limits::FRAME_BYTES_MAX_DEFAULT;
use es_protocol::requests::fetch::FRAME_PREFIX_BYTES;
use es_storage::limits::{
    OPEN_SEGMENTS_MAX_DEFAULT, READ_CHUNK_BYTES_MIN, SEGMENT_BYTES_DEFAULT, SEGMENT_BYTES_MAX,
};

// --- Flags: defaults and ranges (operate/config.rs, config_check.rs) ---------

/// Most shards (`--shards`): glommio needs locked memory per executor, and
/// beyond this the mesh of cross-shard channels (n^2) stops paying off.
pub const SHARDS_MAX: usize = 256;
/// Smallest `--frame-bytes-max`: a frame header and the fields of a small
/// request; below it no client could say anything.
pub const FRAME_BYTES_MAX_MIN: usize = es_protocol::HEADER_BYTES + 64;
/// Default `--inflight-requests-max`, requests in flight per binary
/// connection: deep enough for a pipelining producer to keep group commit
/// busy, small enough to bound a connection's memory (in flight x frame
/// size).
pub const INFLIGHT_REQUESTS_MAX_DEFAULT: usize = 256;
/// Largest `--inflight-requests-max`: far past what pipelining gains.
pub const INFLIGHT_REQUESTS_MAX_LIMIT: usize = 65_536;
/// Default `--request-shard-bytes`: 16 requests of the largest default
/// frame (16 MiB) per shard at once.
pub const REQUEST_SHARD_BYTES_DEFAULT: usize = 256 << 20;
/// Largest `--request-shard-bytes` (64 GiB): past any machine's memory.
pub const REQUEST_SHARD_BYTES_LIMIT: usize = 64 << 30;
/// Default `--frame-stall-ms` (30 s): a client that stops mid-transfer for
/// this long is gone, not slow.
pub const FRAME_STALL_MS_DEFAULT: u64 = 30_000;
/// Largest `--frame-stall-ms` (an hour): past it the stall timer guards
/// nothing.
pub const FRAME_STALL_MS_MAX: u64 = 60 * 60 * 1000;
/// Default `--connection-idle-ms`: 10 minutes, Kafka's
/// `connections.max.idle.ms`.
pub const CONNECTION_IDLE_MS_DEFAULT: u64 = 600_000;
/// Largest `--connection-idle-ms` (a week): past it, an idle connection
/// might as well never be closed.
pub const CONNECTION_IDLE_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// Default `--http-body-bytes-max`: 16 MiB holds a produce of thousands of
/// 1 KiB records while bounding what one request can make a shard buffer.
pub const HTTP_BODY_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// Default `--fetch-bytes-max`, the largest fetch response: 16 MiB, the
/// default frame's size.
pub const FETCH_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// Default `--connections-max` for the whole broker (split evenly over
/// shards): far more clients than one broker usually serves, each costing
/// a descriptor and a read buffer.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Smallest `--connections-max`: one for each listener (HTTP's share is
/// at least one and leaves the binary listener at least one).
pub const CONNECTIONS_MAX_MIN: usize = 2;
/// Largest `--connections-max`: far above what one broker's descriptors
/// allow.
pub const CONNECTIONS_MAX_LIMIT: usize = 1 << 20;
/// Default `--groups-max`: far more groups than a broker's consumers use,
/// while the groups a client can make a broker hold stay in the tens of
/// megabytes (docs/cli.md states the cost per group).
pub const GROUPS_MAX_DEFAULT: usize = 100_000;
/// Largest `--groups-max`: past any broker's memory (docs/cli.md states the
/// cost per group).
pub const GROUPS_MAX_LIMIT: usize = 100_000_000;
/// Default `--producer-id-expiry-ms`: a day, Kafka's default.
pub const PRODUCER_ID_EXPIRY_MS_DEFAULT: u64 = 24 * 60 * 60 * 1000;
/// Shortest `--producer-id-expiry-ms`: a second, far above a retry's delay.
pub const PRODUCER_ID_EXPIRY_MS_MIN: u64 = 1000;
/// Longest `--producer-id-expiry-ms`: a year (memory grows with every id
/// active within one expiry).
pub const PRODUCER_ID_EXPIRY_MS_MAX: u64 = 365 * 24 * 60 * 60 * 1000;
/// Largest `--open-segments-max`: as `--connections-max`, far above what
/// one broker's descriptors allow.
pub const OPEN_SEGMENTS_MAX_LIMIT: usize = 1 << 20;
/// Default `--partitions-max`: ten thousand partitions take 30,000
/// descriptors once written and start in seconds; past that an operator
/// sizes the limits (docs/cli.md, "File descriptors") and raises it.
pub const PARTITIONS_MAX_DEFAULT: usize = 10_000;
/// Largest `--partitions-max`: a snapshot of one group with an offset on
/// every partition must fit one groups-log record (asserted below), and
/// 131,072 partitions already take 393,216 descriptors once written.
pub const PARTITIONS_MAX_LIMIT: usize = 1 << 17;
/// Smallest `--segment-bytes`: the default for every new topic; a smaller
/// one turns each partition into a pile of tiny files, each holding open
/// descriptors. A topic may still set a smaller `segment_bytes` itself.
pub const SEGMENT_BYTES_FLAG_MIN: u64 = 64 << 10;
/// Default `--cleanup-interval-ms`: 30 s keeps retention within half a
/// minute of its limits while a pass over partitions with nothing due
/// costs nothing but a look at each one's segments.
pub const CLEANUP_INTERVAL_MS_DEFAULT: u64 = 30_000;
/// Longest `--cleanup-interval-ms` (one day): past it, retention would lag
/// its limits by more than most limits are long.
pub const CLEANUP_INTERVAL_MS_MAX: u64 = 24 * 60 * 60 * 1000;
/// Default `--group-offsets-retention-ms`: 7 days, Kafka's default.
pub const GROUP_OFFSETS_RETENTION_MS_DEFAULT: u64 = 7 * 24 * 60 * 60 * 1000;
/// Longest `--group-offsets-retention-ms` (100 years): offsets that never
/// expire in practice.
pub const GROUP_OFFSETS_RETENTION_MS_MAX: u64 = 100 * 365 * 24 * 60 * 60 * 1000;
/// Default `--spin-before-park-us`: waking a parked thread costs far more
/// than a forwarded request or an fsync completion takes
/// (docs/design/spin-before-park.md).
pub const SPIN_BEFORE_PARK_US_DEFAULT: u64 = 200;
/// Longest `--spin-before-park-us`: past a second, a shard might as well
/// never park.
pub const SPIN_BEFORE_PARK_US_MAX: u64 = 1_000_000;
/// Default `--tls-handshake-timeout-ms`: a client on a slow link
/// finishes a handshake in a few round trips, far below 10 s, while one
/// that connects and says nothing holds its socket no longer than this.
pub const TLS_HANDSHAKE_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Largest `--tls-handshake-timeout-ms` (a minute): past it the timeout no
/// longer guards against clients that open connections and stall.
pub const TLS_HANDSHAKE_TIMEOUT_MS_MAX: u64 = 60_000;
/// Largest `--quota-produce-default` and `--quota-fetch-default` (and a
/// key's own rate), bytes per second: 1 TiB/s, far past any link, keeps
/// a bucket's arithmetic far from overflowing.
pub const QUOTA_BYTES_PER_SEC_MAX: u64 = 1 << 40;
/// Default `--quota-burst-ms`: one second of traffic at the key's rate
/// passes without delay (KIP-599's default window).
pub const QUOTA_BURST_MS_DEFAULT: u64 = 1_000;
/// Largest `--quota-burst-ms`: a minute; past it a quota hardly limits.
pub const QUOTA_BURST_MS_MAX: u64 = 60_000;
/// Default `--quota-throttle-max-ms`: Kafka's default request timeout, so
/// a throttled client is not timed out by its own library.
pub const QUOTA_THROTTLE_MAX_MS_DEFAULT: u64 = 30_000;
/// Largest `--quota-throttle-max-ms`: a longer silence than
/// `--frame-stall-ms` allows at most would look like a dead broker.
pub const QUOTA_THROTTLE_MAX_MS_MAX: u64 = FRAME_STALL_MS_MAX;

// The defaults pass `Config::validate`, each within its flag's range:
const _: () = assert!(
    TLS_HANDSHAKE_TIMEOUT_MS_DEFAULT >= 1 && TLS_HANDSHAKE_TIMEOUT_MS_DEFAULT <= TLS_HANDSHAKE_TIMEOUT_MS_MAX
);
const _: () = assert!(FRAME_BYTES_MAX_MIN <= FRAME_BYTES_MAX_DEFAULT);
const _: () = assert!(FRAME_BYTES_MAX_DEFAULT <= BATCH_BYTES_MAX);
const _: () = assert!(INFLIGHT_REQUESTS_MAX_DEFAULT <= INFLIGHT_REQUESTS_MAX_LIMIT);
const _: () = assert!(REQUEST_SHARD_BYTES_DEFAULT <= REQUEST_SHARD_BYTES_LIMIT);
const _: () = assert!(FRAME_STALL_MS_DEFAULT <= FRAME_STALL_MS_MAX);
const _: () = assert!(CONNECTION_IDLE_MS_DEFAULT <= CONNECTION_IDLE_MS_MAX);
const _: () = assert!(HTTP_BODY_BYTES_MAX_DEFAULT <= BATCH_BYTES_MAX);
const _: () = assert!(FETCH_BYTES_MAX_DEFAULT <= BATCH_BYTES_MAX);
const _: () = assert!(CONNECTIONS_MAX_MIN <= CONNECTIONS_MAX_DEFAULT);
const _: () = assert!(CONNECTIONS_MAX_DEFAULT <= CONNECTIONS_MAX_LIMIT);
const _: () = assert!(GROUPS_MAX_DEFAULT <= GROUPS_MAX_LIMIT);
const _: () = assert!(PRODUCER_ID_EXPIRY_MS_MIN <= PRODUCER_ID_EXPIRY_MS_DEFAULT);
const _: () = assert!(PRODUCER_ID_EXPIRY_MS_DEFAULT <= PRODUCER_ID_EXPIRY_MS_MAX);
const _: () = assert!(OPEN_SEGMENTS_MAX_DEFAULT <= OPEN_SEGMENTS_MAX_LIMIT);
const _: () = assert!(PARTITIONS_MAX_DEFAULT <= PARTITIONS_MAX_LIMIT);
const _: () = assert!(SEGMENT_BYTES_FLAG_MIN <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!(SEGMENT_BYTES_DEFAULT <= SEGMENT_BYTES_MAX);
const _: () = assert!(CLEANUP_INTERVAL_MS_DEFAULT <= CLEANUP_INTERVAL_MS_MAX);
const _: () = assert!(GROUP_OFFSETS_RETENTION_MS_DEFAULT <= GROUP_OFFSETS_RETENTION_MS_MAX);
const _: () = assert!(SPIN_BEFORE_PARK_US_DEFAULT <= SPIN_BEFORE_PARK_US_MAX);
const _: () = assert!(QUOTA_BURST_MS_DEFAULT >= 1 && QUOTA_BURST_MS_DEFAULT <= QUOTA_BURST_MS_MAX);
const _: () =
    assert!(QUOTA_THROTTLE_MAX_MS_DEFAULT >= 1 && QUOTA_THROTTLE_MAX_MS_DEFAULT <= QUOTA_THROTTLE_MAX_MS_MAX);
// A bucket's nanoseconds stay far inside u64: a largest batch at 1 byte/s
// is 2^26 s, and burst plus the longest throttle are minutes.
const _: () = assert!((BATCH_BYTES_MAX as u64) < u64::MAX / 1_000_000_000);
const _: () = assert!((QUOTA_BURST_MS_MAX + QUOTA_THROTTLE_MAX_MS_MAX) < u64::MAX / 1_000_000 / 4);
// A largest frame fits the shard's request budget (`validate` refuses less).
const _: () = assert!(FRAME_BYTES_MAX_DEFAULT <= REQUEST_SHARD_BYTES_DEFAULT);
// A largest HTTP body fits the shard's request budget with room for others.
const _: () = assert!(HTTP_BODY_BYTES_MAX_DEFAULT <= REQUEST_SHARD_BYTES_DEFAULT);
// The default `--response-connection-bytes` (twice `--fetch-bytes-max`)
// is in its range.
const _: () = assert!(2 * FETCH_BYTES_MAX_DEFAULT <= REQUEST_SHARD_BYTES_LIMIT);

// --- Listen: accepting connections (listen/listener.rs) -----------------------

/// Pending connections the kernel queues per shard before accept: a burst
/// of reconnecting clients waits there instead of being refused.
pub const LISTEN_BACKLOG_CONNECTIONS: i32 = 1024;
/// First pause after a failed accept (out of descriptors): short, as one
/// may free at once.
pub const ACCEPT_BACKOFF_MIN_MS: u64 = 10;
/// Longest pause between accepts while they keep failing: a connection
/// waits in the kernel's queue at most this long after a descriptor frees.
pub const ACCEPT_BACKOFF_MAX_MS: u64 = 1_000;

// The backoff doubles from its first pause up to its longest.
const _: () = assert!(ACCEPT_BACKOFF_MIN_MS <= ACCEPT_BACKOFF_MAX_MS);

// --- Listen: Kafka connections (listen/kafka/) -------------------------------

/// Requests one Kafka connection has in flight by default
/// (`--kafka-requests-inflight-max`): librdkafka keeps at most 5 produce
/// requests and one fetch in flight per broker; the rest is headroom for
/// pipelining clients, each answer held until those before it are written.
pub const KAFKA_INFLIGHT_REQUESTS_DEFAULT: usize = 64;
/// The most `--kafka-requests-inflight-max` may be.
pub const KAFKA_INFLIGHT_REQUESTS_LIMIT: usize = 65_536;
/// Largest Kafka frame before SASL authentication, where `--auth
/// required`: ApiVersions, SaslHandshake and SaslAuthenticate are small,
/// so an unauthenticated client cannot make the broker buffer more.
pub const KAFKA_PRE_AUTH_FRAME_BYTES_MAX: usize = 64 << 10;
/// A Kafka connection's read buffer between frames: frames are read
/// whole into their own buffer; this is what is kept for the next
/// length prefix and small frames.
pub const KAFKA_READ_BYTES: usize = 64 << 10;
/// Rounds a ListOffsets "max timestamp" (-3) waits, each up to
/// [`WAIT_MS_MAX`], for a newer timestamp's record to become durable
/// before answering `unavailable`: only a steady stream of ever newer,
/// not yet durable timestamps uses them all.
pub const KAFKA_MAX_TIMESTAMP_ROUNDS: usize = 4;

const _: () = assert!(KAFKA_INFLIGHT_REQUESTS_DEFAULT <= KAFKA_INFLIGHT_REQUESTS_LIMIT);

// --- Listen: binary connections (listen/binary/) ------------------------------

/// Largest frame before the handshake: the largest valid Hello (header,
/// two versions, a client id and an API key of up to 65,535 bytes each).
/// A frame's header costs a client 16 bytes; buffering what it announces
/// costs the broker up to `--frame-bytes-max`, so an unauthenticated
/// client may not announce more than a Hello can be.
pub const HELLO_FRAME_BYTES_MAX: usize =
    es_protocol::frame::HEADER_BYTES + 2 + 2 + 2 * (2 + u16::MAX as usize);
/// Frames at least this large, after the handshake, are charged to the
/// shard's request budget (`--request-shard-bytes`, shard/budget.rs) from
/// when their header arrives until their request is handled: a connection
/// whose next such frame does not fit waits, unread, in turn. Smaller
/// frames are not (their bytes are bounded by the connection's read buffer
/// and its requests in flight), so that small requests (fetches, metadata,
/// groups) always flow; nor is a frame before the handshake (at most
/// [`HELLO_FRAME_BYTES_MAX`]). Fetch answers are charged on their own
/// ([`FETCH_CHARGE_BYTES_MIN`]).
pub const CHARGED_FRAME_BYTES_MIN: usize = 64 << 10;
/// A ProduceBatch frame at least this large has its batch read straight
/// into page-aligned memory of its own (es-storage's `ReceivingBatch`),
/// which storage then queues, and writes, as it is: no copy out of the read
/// buffer, none into a write buffer. Below it, copying is cheaper than a
/// buffer.
pub const DIRECT_BATCH_BYTES_MIN: usize = 64 << 10;
/// While a large batch arrives and the socket holds nothing, the read that
/// waits for more takes at most this much (zeroed first); whatever else
/// has arrived by then is received unzeroed: little zeroing, one wake-up.
pub const WAIT_READ_BYTES: usize = 4 << 10;
/// A connection's read buffer while it waits for a request: what an idle
/// connection holds (10,000 idle connections: 160 MiB). Grown as frames
/// arrive, back to this size whenever the connection has to wait again.
pub const READ_IDLE_BYTES: usize = 16 << 10;
/// The most a read buffer keeps between frames while requests keep
/// arriving: a buffer grown past it for one large frame shrinks back to it
/// once that frame is handled, while a busy connection reads many frames
/// per call.
pub const READ_CHUNK_BYTES: usize = 256 << 10;
/// Free bytes every read of a connection is given at least: no read of a
/// few bytes at a time.
pub const READ_ROOM_MIN_BYTES: usize = 4 << 10;
/// Responses that are ready together are gathered into one write, up to
/// this many bytes: few syscalls without holding a large buffer.
pub const WRITE_COALESCE_BYTES: usize = 1 << 20;
/// A part of a response at least this large is written as it is (after
/// what was gathered before it) instead of being copied into the gathered
/// write: one more syscall costs less than copying it.
pub const WRITE_DIRECT_BYTES_MIN: usize = 64 << 10;
/// Partition requests in a row for one other shard after which a
/// connection moves there: a producer or consumer of one partition moves
/// within its first requests, while one that alternates between shards
/// never reaches it.
pub const MOVE_AFTER_REQUESTS: u32 = 8;

// A batch received into memory of its own is always charged to the budget.
const _: () = assert!(CHARGED_FRAME_BYTES_MIN <= DIRECT_BATCH_BYTES_MIN);
// At the default frame limit large frames exist, so the budget bounds them.
const _: () = assert!(CHARGED_FRAME_BYTES_MIN <= FRAME_BYTES_MAX_DEFAULT);
// A read has room; an idle buffer is the smallest a busy one shrinks to.
const _: () = assert!(READ_ROOM_MIN_BYTES <= READ_IDLE_BYTES);
const _: () = assert!(READ_IDLE_BYTES <= READ_CHUNK_BYTES);
// A part copied into a gathered write is smaller than that write's bound.
const _: () = assert!(WRITE_DIRECT_BYTES_MIN <= WRITE_COALESCE_BYTES);

// --- Listen: HTTP (listen/http/) ----------------------------------------------

/// A client must send its request headers within this time; a keep-alive
/// connection waits this long for its next request (or
/// `--connection-idle-ms`, if shorter): a slow client cannot hold a
/// connection with a trickle of header bytes.
pub const HEADER_READ_TIMEOUT_MS: u64 = 30_000;
/// Request bodies at least this large are charged to the shard's budget
/// (`--request-shard-bytes`) while they arrive and until their request is
/// handled, as binary frames of that size are: many partial bodies cannot
/// pin more than the budget. Smaller ones are bounded by hyper's buffers
/// per connection.
pub const CHARGED_BODY_BYTES_MIN: usize = 64 << 10;

// At the default body limit large bodies exist, so the budget bounds them.
const _: () = assert!(CHARGED_BODY_BYTES_MIN <= HTTP_BODY_BYTES_MAX_DEFAULT);

// --- Fetch (ops/fetch.rs) -----------------------------------------------------

/// Longest long-poll a fetch may ask for (`wait_ms`): long enough that an
/// idle consumer asks a few times a minute, short enough that a lost
/// client's request ends. The CLI restates it (`BROKER_WAIT_MS_MAX`).
pub const WAIT_MS_MAX: u64 = 30_000;
/// Default `max_records` of a fetch: a page a consumer handles at once.
pub const FETCH_RECORDS_DEFAULT: u64 = 500;
/// Largest `max_records` of a fetch: bounds the records one answer holds
/// however small they are. The CLI restates it (its `FETCH_RECORDS_MAX`).
pub const FETCH_RECORDS_MAX: u64 = 10_000;
/// Default `max_bytes` of a fetch (capped by `--fetch-bytes-max`): a page
/// large enough for throughput, small next to the budgets.
pub const FETCH_BYTES_DEFAULT: u64 = 1 << 20;
/// A fetch's answer is charged at least this much before it is read:
/// storage reads at least one chunk of `READ_CHUNK_BYTES_MIN` for a fetch,
/// whatever its `max_bytes`, and an answer's buffers are slices of those
/// reads.
pub const FETCH_CHARGE_BYTES_MIN: usize = 64 << 10;
/// A fetch whose first batch keeps being larger than what was charged for
/// it (the partition changes under it each time) gives up after this many
/// reads: a retry by the client then costs no more than these did.
pub const FETCH_READS_MAX: usize = 4;

// A fetch without `max_records` is one the broker accepts.
const _: () = assert!(FETCH_RECORDS_DEFAULT <= FETCH_RECORDS_MAX);
// A fetch without `max_bytes` is not capped at the default limit.
const _: () = assert!(FETCH_BYTES_DEFAULT <= FETCH_BYTES_MAX_DEFAULT as u64);
// An answer of the default size fits a frame of the default limit.
const _: () = assert!(FETCH_BYTES_DEFAULT as usize + FRAME_PREFIX_BYTES <= FRAME_BYTES_MAX_DEFAULT);
// The charge covers the smallest read storage makes for a fetch.
const _: () = assert!(READ_CHUNK_BYTES_MIN <= FETCH_CHARGE_BYTES_MIN);
// The smallest charge fits a connection's default response budget
// (`--response-connection-bytes`, at least `--fetch-bytes-max`).
const _: () = assert!(FETCH_CHARGE_BYTES_MIN <= FETCH_BYTES_MAX_DEFAULT);

// --- Topics (topics/) ---------------------------------------------------------

/// Most partitions one topic may have: each is a directory, open files and
/// memory on its shard.
pub const TOPIC_PARTITIONS_MAX: u32 = 1024;
/// Longest topic (and group) name (Kafka's limit: it must fit a file name
/// with room).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// Smallest `segment_bytes` a create or a config change may set: below a
/// kilobyte each segment holds a record or two, and a partition becomes a
/// pile of files (each costing an index, memory and, when read, a
/// descriptor). Topics created with less before keep their value.
pub const SEGMENT_BYTES_MIN: u64 = 1024;
/// Smallest `segment_ms` a create or a config change may set: at most one
/// roll a second per partition, however busy.
pub const SEGMENT_MS_MIN: u64 = 1000;
/// Shares of the cleanup task queue, against 1000 for the default queue
/// that serves clients: under contention cleanup gets about a tenth of the
/// shard, and all of it when the shard is otherwise idle.
pub const CLEANUP_SHARES: usize = 100;

// A topic of the most partitions can be created under the default limit.
const _: () = assert!(TOPIC_PARTITIONS_MAX as usize <= PARTITIONS_MAX_DEFAULT);
// New topics' `segment_bytes` (the flag's, at least its minimum) is valid.
const _: () = assert!(SEGMENT_BYTES_MIN <= SEGMENT_BYTES_FLAG_MIN);

// --- Groups (groups/) ---------------------------------------------------------

/// Shortest session timeout a member may ask for: short enough for tests,
/// long enough for a heartbeat to arrive.
pub const SESSION_TIMEOUT_MS_MIN: u64 = 100;
/// Longest session timeout: long enough for a consumer that processes in
/// big steps, short enough that a dead member's partitions move on.
pub const SESSION_TIMEOUT_MS_MAX: u64 = 300_000;
/// Session timeout of a member that asks for none: a dead member's
/// partitions move on within seconds.
pub const SESSION_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Most members of one group: bounds a group's state and each rebalance.
pub const MEMBERS_MAX: usize = 1000;
/// How often a shard looks for members whose session timed out: a member
/// is expired at most this late.
pub const EXPIRY_CHECK_MS: u64 = 50;
/// Groups whose offsets expire handled per append on a cleanup tick: each
/// waits for one fsync, so many expiries cost few; the rest go in the next
/// batch of the same pass.
pub const EXPIRE_BATCH_GROUPS: usize = 1024;
/// Largest record the groups log accepts: a snapshot of one group holds
/// all its offsets, 12 bytes per partition; a larger `len` is garbage.
pub const GROUP_LOG_RECORD_BYTES_MAX: usize = 64 << 20;
/// A groups log compacts once it has grown this much past its last
/// snapshot (and to twice its size): small enough that a broker with few
/// groups keeps a small file, large enough that a compaction is rare next
/// to commits.
pub const GROUP_LOG_COMPACT_BYTES_MIN: u64 = 1 << 20;

// A member that asks for no timeout gets one the broker accepts.
const _: () = assert!(SESSION_TIMEOUT_MS_MIN <= SESSION_TIMEOUT_MS_DEFAULT);
const _: () = assert!(SESSION_TIMEOUT_MS_DEFAULT <= SESSION_TIMEOUT_MS_MAX);
// A member is expired at most one session late, even at the shortest.
const _: () = assert!(EXPIRY_CHECK_MS <= SESSION_TIMEOUT_MS_MIN);
// At the largest `--partitions-max`, a snapshot of a group with an offset
// on every partition, each in a topic of its own with a longest name, fits
// a record (encoding one past it panics).
const _: () = assert!(
    crate::groups::log::HEADER_BYTES
        + TOPIC_NAME_BYTES_MAX
        + 4
        + PARTITIONS_MAX_LIMIT * (1 + TOPIC_NAME_BYTES_MAX + 4 + 4 + 8)
        <= GROUP_LOG_RECORD_BYTES_MAX
);

// --- Producers (producers/) ---------------------------------------------------

/// Batches remembered per producer and partition. Kafka keeps 5; a client
/// with up to this many batches in flight gets every retry deduplicated
/// (Redpanda learned that refusing an old retry instead makes clients
/// write twice). The CLI restates it (`BROKER_PRODUCER_WINDOW_BATCHES`).
pub const PRODUCER_WINDOW_BATCHES: usize = 5;
/// Stale ids each shard names per expiry sweep: bounds the lists the sweep
/// moves between shards; more wait for the next tick.
pub const SWEEP_IDS_PER_SHARD_MAX: usize = 65_536;
/// Ids reserved by one registry write: as Kafka's producer id blocks, so
/// that issuing an id costs an fsync once per block; a crash skips at most
/// this many ids of the 2^63.
pub const ID_BLOCK_IDS: i64 = 1000;
/// Issue-time marks kept over one expiry: an id that never wrote expires
/// at most 1/this of the expiry (plus a cleanup interval) late.
pub const ISSUE_MARKS_MAX: i64 = 128;
/// Ids skipped past the largest one the partitions know when the registry
/// was lost: room for ids that were issued but never reached a partition
/// still on disk (a producer that had not written yet, or wrote only to
/// topics since deleted), whose holders may still be running.
pub const LOST_REGISTRY_GAP_IDS: i64 = 1 << 32;
/// How often the first registry read looks whether every shard has opened
/// its partitions: start-up waits little past the last one.
pub const REGISTRY_READY_POLL_MS: u64 = 20;
/// Bytes read per step while scanning a log for producer batches (after a
/// partition's last producer snapshot): few reads, bounded memory.
pub const PRODUCER_SCAN_READ_BYTES: usize = 4 << 20;
/// Producer snapshots a shard writes at once (rolls and expiry sweeps can
/// ask for one per partition together): each holds a file open and two
/// fsyncs.
pub const SNAPSHOT_WRITES_PER_SHARD_MAX: u64 = 4;

// --- Shards (shard/, ops/open.rs) ---------------------------------------------

/// Cross-shard channel depth per pair of shards: enough for bursts of
/// forwarded requests; a full channel makes the sender wait (backpressure).
pub const MESH_CHANNEL_DEPTH: usize = 1024;
/// How often a connecting shard wakes to look for peers that connected
/// without waking it: start-up is not held back noticeably.
pub const CONNECT_TICK_MS: u64 = 1;
/// Memory glommio registers per shard for io_uring buffers. Kept small:
/// direct segment writes that fit take their staging buffer from it (fixed
/// buffers), larger ones come from the heap, and the locked-memory limit
/// (`ulimit -l`) is shared by all shards.
pub const IO_MEMORY_BYTES: usize = 256 << 10;
/// Partitions a shard opens, or closes, at once: their file operations
/// (io_uring, the blocking pool) overlap instead of adding up, so a start
/// or a stop with thousands of partitions takes a fraction of the time one
/// by one would (docs/benchmarks.md); each holds a few descriptors for a
/// moment ([`RESERVE_SHARD_DESCRIPTORS`]).
pub const OPEN_PARALLEL_PARTITIONS: usize = 32;
/// How often a shard looks for the shutdown flag set by the signal thread:
/// a stop starts within this.
pub const SHUTDOWN_POLL_MS: u64 = 20;
/// Longest wait for open connections to finish at shutdown: a long-poll
/// ends well within it.
pub const SHUTDOWN_DRAIN_MS: u64 = 30_000;
/// How often shard 0 runs the Prometheus exporter's upkeep (draining its
/// histograms' samples into their buckets between scrapes).
pub const METRICS_UPKEEP_MS: u64 = 5_000;

// glommio rounds io memory up to whole pages and at least 64 KiB: the size
// set is the size registered.
const _: () = assert!(IO_MEMORY_BYTES.is_multiple_of(4096) && IO_MEMORY_BYTES >= 64 << 10);
// The smallest locked-memory limit the broker accepts holds a shard's
// registered buffers.
const _: () = assert!(IO_MEMORY_BYTES as u64 <= MEMLOCK_BYTES_MIN);
// The drain at shutdown looks at least once.
const _: () = assert!(SHUTDOWN_POLL_MS <= SHUTDOWN_DRAIN_MS);

// --- Auth: the key store (auth/, docs/security.md "Limits") -----------------

// Keys, grants per key and key names (and the key file's size,
// es_keys::limits::KEY_FILE_BYTES_MAX): es-keys' bounds,
// shared with es-tools (broker/keys/src/limits.rs).
pub use es_keys::limits::{GRANTS_PER_KEY_MAX, KEYS_MAX, KEY_NAME_CHARS_MAX};
/// Longest grant name for topics and groups: their own name limit.
pub const GRANT_NAME_CHARS_MAX: usize = 249;
/// Longest grant name for subjects: the registry's subject limit.
pub const SUBJECT_NAME_BYTES_MAX: usize = 255;
// A grant's topic or group name is no longer than the names it matches.
const _: () = assert!(GRANT_NAME_CHARS_MAX == TOPIC_NAME_BYTES_MAX);

// --- Schema registry (registry/, docs/registry.md "Limits") -------------------

/// Default `--registry-schema-bytes-max`: 1 MiB, Confluent's own default
/// (`schema.max.bytes`); real schemas are kilobytes.
pub const REGISTRY_SCHEMA_BYTES_MAX_DEFAULT: usize = 1 << 20;
/// Largest `--registry-schema-bytes-max`: a schema's record (the schema
/// JSON-escaped, at most six bytes per byte, and its fields) must fit one
/// batch of `_schemas`.
pub const REGISTRY_SCHEMA_BYTES_MAX_LIMIT: usize = 4 << 20;
/// Bytes a registry request body may hold per byte of schema allowed: a
/// schema travels JSON-escaped inside the body (a quote becomes two
/// bytes), so a body up to this many times `--registry-schema-bytes-max`
/// (plus [`REGISTRY_BODY_BYTES_SLACK`]) is read and its schema measured;
/// a larger one is refused `schema_too_large` (42209) unread.
pub const REGISTRY_BODY_BYTES_PER_SCHEMA_BYTE: usize = 4;
/// Bytes of a registry request body beyond its schema: references,
/// metadata and the JSON around them.
pub const REGISTRY_BODY_BYTES_SLACK: usize = 64 << 10;
/// Most versions one subject holds, soft-deleted ones included (the
/// spec's bound; Confluent has none): a transitive check reads each.
pub const REGISTRY_VERSIONS_PER_SUBJECT_MAX: usize = 1000;
/// Most subjects the registry holds: bounds its maps and a list's answer.
pub const REGISTRY_SUBJECTS_MAX: usize = 100_000;
/// Most bytes of distinct schemas the registry holds in memory (each id's
/// schema once, however many subjects share it): a register past it is
/// refused `operation_not_permitted` (42205).
pub const REGISTRY_STORE_BYTES_MAX: usize = 1 << 30;
/// Most schemas one registration may reference, counted transitively:
/// each is parsed with it.
pub const REGISTRY_REFERENCES_MAX: usize = 100;
/// Bytes of `_schemas` records appended in one batch by one registry
/// change (a subject's soft delete rewrites each of its versions): a
/// change larger than this goes in several batches, one after the other.
pub const REGISTRY_APPEND_BATCH_BYTES: usize = 16 << 20;
/// Bytes of schema text one `GET /schemas` answer holds (at least one
/// schema, whatever its size): the answer is built in memory, so a large
/// registry is listed in pages (`offset`, `limit`).
pub const REGISTRY_LIST_BYTES_MAX: usize = 16 << 20;
/// Bytes read per step while replaying `_schemas` at start.
pub const REGISTRY_REPLAY_READ_BYTES: usize = 4 << 20;
/// How often the registry's shard looks whether the shards have opened
/// their partitions, before it replays `_schemas`.
pub const REGISTRY_LOAD_POLL_MS: u64 = 20;

// A schema at the limit, escaped, fits a body the registry reads.
const _: () = assert!(REGISTRY_BODY_BYTES_PER_SCHEMA_BYTE >= 2);
// An append step may pass its bound by one largest record, and still fit
// a batch.
const _: () = assert!(
    REGISTRY_APPEND_BATCH_BYTES + 6 * REGISTRY_SCHEMA_BYTES_MAX_LIMIT + REGISTRY_BODY_BYTES_SLACK
        <= BATCH_BYTES_MAX
);
const _: () = assert!(REGISTRY_SCHEMA_BYTES_MAX_DEFAULT <= REGISTRY_SCHEMA_BYTES_MAX_LIMIT);
// A subject name's limit is the grants' (auth/grants.rs).
const _: () = assert!(SUBJECT_NAME_BYTES_MAX == 255);

// --- Operate: process limits, start-up, logging, memory (operate/) ------------

/// Locked memory glommio requires of the process before it starts any
/// executor (glommio 0.9's `MIN_MEMLOCK_LIMIT`, whatever the shard count):
/// the soft limit is raised to it when the hard limit allows.
pub const MEMLOCK_BYTES_MIN: u64 = 512 << 10;
/// Descriptors of a written active segment: its log for reads, its
/// direct-I/O writer, and the writer's duplicate for the disk threads.
pub const ACTIVE_SEGMENT_DESCRIPTORS: u64 = 3;
/// Descriptors of a closed segment in the shard's cache: its log.
pub const CLOSED_SEGMENT_DESCRIPTORS: u64 = 1;
/// Descriptors of the process outside the shards: stdio, the data-dir
/// lock, the logging and signal threads, and what start-up reads.
pub const RESERVE_BASE_DESCRIPTORS: u64 = 64;
/// Descriptors per shard beyond partitions and connections: its io_uring
/// rings and eventfds, its two listeners and channel ends, and the files
/// its operations hold for a moment (index files, `meta.json`, producer
/// snapshots, group offsets, directories being fsynced, compaction's
/// inputs), with up to [`OPEN_PARALLEL_PARTITIONS`] partitions opening at
/// once.
pub const RESERVE_SHARD_DESCRIPTORS: u64 = 256;
/// Highest soft `RLIMIT_NOFILE` the broker sets itself: Linux's default
/// `nr_open` (a hard limit of `unlimited` cannot be set as such).
pub const NOFILE_CEILING_DESCRIPTORS: u64 = 1 << 20;
/// How long start-up retries taking the data-dir lock and the port: a
/// broker restarted at once waits out the one before it.
pub const START_RETRY_MS: u64 = 10_000;
/// Lines buffered for the log writer thread; past it new lines are dropped
/// (and counted by the writer) rather than block a shard.
pub const LOG_LINES_BUFFERED_MAX: usize = 128 * 1024;
/// How often a shard collects its heap: a quiet shard's resident memory
/// falls back within about this long (plus mimalloc's purge delay) after a
/// burst.
pub const PURGE_INTERVAL_MS: u64 = 1_000;

// Each partition opening at once holds some of the shard's reserve.
const _: () = assert!(OPEN_PARALLEL_PARTITIONS as u64 <= RESERVE_SHARD_DESCRIPTORS);
// At the defaults, even with the most shards, the descriptor budget
// (operate/nofile.rs) is one the broker can raise its limit to: the closed
// segments' share per shard is rounded up, at most one more per shard.
const _: () = assert!(
    PARTITIONS_MAX_DEFAULT as u64 * ACTIVE_SEGMENT_DESCRIPTORS
        + (OPEN_SEGMENTS_MAX_DEFAULT + SHARDS_MAX) as u64 * CLOSED_SEGMENT_DESCRIPTORS
        + CONNECTIONS_MAX_DEFAULT as u64
        + RESERVE_BASE_DESCRIPTORS
        + RESERVE_SHARD_DESCRIPTORS * SHARDS_MAX as u64
        <= NOFILE_CEILING_DESCRIPTORS
);

// --- Cluster mode (operate/cluster_config.rs, cluster/) -----------------------

/// Most nodes in `--peers`: every node votes in the controller group and a
/// larger quorum only slows each commit (more nodes would join as
/// learners, a later step).
pub const CLUSTER_NODES_MAX: usize = 9;
/// `--raft-heartbeat-ms`: a leader's heartbeat interval, in milliseconds
/// (Redpanda's 150): a tenth of the election timeout.
pub const RAFT_HEARTBEAT_MS_DEFAULT: u64 = 150;
/// `--raft-election-timeout-ms`, in milliseconds: generous, so that a
/// loaded 2-core box does not see spurious elections (the spec's R3).
pub const RAFT_ELECTION_TIMEOUT_MS_DEFAULT: u64 = 1500;
/// Largest `--raft-election-timeout-ms` (and heartbeat), in milliseconds:
/// a minute without a leader is an outage, not a setting.
pub const RAFT_ELECTION_TIMEOUT_MS_MAX: u64 = 60_000;
/// Largest `--raft-heartbeat-coalesce-us`, in microseconds: well under
/// the smallest sensible heartbeat interval.
pub const RAFT_HEARTBEAT_COALESCE_US_MAX: u64 = 100_000;
/// `--raft-entry-bytes-max`, in bytes: one entry per round gathers this
/// much of concurrent produces (a larger batch goes alone).
pub const RAFT_ENTRY_BYTES_MAX_DEFAULT: usize = 4 << 20;
/// `--raft-proposals-in-flight`, entries: two lets one entry's leader
/// flush overlap the one before's replication (the spec's §2.3).
pub const RAFT_PROPOSALS_IN_FLIGHT_DEFAULT: usize = 2;
/// Largest `--raft-proposals-in-flight`, entries: openraft's unbounded
/// api channel stays short.
pub const RAFT_PROPOSALS_IN_FLIGHT_MAX: usize = 64;
/// Smallest `--raft-inflight-shard-bytes`: one largest raft frame fits.
pub const RAFT_INFLIGHT_SHARD_BYTES_MIN: usize = es_raft::limits::FRAME_BYTES_MAX;
/// Largest `--raft-inflight-shard-bytes`, in bytes (16 GiB): memory a
/// shard may hold in raft frames.
pub const RAFT_INFLIGHT_SHARD_BYTES_LIMIT: usize = 16 << 30;
/// `--replica-lag-ms`, milliseconds a follower may be behind and still
/// count as in sync (Kafka's `replica.lag.time.max.ms` is 30 s; 10 s
/// reports trouble sooner).
pub const REPLICA_LAG_MS_DEFAULT: u64 = 10_000;
/// Largest `--replica-lag-ms`: an hour.
pub const REPLICA_LAG_MS_MAX: u64 = 3_600_000;
/// `--produce-timeout-ms`, milliseconds a produce waits for a majority
/// (Kafka's `request.timeout.ms` is 30 s).
pub const PRODUCE_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Largest `--produce-timeout-ms`: ten minutes.
pub const PRODUCE_TIMEOUT_MS_MAX: u64 = 600_000;

/// Leader reports in one LeaderReport frame (cluster/leader_report.rs):
/// a shard leading more groups sends several frames; at most ~200 bytes
/// each, so a frame stays under 1 MiB.
pub const LEADER_REPORTS_PER_FRAME_MAX: usize = 4096;
/// Peers' leader reports a shard holds, one per group at most: every
/// partition a cluster may have (a report for a group this node never
/// heard of still counts; expired ones are dropped first).
pub const LEADER_REPORTS_HELD_MAX: usize = PARTITIONS_MAX_LIMIT;

const _: () = assert!(RAFT_HEARTBEAT_MS_DEFAULT < RAFT_ELECTION_TIMEOUT_MS_DEFAULT);
const _: () = assert!(RAFT_ELECTION_TIMEOUT_MS_DEFAULT <= RAFT_ELECTION_TIMEOUT_MS_MAX);
const _: () = assert!(es_raft::limits::HEARTBEAT_COALESCE_US_DEFAULT <= RAFT_HEARTBEAT_COALESCE_US_MAX);
const _: () = assert!(RAFT_ENTRY_BYTES_MAX_DEFAULT <= BATCH_BYTES_MAX);
const _: () = assert!(RAFT_PROPOSALS_IN_FLIGHT_DEFAULT <= RAFT_PROPOSALS_IN_FLIGHT_MAX);
const _: () = assert!(RAFT_INFLIGHT_SHARD_BYTES_MIN <= es_raft::limits::INFLIGHT_SHARD_BYTES_DEFAULT);
const _: () = assert!(es_raft::limits::INFLIGHT_SHARD_BYTES_DEFAULT <= RAFT_INFLIGHT_SHARD_BYTES_LIMIT);
const _: () = assert!(REPLICA_LAG_MS_DEFAULT <= REPLICA_LAG_MS_MAX);
const _: () = assert!(PRODUCE_TIMEOUT_MS_DEFAULT <= PRODUCE_TIMEOUT_MS_MAX);
// A full LeaderReport frame (4 bytes, then per report 42 bytes and 17 per
// voter) fits a raft frame.
const _: () = assert!(
    4 + LEADER_REPORTS_PER_FRAME_MAX * (42 + 17 * CLUSTER_NODES_MAX) <= es_raft::limits::FRAME_BYTES_MAX
);
