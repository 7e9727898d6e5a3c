//! Every bound of the record-batch format, its unit last, with why that
//! value, and the relations between them checked at compile time.
//!
//! The byte layout itself (header size, record overhead, magic) is
//! [`layout`](crate::layout): those are the format, not bounds of it.

use crate::layout::{HEADER_BYTES, RECORD_OVERHEAD_BYTES};

// --- Batch size ---------------------------------------------------------------

/// Largest batch the format accepts (64 MiB). A property of the file format,
/// not a tunable: recovery uses it to reject a garbage length, so it must
/// never shrink. Request limits in the broker are far smaller.
pub const BATCH_BYTES_MAX: usize = 64 << 20;
/// Smallest batch: a header and one record with no key and no value; a
/// shorter `batch_len` cannot be a batch.
pub(crate) const BATCH_BYTES_MIN: usize = HEADER_BYTES + RECORD_OVERHEAD_BYTES;

// The smallest batch is a batch the format accepts.
const _: () = assert!(BATCH_BYTES_MIN <= BATCH_BYTES_MAX);
// `batch_len` is a u32: every accepted length fits it.
const _: () = assert!(BATCH_BYTES_MAX <= u32::MAX as usize);
