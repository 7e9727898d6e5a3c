//! The batch format as its callers name it (`es_storage::batch::check`,
//! `es_protocol::batch::validate`): re-exports only; each item lives in
//! the file of its noun.

pub use crate::builder::BatchBuilder;
pub use crate::check::{check, check_produced, check_produced_summed};
pub use crate::checksum::checksum;
pub use crate::encode::{
    control_body, encode, encode_control, encode_kept, encode_kept_v2, encode_refs, encode_v2, encoded_len,
    upgrade,
};
pub use crate::error::BatchError;
pub use crate::header::{producer_of, record_count_of, BatchHeader, RaftStamp};
pub use crate::layout::{
    CONTROL_BLANK, CONTROL_MEMBERSHIP, HEADER_BYTES, HEADER_V2_BYTES, MAGIC, MAGIC_V2, RECORD_OVERHEAD_BYTES,
};
pub use crate::rebase::{downgrade_header, rebase, restamp};
pub use crate::record::{ProducerStamp, Record, RecordRef, StoredRecord};
pub use crate::records::{records, Records};
pub use crate::validate::{validate, validate_framing, validate_framing_parts, Summary};
