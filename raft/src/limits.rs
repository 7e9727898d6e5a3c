//! Every bound es-raft keeps, its unit last, with why that value, and the
//! relations between them checked at compile time.
//!
//! The transport's wire layout (`transport/frame.rs`, `preamble.rs`) is the
//! format, not a bound of it: it stays with its codec. Defaults a flag can
//! change (phase 2a) are `*_DEFAULT`; the rest are fixed.

use std::time::Duration;

// --- Frames -------------------------------------------------------------------

/// Largest raft frame, header included: the largest batch the format takes
/// (64 MiB, es-format's `BATCH_BYTES_MAX`) plus 64 KiB for the request's
/// own fields around it, so an entry of one largest batch still travels.
pub const FRAME_BYTES_MAX: usize = es_format::limits::BATCH_BYTES_MAX + FRAME_FIELDS_BYTES;
/// Room in a frame for the fields around an entry's batches.
pub const FRAME_FIELDS_BYTES: usize = 64 << 10;
/// Largest membership or controller command body in an entry: a membership
/// of thousands of node ids is a few tens of KiB; a command is small JSON.
pub const ENTRY_BODY_BYTES_MAX: usize = 1 << 20;
/// Largest error code or message in an Error frame: a code is a word, a
/// message one line.
pub const ERROR_TEXT_BYTES_MAX: usize = 4 << 10;
/// Most heartbeats in one Heartbeats frame: a flush sends the queue in
/// frames of at most this many (about 64 bytes each, so under 1 MiB).
pub const HEARTBEATS_PER_FRAME_MAX: usize = 16 << 10;

// --- The transport's defaults (flags in phase 2a) -----------------------------

/// `--raft-heartbeat-coalesce-us`: how long the first queued heartbeat
/// waits for others to the same peer, in microseconds: well under a
/// heartbeat interval (150 ms), long enough to gather a tick's heartbeats.
pub const HEARTBEAT_COALESCE_US_DEFAULT: u64 = 1000;
/// `--raft-append-bytes-max`: largest AppendEntries the transport sends
/// with more than one entry, in bytes: one round trip moves a useful
/// amount without holding a follower's flush behind a huge write.
pub const APPEND_BYTES_MAX_DEFAULT: usize = 4 << 20;
/// `--raft-inflight-shard-bytes`: bytes of raft frames being sent or
/// received on one shard at once (requests held until answered): the
/// transport waits for room, so a slow peer cannot grow a shard's memory.
pub const INFLIGHT_SHARD_BYTES_DEFAULT: usize = 256 << 20;

// --- Connections --------------------------------------------------------------

/// Time to open a TCP connection to a peer: a peer that is up answers in
/// far less; one that is down is reported so openraft backs off.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Time for the preamble and the TLS handshake of an accepted or opened
/// connection: a peer that says nothing is closed then.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// First wait after a failed connect before the next try.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest wait between connects to a peer that stays down: a restarted
/// peer is found within seconds.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

// One largest batch fits a frame with its fields.
const _: () = assert!(FRAME_BYTES_MAX > es_format::limits::BATCH_BYTES_MAX);
// A frame's length is a u32.
const _: () = assert!(FRAME_BYTES_MAX <= u32::MAX as usize);
// The shard's budget holds at least one largest frame, so one always goes.
const _: () = assert!(FRAME_BYTES_MAX <= INFLIGHT_SHARD_BYTES_DEFAULT);
// An AppendEntries of the default size fits a frame.
const _: () = assert!(APPEND_BYTES_MAX_DEFAULT <= FRAME_BYTES_MAX);
// A full Heartbeats frame (at most 64 bytes each) fits a frame.
const _: () = assert!(HEARTBEATS_PER_FRAME_MAX * 64 <= FRAME_BYTES_MAX);
// Backoff grows from its minimum to its maximum.
const _: () = assert!(RECONNECT_BACKOFF_MIN.as_millis() < RECONNECT_BACKOFF_MAX.as_millis());

// --- The controller group (raft0) ---------------------------------------------

/// Most partitions one CreateTopic may ask for: the assignment is built at
/// apply (a few dozen bytes a partition on every node), so a command must
/// not be able to ask for billions; the broker's own `--partitions-max`
/// ceiling (1 << 17) is the same.
pub const CONTROLLER_TOPIC_PARTITIONS_MAX: u32 = 1 << 17;
/// Replicas a topic gets when the command names none: three, or every
/// voter when there are fewer.
pub const CONTROLLER_REPLICATION_FACTOR_DEFAULT: u32 = 3;

/// Consumer groups with committed offsets in the controller at most: the
/// controller's state (and its snapshot) holds them all in memory.
pub const CONTROLLER_GROUPS_MAX: usize = 100_000;

/// Committed offsets one group holds at most (partitions it consumes).
pub const CONTROLLER_GROUP_OFFSETS_MAX: usize = 1 << 17;

/// Bytes of a group name at most (the broker's own rule is stricter).
pub const CONTROLLER_GROUP_NAME_BYTES_MAX: usize = 1024;

/// Producers one partition's idempotent window keeps at most: past it,
/// the producer whose last batch is oldest is forgotten (its next batch
/// is refused `out_of_order_sequence`, as after an expiry), so a
/// partition's window is bounded (about 200 bytes a producer).
pub const PRODUCER_WINDOW_PRODUCERS_MAX: usize = 10_000;

/// Batches of one producer a partition's window remembers: a retry of an
/// older one is `duplicate_sequence` (the broker's own window).
pub const PRODUCER_WINDOW_BATCHES: usize = 5;
/// Entries between two controller snapshots (openraft's
/// `LogsSinceLast`): the state is small JSON; a restart re-applies at most
/// this many entries past the last one.
pub const CONTROLLER_SNAPSHOT_EVERY_DEFAULT: u64 = 1000;
/// How long a proposal may wait for its command to be committed and
/// applied, in milliseconds, before the proposer is told its outcome is
/// unknown (a leader that lost its quorum waits forever otherwise).
pub const CONTROLLER_PROPOSE_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// How long a read barrier may wait, in milliseconds, for the leader's
/// committed index and for this node to apply up to it (the spec's §3.2:
/// a miss then answers not found).
pub const CONTROLLER_READ_BARRIER_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// How long a forwarded request waits for the leader's answer beyond the
/// leader's own bound, in milliseconds: the round trip, with room for a
/// loaded machine.
pub const CONTROLLER_FORWARD_MARGIN_MS: u64 = 2_000;

// Every default topic fits the smallest cluster of three voters.
const _: () = assert!(CONTROLLER_REPLICATION_FACTOR_DEFAULT >= 1);
// A snapshot is taken at some point.
const _: () = assert!(CONTROLLER_SNAPSHOT_EVERY_DEFAULT >= 1);
// A read barrier is a short wait beside a proposal.
const _: () = assert!(CONTROLLER_READ_BARRIER_TIMEOUT_MS_DEFAULT <= CONTROLLER_PROPOSE_TIMEOUT_MS_DEFAULT);

// --- A partition group and its Proposer (flags in phase 2a) -----------------

/// `--raft-heartbeat-ms`: a leader's heartbeat interval, in milliseconds:
/// a tenth of the election timeout, so a lost heartbeat or two never
/// starts an election.
pub const HEARTBEAT_MS_DEFAULT: u64 = 150;
/// `--raft-election-timeout-ms`: elections start after this to twice this
/// without a leader, in milliseconds; generous for a loaded box with
/// thousands of groups (openraft's 150-300 is for a quiet LAN).
pub const ELECTION_TIMEOUT_MS_DEFAULT: u64 = 1500;
/// `--raft-entry-bytes-max`: bytes of produced batches the Proposer puts
/// in one entry; a bigger batch goes alone. One round writes and syncs
/// this much per replica: enough to coalesce many produces, small enough
/// that a round does not hold the next one back long.
pub const ENTRY_BYTES_MAX_DEFAULT: usize = 4 << 20;
/// `--raft-proposals-in-flight`: entries a leader's Proposer has in
/// flight: two let entry k+1's leader flush overlap entry k's replication.
pub const PROPOSALS_IN_FLIGHT_DEFAULT: usize = 2;
/// `--produce-timeout-ms`: how long a produce waits for its commit before
/// it is answered `outcome_unknown`, in milliseconds: well over a failover
/// (an election timeout or two), under a client's own request timeout.
pub const PRODUCE_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// `--replica-lag-ms`: a follower that has not matched the leader's last
/// entry for this long is out of sync, in milliseconds (Kafka's
/// `replica.lag.time.max.ms`).
pub const REPLICA_LAG_MS_DEFAULT: u64 = 10_000;
/// Bytes of produced batches one replica's Proposer queues before a
/// produce waits for room (back-pressure): sixteen entries of the default
/// size; the broker's per-shard request budget bounds the sum over
/// partitions before this does.
pub const PROPOSER_QUEUE_BYTES_MAX: usize = 64 << 20;
/// The shard's election ticker (`election_timer`) scans its groups every
/// tenth of the shortest election timeout, within these bounds: not more
/// often than this (a scan of ~1000 groups costs the shard)...
pub const ELECTION_TICK_MIN: std::time::Duration = std::time::Duration::from_millis(10);
/// ...and not less often than this (a clock expires at most a tick late).
pub const ELECTION_TICK_MAX: std::time::Duration = std::time::Duration::from_millis(100);

// A full entry fits the queue, so a round is never smaller for want of room.
const _: () = assert!(ENTRY_BYTES_MAX_DEFAULT <= PROPOSER_QUEUE_BYTES_MAX);
// An entry of the default size travels in one AppendEntries.
const _: () = assert!(ENTRY_BYTES_MAX_DEFAULT <= APPEND_BYTES_MAX_DEFAULT);
// Heartbeats come well within an election timeout.
const _: () = assert!(HEARTBEAT_MS_DEFAULT * 5 <= ELECTION_TIMEOUT_MS_DEFAULT);
// A produce outlasts a failover (elections take up to twice the timeout).
const _: () = assert!(PRODUCE_TIMEOUT_MS_DEFAULT > 4 * ELECTION_TIMEOUT_MS_DEFAULT);

// --- Snapshot transfer (docs/design/raft-snapshots.md) ------------------------

/// `--raft-snapshot-chunk-bytes`: bytes of stored batches a leader sends
/// in one snapshot chunk frame, in bytes (a chunk always takes at least
/// one whole batch, so a larger batch goes alone): large enough that a
/// frame's overhead vanishes, small enough that eight in flight stay a
/// small part of the shard's frame budget.
pub const SNAPSHOT_CHUNK_BYTES_DEFAULT: usize = 1 << 20;
/// The most `--raft-snapshot-chunk-bytes` may be, in bytes.
pub const SNAPSHOT_CHUNK_BYTES_MAX: usize = 16 << 20;
/// The hard bound on one chunk's batches, in bytes (the soft one is the
/// chunk size, which the batch that reaches it may pass): a batch's
/// bound, so that one frame carries any chunk.
pub const SNAPSHOT_CHUNK_LIMIT_BYTES: usize = es_format::limits::BATCH_BYTES_MAX;
/// Chunks a leader has sent to one follower and not had answered: enough
/// to keep a loopback or LAN link busy (the spec's 8).
pub const SNAPSHOT_CHUNKS_IN_FLIGHT: usize = 8;
/// `--raft-recovery-bytes-per-sec`: bytes per second a leader streams to
/// each follower it sends a snapshot, so producers are not starved of the
/// disk and the link (a tenth of this box's measured ~1 GB/s sequential
/// read); 0 is unlimited.
pub const RECOVERY_BYTES_PER_SEC_DEFAULT: u64 = 100 << 20;
/// Bytes of staged entries an install places before it waits for them to
/// be durable: the writer's queue stays bounded while a large run goes in.
pub const SNAPSHOT_INSTALL_DURABLE_EVERY_BYTES: usize = 8 << 20;

/// Bytes of one producer in a partition snapshot's idempotent window image
/// at most: `[id, epoch, [[seq, count, base] x5]]` as JSON numbers (i64 20
/// characters, i16 6, i32 11, u32 10, u64 20) with their punctuation.
pub const PRODUCER_IMAGE_BYTES_PER_PRODUCER: usize = 280;
/// Bytes of a snapshot descriptor in a SnapshotDone frame at most: a
/// partition's (a few fields and the idempotent window's image, which
/// `PRODUCER_WINDOW_PRODUCERS_MAX` bounds) or a controller image's
/// length and checksum (the image itself travels in chunks).
pub const SNAPSHOT_DESCRIPTOR_BYTES_MAX: usize = 4 << 20;
/// Bytes of a controller snapshot image a follower gathers at most, in
/// memory, before it installs it (the controller's state: topics,
/// assignment, nodes, producer ids, group offsets, as JSON).
pub const CONTROLLER_SNAPSHOT_BYTES_MAX: usize = 512 << 20;
/// Entries of the controller log kept behind its last snapshot when it is
/// purged (the purge runs after each snapshot, every
/// `CONTROLLER_SNAPSHOT_EVERY_DEFAULT` entries): a node briefly behind
/// catches up from the log, one away longer by snapshot.
pub const CONTROLLER_LOG_KEEP_ENTRIES: u64 = 1000;
/// The controller log's segment size, in bytes: small, so that what a
/// purge frees is deleted soon (the log is commands of at most an
/// entry's bound each).
pub const CONTROLLER_SEGMENT_BYTES: u64 = 4 << 20;
/// A replica group stopped on a storage error probes its disk for room
/// this long after it stopped, then at doubling intervals up to the max
/// (`restart.rs`): soon after room returns, without a busy loop on a disk
/// that stays full.
pub const STORAGE_RESTART_BACKOFF_MIN_MS: u64 = 100;
pub const STORAGE_RESTART_BACKOFF_MAX_MS: u64 = 2000;
/// `--raft-rpc-timeout-ms`: the least time an RPC openraft sends (an
/// AppendEntries, a vote) is given before it is sent again. openraft 0.9
/// gives an AppendEntries only the heartbeat interval; a round trip longer
/// than that (a slow link, a follower's slow fdatasync) would time out
/// every append and stop every commit. It must exceed the heartbeat.
pub const RPC_TIMEOUT_MS_DEFAULT: u64 = 1000;

// The largest partition descriptor (its window full, with room for the
// other fields) fits a SnapshotDone frame.
const _: () = assert!(
    PRODUCER_WINDOW_PRODUCERS_MAX * PRODUCER_IMAGE_BYTES_PER_PRODUCER + (64 << 10)
        <= SNAPSHOT_DESCRIPTOR_BYTES_MAX
);
const _: () = assert!(SNAPSHOT_DESCRIPTOR_BYTES_MAX + FRAME_FIELDS_BYTES <= FRAME_BYTES_MAX);
// A segment holds a few commands at least.
const _: () = assert!(CONTROLLER_SEGMENT_BYTES >= 2 * ENTRY_BODY_BYTES_MAX as u64);
// A controller image is sent in chunks no larger than a chunk's bound.
const _: () = assert!(CONTROLLER_SNAPSHOT_BYTES_MAX >= SNAPSHOT_CHUNK_BYTES_MAX);
// A chunk frame (its batches and a few fields) fits a frame.
const _: () = assert!(SNAPSHOT_CHUNK_LIMIT_BYTES + 64 <= FRAME_BYTES_MAX);
const _: () = assert!(SNAPSHOT_CHUNK_BYTES_DEFAULT <= SNAPSHOT_CHUNK_BYTES_MAX);
const _: () = assert!(SNAPSHOT_CHUNK_BYTES_MAX <= SNAPSHOT_CHUNK_LIMIT_BYTES);
// Chunks in flight stay a small part of the receiving shard's frame budget.
const _: () =
    assert!(SNAPSHOT_CHUNK_BYTES_DEFAULT * SNAPSHOT_CHUNKS_IN_FLIGHT <= INFLIGHT_SHARD_BYTES_DEFAULT / 8);
