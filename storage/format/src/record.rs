//! Records as callers hand them in and as readers get them back, and the
//! producer stamp a batch carries.

use crate::Offset;

/// A record to append: an optional key, a value and a timestamp (ms since the
/// Unix epoch). Nothing else; es has no record headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub timestamp_ms: i64,
}

/// A record read back from the log, with the offset it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecord {
    pub offset: Offset,
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
}

/// One record inside a batch, borrowed from the batch's bytes (what
/// [`Records`](crate::batch::Records) yields).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// Idempotent-producer fields stamped on a batch. `NONE` marks a batch from a
/// producer without an id.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProducerStamp {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

impl ProducerStamp {
    /// The stamp of a batch written without a producer id.
    pub const NONE: ProducerStamp = ProducerStamp {
        producer_id: -1,
        epoch: -1,
        base_sequence: -1,
    };
}
