//! The batch format as its callers name it (`es_storage::batch::check`,
//! `es_protocol::batch::validate`): re-exports only; each item lives in
//! the file of its noun.

pub use crate::builder::BatchBuilder;
pub use crate::check::{check, check_produced, check_produced_summed};
pub use crate::checksum::checksum;
pub use crate::encode::{encode, encode_kept, encode_refs, encoded_len};
pub use crate::error::BatchError;
pub use crate::header::{producer_of, record_count_of, BatchHeader};
pub use crate::layout::{HEADER_BYTES, MAGIC, RECORD_OVERHEAD_BYTES};
pub use crate::rebase::rebase;
pub use crate::record::{ProducerStamp, Record, RecordRef, StoredRecord};
pub use crate::records::{records, Records};
pub use crate::validate::{validate, validate_framing, validate_framing_parts, Summary};
