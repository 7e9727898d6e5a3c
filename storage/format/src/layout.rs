//! The byte layout of a record batch (its bounds: `limits.rs`).
//!
//! All integers are **little-endian** (unlike the rest of the binary
//! protocol). `HEADER_BYTES` = 56:
//!
//! ```text
//! off size field
//!   0   8  base_offset        u64  offset of the first record
//!   8   4  batch_len          u32  bytes of the whole batch, header included
//!  12   4  crc                u32  CRC-32 (IEEE, crc32fast) of bytes [0,12) ++ [16,batch_len)
//!  16   1  magic              u8   format version, = 1
//!  17   1  attributes         u8   reserved, = 0
//!  18   2  producer_epoch     i16  -1 without a producer id
//!  20   4  record_count       u32  >= 1
//!  24   4  last_offset_delta  u32  offset of the last record - base_offset
//!  28   4  base_sequence      i32  sequence of the first record, -1 without a producer id
//!  32   8  first_timestamp    i64  ms since the Unix epoch, of the first record
//!  40   8  max_timestamp      i64  largest record timestamp in the batch
//!  48   8  producer_id        i64  -1 without a producer id
//!  56      records, record_count times:
//!            offset_delta u32, timestamp i64, key_len i32 (-1 = no key), key,
//!            value_len u32, value
//! ```
//!
//!
//! **Version 2** (magic 2, [`HEADER_V2_BYTES`] = 72), written only by
//! replicated partitions (the partition's log is its Raft log): the same
//! 56 bytes, then
//!
//! ```text
//!  56   8  term               u64  Raft term of the entry the batch belongs to
//!  64   8  index              u64  Raft index of that entry
//!  72      records (data) | kind u8 + body (CONTROL)
//! ```
//!
//! and `attributes` bit 0 `CONTROL` (a zero-width batch: a blank or
//! membership entry, `record_count` = `last_offset_delta` = 0, no offset),
//! bit 1 `ENTRY_END` (the last batch of its entry); the other bits must be
//! 0. An entry is a run of batches with the same `(term, index)`.
//!
//! The checksum covers every byte but its own, so a flipped bit anywhere
//! (base offset and length included) is caught. Offset deltas increase
//! strictly within a batch; compaction may leave gaps between them, and the
//! last record's delta is `last_offset_delta`.

use std::ops::Range;

/// Size of the fixed batch header.
pub const HEADER_BYTES: usize = 56;
/// Fixed bytes per record besides its key and value.
pub const RECORD_OVERHEAD_BYTES: usize = 20;
/// Format version written in `magic`.
pub const MAGIC: u8 = 1;
/// Format version 2: a replicated partition's batch (its Raft stamp).
pub const MAGIC_V2: u8 = 2;
/// Size of a version 2 header.
pub const HEADER_V2_BYTES: usize = 72;
/// Where `attributes` lies.
pub const ATTRIBUTES_AT: usize = 17;
/// Where a version 2 header keeps the term, then the index.
pub const TERM_AT: usize = 56;
pub const INDEX_AT: usize = 64;
/// `attributes` bit: a zero-width control batch (no records).
pub const ATTR_CONTROL: u8 = 1;
/// `attributes` bit: the last batch of its Raft entry.
pub const ATTR_ENTRY_END: u8 = 2;
/// Control batch kinds (the body's first byte).
pub const CONTROL_BLANK: u8 = 0;
pub const CONTROL_MEMBERSHIP: u8 = 1;

/// Where the checksum lies in a batch; it covers every other byte.
pub const CRC_FIELD: Range<usize> = 12..16;

const _: () = assert!(CRC_FIELD.end <= HEADER_BYTES, "the checksum lies in the header");
const _: () = assert!(TERM_AT == HEADER_BYTES && INDEX_AT + 8 == HEADER_V2_BYTES);
