//! The batch checksum: CRC-32 (IEEE) of every byte of a batch but the
//! checksum field's own (`layout::CRC_FIELD`). [`checksum`] is the one
//! walk over a batch's bytes that computes it; [`verify`] the one
//! comparison with what the batch stores.

use crate::layout::CRC_FIELD;
use crate::BatchError;

/// The checksum a batch stores: CRC-32 of bytes `[0, 12)` and `[16, len)`
/// of `batch`. Defined for any input: of fewer than 16 bytes it sums the
/// covered bytes there are.
pub fn checksum(batch: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(batch.get(..CRC_FIELD.start).unwrap_or(batch));
    hasher.update(batch.get(CRC_FIELD.end..).unwrap_or_default());
    hasher.finalize()
}

/// Checks that `batch` (exactly one batch) sums to `stored`. `summed` is
/// its checksum if the caller computed it already (as the bytes arrived),
/// so they need not be read again.
pub(crate) fn verify(batch: &[u8], stored: u32, summed: Option<u32>) -> Result<(), BatchError> {
    let actual = summed.unwrap_or_else(|| checksum(batch));
    if actual != stored {
        return Err(BatchError::Malformed(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_field_is_not_covered() {
        let mut bytes: Vec<u8> = (0..40).collect();
        let sum = checksum(&bytes);
        bytes[12..16].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(checksum(&bytes), sum);
        bytes[11] ^= 1;
        assert_ne!(checksum(&bytes), sum);
        let mut covered = bytes[..12].to_vec();
        covered.extend_from_slice(&bytes[16..]);
        assert_eq!(checksum(&bytes), crc32fast::hash(&covered));
    }

    #[test]
    fn short_input_sums_what_there_is() {
        for n in 0..=16 {
            let bytes: Vec<u8> = (0..n).collect();
            assert_eq!(checksum(&bytes), crc32fast::hash(&bytes[..n.min(12) as usize]));
        }
    }
}
