//! Record batches: how a FetchOk and a ProduceBatch carry records.
//!
//! The broker sends batches exactly as it stored them (no decode, no
//! re-encode; a replicated partition's version 2 batch gets the version 1
//! header `downgrade_header` computes), so this is the broker's on-disk
//! batch format, implemented
//! once in `es-format` (storage/format: `layout.rs` gives every byte; unlike
//! the rest of the protocol its integers are **little-endian**). This module
//! is the protocol's face on it: the same items, with the validators'
//! errors as the protocol's [`DecodeError`].
//!
//! [`validate`] checks a run of batches once (checksums and record framing);
//! after that [`Records`] walks it without allocating and cannot fail.

use crate::DecodeError;

pub use es_format::batch::{
    downgrade_header, encode_refs as encode, producer_of, record_count_of, BatchBuilder, RecordRef, Records,
    Summary, HEADER_BYTES, HEADER_V2_BYTES, MAGIC, MAGIC_V2, RECORD_OVERHEAD_BYTES,
};

/// Checks that `bytes` is exactly `batches` whole batches, each with a good
/// checksum and record framing that adds up, with offsets increasing from
/// batch to batch. Counts the records in `[from, below)`.
pub fn validate(bytes: &[u8], batches: u32, from: u64, below: u64) -> Result<Summary, DecodeError> {
    Ok(es_format::batch::validate(bytes, batches, from, below)?)
}

/// Like [`validate`] without the checksums: for batches whose checksums the
/// caller verified already (a broker serving what its storage checked).
pub fn validate_framing(bytes: &[u8], batches: u32, from: u64, below: u64) -> Result<Summary, DecodeError> {
    Ok(es_format::batch::validate_framing(bytes, batches, from, below)?)
}

/// Like [`validate_framing`] over batches held in several buffers, each of
/// them whole batches, to be sent back to back (a broker's reply made of
/// the buffers its storage read).
pub fn validate_framing_parts<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
    batches: u32,
    from: u64,
    below: u64,
) -> Result<Summary, DecodeError> {
    Ok(es_format::batch::validate_framing_parts(
        parts, batches, from, below,
    )?)
}

#[cfg(test)]
mod tests {
    // The format's own tests live with it (storage/format); these check the
    // protocol's face: the same bytes, errors as `DecodeError::Malformed`.
    use super::*;

    fn two_batches() -> Vec<u8> {
        let rec = |value: &'static [u8], ts| RecordRef {
            offset: 0,
            timestamp_ms: ts,
            key: None,
            value,
        };
        let mut out = Vec::new();
        encode(10, &[rec(b"a", 1), rec(b"", 2)], &mut out);
        encode(12, &[rec(b"ccc", 3)], &mut out);
        out
    }

    #[test]
    fn validates_as_the_format_does() {
        let bytes = two_batches();
        let want = Summary {
            batches: 2,
            records: 2,
        };
        assert_eq!(validate(&bytes, 2, 11, u64::MAX).unwrap(), want);
        assert_eq!(validate_framing(&bytes, 2, 11, u64::MAX).unwrap(), want);
        let first = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let (a, b) = bytes.split_at(first);
        assert_eq!(validate_framing_parts([a, b], 2, 11, u64::MAX).unwrap(), want);
        assert_eq!(Records::new(&bytes, 11, u64::MAX).count(), 2);
        assert_eq!(producer_of(&bytes), None);
    }

    #[test]
    fn format_errors_are_malformed_frames() {
        let bytes = two_batches();
        let cut = &bytes[..bytes.len() - 1];
        for e in [
            validate(cut, 2, 0, u64::MAX).unwrap_err(),
            validate_framing(cut, 2, 0, u64::MAX).unwrap_err(),
            validate_framing_parts([cut], 2, 0, u64::MAX).unwrap_err(),
        ] {
            let DecodeError::Malformed(why) = &e else {
                panic!("{e:?}")
            };
            assert!(why.starts_with("record batch 1: "), "{why}");
            assert_eq!(e.to_string(), format!("malformed: {why}"));
        }
    }
}
