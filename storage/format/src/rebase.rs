//! Giving a checked batch a new base offset without reading its records.

use crate::checksum::checksum;
use crate::layout::{CRC_FIELD, HEADER_BYTES};
use crate::Offset;

/// Gives a checked batch (its stored checksum right) its base offset and
/// the checksum that goes with it, without reading the rest of the batch:
/// CRC-32 is linear, so changing the first 8 covered bytes changes the
/// checksum by the CRC of their difference shifted past the other
/// `batch_len - 12` covered bytes (zlib's `crc32_combine`), whatever those
/// bytes are.
pub fn rebase(batch: &mut [u8], base: Offset) {
    assert!(batch.len() >= HEADER_BYTES, "a checked batch has a header");
    // Covered bytes after the offset: batch_len and everything after the
    // checksum field.
    let after = (batch.len() - 12) as u64;
    let Some((offset, rest)) = batch.split_first_chunk_mut::<8>() else {
        return;
    };
    let old = *offset;
    let new = base.0.to_le_bytes();
    if old == new {
        return;
    }
    let Some((_batch_len, rest)) = rest.split_first_chunk_mut::<4>() else {
        return;
    };
    let Some((crc_field, _)) = rest.split_first_chunk_mut::<4>() else {
        return;
    };
    let stored = u32::from_le_bytes(*crc_field);
    // Same-length inputs: the CRC's initial value and final xor cancel.
    let delta = crc32fast::hash(&old) ^ crc32fast::hash(&new);
    let mut shifted = crc32fast::Hasher::new_with_initial_len(delta, 0);
    shifted.combine(&crc32fast::Hasher::new_with_initial_len(0, after));
    let crc = stored ^ shifted.finalize();
    *crc_field = crc.to_le_bytes();
    *offset = new;
    debug_assert_eq!(crc, checksum(batch), "rebased checksum");
}

// The chunks `rebase` splits off: offset, batch_len, then the checksum.
const _: () = assert!(CRC_FIELD.start == 8 + 4 && CRC_FIELD.end == CRC_FIELD.start + 4);

#[cfg(test)]
mod tests {
    use crate::batch::*;
    use crate::Offset;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn rebase_gives_the_checksum_a_full_pass_would(
            recs in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..300), any::<i64>()), 1..12),
            from in any::<u64>(), to in any::<u64>(),
        ) {
            let input: Vec<Record> = recs.into_iter()
                .map(|(value, timestamp_ms)| Record { key: None, value, timestamp_ms }).collect();
            let mut buf = Vec::new();
            encode(Offset(from), &input, ProducerStamp::NONE, &mut buf);
            rebase(&mut buf, Offset(to));
            let mut full = buf.clone();
            let crc = checksum(&full);
            full[12..16].copy_from_slice(&crc.to_le_bytes());
            prop_assert_eq!(&buf, &full);
            let h = check(&buf).unwrap();
            prop_assert_eq!(h.base_offset, Offset(to));
        }
    }
}
