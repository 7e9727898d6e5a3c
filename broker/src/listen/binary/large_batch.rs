//! A large ProduceBatch arriving on a binary connection: recognized from
//! the start of its frame, so that its batch can be received straight into
//! memory of its own (connection.rs `read_rest`, es-storage's
//! `ReceivingBatch`) instead of through the connection's read buffer.

use es_protocol::frame;
use es_protocol::requests::produce_batch::ProduceBatch;
use es_protocol::Kind;

use crate::limits::DIRECT_BATCH_BYTES_MIN;

/// A large, uncompressed ProduceBatch frame whose header, topic and
/// partition have arrived: where its batch starts in the frame and how
/// long it is (see `DIRECT_BATCH_BYTES_MIN`).
pub struct LargeBatch {
    pub header: frame::FrameHeader,
    pub topic: String,
    pub partition: u32,
    pub batch_at: usize,
    pub batch_len: usize,
}

/// `prefix` (the start of an incomplete frame) as a [`LargeBatch`], if it
/// is one. Anything else, or anything wrong, waits for the whole frame and
/// the usual checks.
pub fn large_batch(prefix: &[u8], frame_max: usize) -> Option<LargeBatch> {
    let head: &[u8; frame::HEADER_BYTES] = prefix.get(..frame::HEADER_BYTES)?.try_into().ok()?;
    let (header, total) = frame::check_header(head, frame_max).ok()?;
    if Kind::from_u8(header.kind) != Some(Kind::ProduceBatch)
        || header.flags & es_protocol::FLAG_GZIP != 0
        || total < DIRECT_BATCH_BYTES_MIN
    {
        return None;
    }
    let (topic, partition, used) = ProduceBatch::decode_head(&prefix[frame::HEADER_BYTES..]).ok()??;
    let batch_at = frame::HEADER_BYTES + used;
    Some(LargeBatch {
        header,
        topic,
        partition,
        batch_at,
        batch_len: total.checked_sub(batch_at)?,
    })
}
