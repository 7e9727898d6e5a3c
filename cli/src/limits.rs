//! Every bound the `es` command keeps, its unit last, with why that value,
//! and the relations between them checked at compile time.
//!
//! The broker's own bounds that these must respect are restated here (the
//! CLI depends on the protocol, not on the broker) and named as such.

use es_protocol::limits::FRAME_BYTES_MAX_DEFAULT;
use es_protocol::requests::fetch::FRAME_PREFIX_BYTES;

// --- The broker's bounds the CLI stays within -------------------------------

/// The broker's longest long-poll (`WAIT_MS_MAX` in broker/src/limits.rs):
/// a longer `wait_ms` is refused.
pub const BROKER_WAIT_MS_MAX: u32 = 30_000;
/// Batches per partition the broker remembers for each idempotent producer
/// (`PRODUCER_WINDOW_BATCHES` in broker/src/limits.rs): a retry older than
/// that is not recognised.
pub const BROKER_PRODUCER_WINDOW_BATCHES: usize = 5;

// --- es produce ---------------------------------------------------------------

/// Send a batch once this much is buffered (less under a small frame limit):
/// large enough that a batch's fsync is shared by many records.
pub const PRODUCE_BATCH_BYTES_MAX: usize = 1 << 20;
/// Send a batch once its first record waited this long; also how long stdin
/// may stay quiet before what is buffered is flushed: short enough that an
/// interactive user sees the ack at once.
pub const PRODUCE_LINGER_MS: u64 = 10;
/// Batches awaiting their acks: enough to keep the broker's group commit
/// busy while the next batch fills.
pub const PRODUCE_BATCHES_INFLIGHT_MAX: usize = 8;
/// Flush (and report) at least every this many records, so that the acks
/// kept in memory stay bounded on endless input.
pub const PRODUCE_FLUSH_RECORDS_MAX: u64 = 1 << 20;
/// Unacknowledged batches per partition of the idempotent producer: the
/// broker's window, so that every retry is recognised.
pub const PARTITION_BATCHES_INFLIGHT_MAX: usize = BROKER_PRODUCER_WINDOW_BATCHES;
/// Reconnect attempts in a row before giving up: 30 span about 28 s, a
/// broker's restart or several elections.
pub const RECONNECT_ATTEMPTS_MAX: u32 = 30;
/// The first reconnect backoff; each attempt doubles it.
pub const RECONNECT_BACKOFF_FIRST_MS: u64 = 100;
/// The longest reconnect backoff: a broker back after a restart, or a new
/// leader after a failover, is found at most this late.
pub const RECONNECT_BACKOFF_MAX_MS: u64 = 1_000;

// --- es consume ---------------------------------------------------------------

/// Records per fetch: the most the broker gives (its `FETCH_RECORDS_MAX`);
/// `max_bytes` bounds the page.
pub const FETCH_RECORDS_MAX: u64 = 10_000;
/// Bytes per fetch with few partitions.
pub const FETCH_BYTES_MAX: u64 = 1 << 20;
/// Bytes per fetch with many partitions: still a useful page.
pub const FETCH_BYTES_MIN: u64 = 64 << 10;
/// Bytes one round of fetches (or every follower at once) may ask for: the
/// per-partition fetch size shrinks with the partitions to stay under it.
pub const FETCH_ROUND_BYTES_MAX: u64 = 32 << 20;
/// How long one long-poll waits at the high watermark (`--follow`).
pub const FOLLOW_WAIT_MS: u32 = 10_000;
/// How long one long-poll of a group member waits (`--group --follow`):
/// short, so that a rebalance or a signal is noticed within about a second.
pub const GROUP_FOLLOW_WAIT_MS: u32 = 1_000;

const _: () = assert!(FETCH_BYTES_MIN <= FETCH_BYTES_MAX);
const _: () = assert!(FETCH_BYTES_MAX <= FETCH_ROUND_BYTES_MAX);
// A fetch answer at the largest size fits the default frame.
const _: () = assert!(FETCH_BYTES_MAX as usize + FRAME_PREFIX_BYTES <= FRAME_BYTES_MAX_DEFAULT);
// A produce batch fits the default frame with room for the request's fields.
const _: () = assert!(PRODUCE_BATCH_BYTES_MAX <= FRAME_BYTES_MAX_DEFAULT / 2);
const _: () = assert!(GROUP_FOLLOW_WAIT_MS <= FOLLOW_WAIT_MS);
const _: () = assert!(FOLLOW_WAIT_MS <= BROKER_WAIT_MS_MAX);
const _: () = assert!(RECONNECT_BACKOFF_FIRST_MS <= RECONNECT_BACKOFF_MAX_MS);
const _: () = assert!(PARTITION_BATCHES_INFLIGHT_MAX <= BROKER_PRODUCER_WINDOW_BATCHES);

// --- es schema (the schema registry) -------------------------------------------

/// The largest `--registry-schema-bytes-max` the broker takes
/// (`REGISTRY_SCHEMA_BYTES_MAX_LIMIT` in broker/src/limits.rs): a schema
/// file larger than this is refused before it is sent.
pub const BROKER_REGISTRY_SCHEMA_BYTES_MAX_LIMIT: usize = 4 << 20;
/// Largest registry answer read: a list of every subject (100,000 names of
/// up to 255 bytes) or a largest schema, with room.
pub const REGISTRY_ANSWER_BYTES_MAX: usize = 64 << 20;
/// Seconds a registry connection may take to connect, or stay silent
/// while its answer is awaited: a stuck registry fails the command.
pub const REGISTRY_TIMEOUT_SECS: u64 = 30;

// An answer holds a largest schema, escaped, with room.
const _: () = assert!(6 * BROKER_REGISTRY_SCHEMA_BYTES_MAX_LIMIT <= REGISTRY_ANSWER_BYTES_MAX);
