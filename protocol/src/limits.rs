//! Every bound of the binary protocol and of its blocking client, its unit
//! last, with why that value, and the relations between them checked at
//! compile time.
//!
//! The frame's layout (`frame::HEADER_BYTES`, the flags) and the fixed
//! fields of each payload are the format, not bounds of it: they stay with
//! their codec.

// --- Frames -------------------------------------------------------------------

/// Default largest frame (header included) and largest decompressed
/// payload: 16 MiB, matching the broker's HTTP body limit, holds a produce
/// of thousands of 1 KiB records and a fetch of a useful page.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 16 << 20;

// --- The blocking client (feature `client`) -----------------------------------

/// Default time to wait for a TCP connection to the broker: a broker that
/// is up answers in far less, one that is down is reported within seconds.
#[cfg(feature = "client")]
pub(crate) const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Largest response frame the client reads: past the default, so that a
/// broker run with a larger `--frame-bytes-max` or `--fetch-bytes-max` is
/// still read; a larger length is garbage.
#[cfg(feature = "client")]
pub(crate) const RESPONSE_FRAME_BYTES_MAX: usize = 64 << 20;
/// The reader thread's socket buffer: many small responses per read.
#[cfg(feature = "client")]
pub(crate) const READ_BUFFER_BYTES: usize = 256 << 10;
/// glibc's `M_MMAP_THRESHOLD` set by `keep_large_buffers`: fetch-sized
/// allocations below it come from the heap instead of fresh mappings that
/// page-fault every page back in.
#[cfg(feature = "client")]
pub(crate) const MMAP_THRESHOLD_BYTES: usize = 32 << 20;
/// glibc's `M_TRIM_THRESHOLD` set by `keep_large_buffers`: free heap kept
/// at its top before it is handed back to the kernel, so that freed fetch
/// buffers are reused.
#[cfg(feature = "client")]
pub(crate) const TRIM_THRESHOLD_BYTES: usize = 64 << 20;

/// Redirects (`not_leader` naming a leader) one request follows before it
/// gives up: a leader that moves once more during an election costs a
/// hop or two; brokers that keep pointing elsewhere are in a loop.
#[cfg(feature = "client")]
pub const REDIRECTS_MAX: usize = 3;
/// Times one request waits out `leader_not_available` (or a `not_leader`
/// that knows no leader, or names one that is down) before it gives up.
#[cfg(feature = "client")]
pub const LEADER_WAITS_MAX: u32 = 20;
/// The first wait for a leader; each further wait doubles it, up to
/// [`LEADER_WAIT_MS_MAX`]. 20 waits span about 9 s: several election
/// timeouts (1.5 s by default).
#[cfg(feature = "client")]
pub const LEADER_WAIT_MS_FIRST: u64 = 100;
/// The longest single wait for a leader: a new leader is found at most
/// this late (a wait costs the cluster one small request).
#[cfg(feature = "client")]
pub const LEADER_WAIT_MS_MAX: u64 = 500;

// The waits for a leader grow from the first to the longest.
#[cfg(feature = "client")]
const _: () = assert!(LEADER_WAIT_MS_FIRST <= LEADER_WAIT_MS_MAX);

// The client reads every frame a broker at the default limit sends.
#[cfg(feature = "client")]
const _: () = assert!(FRAME_BYTES_MAX_DEFAULT <= RESPONSE_FRAME_BYTES_MAX);
// A buffer of a largest default frame comes from the heap, not a mapping.
#[cfg(feature = "client")]
const _: () = assert!(FRAME_BYTES_MAX_DEFAULT <= MMAP_THRESHOLD_BYTES);
// A freed buffer of up to the mmap threshold stays in the heap for reuse.
#[cfg(feature = "client")]
const _: () = assert!(MMAP_THRESHOLD_BYTES <= TRIM_THRESHOLD_BYTES);
// mallopt takes a C int.
#[cfg(feature = "client")]
const _: () = assert!(TRIM_THRESHOLD_BYTES <= i32::MAX as usize);
