//! Giving a checked batch a new base offset, or (version 2) a new Raft
//! stamp, or (version 2 to 1) the header a client reads, without reading
//! its records.

use crate::checksum::checksum;
use crate::header::{BatchHeader, RaftStamp};
use crate::layout::{ATTRIBUTES_AT, CRC_FIELD, HEADER_BYTES, HEADER_V2_BYTES, INDEX_AT, MAGIC_V2, TERM_AT};
use crate::Offset;

/// Gives a checked batch (its stored checksum right) its base offset and
/// the checksum that goes with it, without reading the rest of the batch:
/// CRC-32 is linear, so changing covered bytes changes the checksum by the
/// CRC of their difference shifted past the covered bytes after them
/// (zlib's `crc32_combine`), whatever those bytes are.
pub fn rebase(batch: &mut [u8], base: Offset) {
    assert!(batch.len() >= HEADER_BYTES, "a checked batch has a header");
    patch(batch, 0, &base.0.to_le_bytes());
    debug_assert_eq!(stored_crc(batch), checksum(batch), "rebased checksum");
}

/// Gives a checked version 2 batch its base offset and Raft stamp (term,
/// index, `CONTROL` and `ENTRY_END`), fixing the checksum as [`rebase`]
/// does: O(1) in the batch's size. What a leader does to a produced batch
/// when it makes it part of an entry.
pub fn restamp(batch: &mut [u8], base: Offset, stamp: RaftStamp) {
    assert!(
        batch.len() >= HEADER_V2_BYTES && batch.get(16) == Some(&MAGIC_V2),
        "a checked version 2 batch"
    );
    patch(batch, 0, &base.0.to_le_bytes());
    patch(batch, ATTRIBUTES_AT, &[stamp.attributes()]);
    patch(batch, TERM_AT, &stamp.term.to_le_bytes());
    patch(batch, INDEX_AT, &stamp.index.to_le_bytes());
    debug_assert_eq!(stored_crc(batch), checksum(batch), "restamped checksum");
}

/// The version 1 header of a checked version 2 data batch: the same
/// fields without the Raft stamp, `batch_len` 16 bytes shorter, and the
/// checksum of that header followed by the batch's records
/// (`batch[HEADER_V2_BYTES..]`), so that header ++ records is the version
/// 1 batch [`encode`](crate::batch::encode) would have written. O(1) in the
/// batch's size, as [`restamp`] is: the records' bytes are not read (the
/// two checksums differ by the CRC of the two headers' difference, shifted
/// past the records). `None` for anything but a version 2 data batch (a
/// control batch has no version 1 form).
pub fn downgrade_header(batch: &[u8]) -> Option<[u8; HEADER_BYTES]> {
    let h = BatchHeader::parse(batch).ok()?;
    if h.raft.is_none() || h.is_control() || batch.len() < h.batch_len as usize {
        return None;
    }
    let records_len = h.batch_len as u64 - HEADER_V2_BYTES as u64;
    let v1 = BatchHeader {
        batch_len: h.batch_len - (HEADER_V2_BYTES - HEADER_BYTES) as u32,
        raft: None,
        ..h
    };
    let mut out = v1.to_bytes();
    let v2_header = batch.get(..HEADER_V2_BYTES)?;
    let delta = checksum(&out) ^ checksum(v2_header);
    let mut shifted = crc32fast::Hasher::new_with_initial_len(delta, 0);
    shifted.combine(&crc32fast::Hasher::new_with_initial_len(0, records_len));
    let crc = h.crc ^ shifted.finalize();
    if let Some(field) = out.get_mut(CRC_FIELD) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
    Some(out)
}

fn stored_crc(batch: &[u8]) -> u32 {
    batch
        .get(CRC_FIELD)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// Writes `new` at `at` (covered bytes: not in the checksum field) and
/// updates the stored checksum to match.
fn patch(batch: &mut [u8], at: usize, new: &[u8]) {
    let end = at + new.len();
    debug_assert!(
        end <= CRC_FIELD.start || at >= CRC_FIELD.end,
        "covered bytes only"
    );
    let Some(old) = batch.get(at..end) else {
        return;
    };
    if old == new {
        return;
    }
    // Same-length inputs: the CRC's initial value and final xor cancel.
    let delta = crc32fast::hash(old) ^ crc32fast::hash(new);
    // Covered bytes after the patched ones (the checksum field is not).
    let covered_len = batch.len() - CRC_FIELD.len();
    let covered_end = if at >= CRC_FIELD.end {
        end - CRC_FIELD.len()
    } else {
        end
    };
    let after = (covered_len - covered_end) as u64;
    let mut shifted = crc32fast::Hasher::new_with_initial_len(delta, 0);
    shifted.combine(&crc32fast::Hasher::new_with_initial_len(0, after));
    let crc = stored_crc(batch) ^ shifted.finalize();
    if let Some(field) = batch.get_mut(CRC_FIELD) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
    if let Some(dst) = batch.get_mut(at..end) {
        dst.copy_from_slice(new);
    }
}

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

        #[test]
        fn restamp_gives_the_checksum_a_full_pass_would(
            recs in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..300), any::<i64>()), 1..12),
            to in any::<u64>(), term in any::<u64>(), index in any::<u64>(),
            entry_end in any::<bool>(),
        ) {
            let input: Vec<Record> = recs.into_iter()
                .map(|(value, timestamp_ms)| Record { key: None, value, timestamp_ms }).collect();
            let mut buf = Vec::new();
            encode_v2(Offset(0), &input, ProducerStamp::NONE, RaftStamp::default(), &mut buf);
            let stamp = RaftStamp { term, index, control: false, entry_end };
            restamp(&mut buf, Offset(to), stamp);
            let mut full = buf.clone();
            let crc = checksum(&full);
            full[12..16].copy_from_slice(&crc.to_le_bytes());
            prop_assert_eq!(&buf, &full);
            let h = check(&buf).unwrap();
            prop_assert_eq!(h.base_offset, Offset(to));
            prop_assert_eq!(h.raft, Some(stamp));
            let back = records(&h, &buf).unwrap();
            prop_assert_eq!(back.len(), input.len());
            prop_assert_eq!(back[0].offset, Offset(to));
        }

        #[test]
        fn a_downgraded_header_gives_the_batch_version_1_would_write(
            recs in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                 proptest::collection::vec(any::<u8>(), 0..300), any::<i64>()), 1..12),
            base in 0u64..u64::MAX / 2, term in any::<u64>(), index in any::<u64>(),
            entry_end in any::<bool>(),
            producer in proptest::option::of((0i64..i64::MAX, any::<i16>(), 0i32..i32::MAX)),
        ) {
            let input: Vec<Record> = recs.into_iter()
                .map(|(key, value, timestamp_ms)| Record { key, value, timestamp_ms }).collect();
            let producer = producer.map_or(ProducerStamp::NONE, |(producer_id, epoch, base_sequence)| {
                ProducerStamp { producer_id, epoch, base_sequence }
            });
            let stamp = RaftStamp { term, index, control: false, entry_end };
            let mut v2 = Vec::new();
            encode_v2(Offset(base), &input, producer, stamp, &mut v2);
            let mut v1 = Vec::new();
            encode(Offset(base), &input, producer, &mut v1);
            let head = downgrade_header(&v2).unwrap();
            let mut got = head.to_vec();
            got.extend_from_slice(&v2[HEADER_V2_BYTES..]);
            prop_assert_eq!(&got, &v1);
            prop_assert!(check(&got).is_ok());
        }
    }

    proptest! {
        // Whatever the bytes, no panic; a header only for a batch that
        // checks, and then a version 1 batch that checks too.
        #[test]
        fn downgrading_any_bytes_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            magic_2 in any::<bool>(),
        ) {
            let mut bytes = bytes;
            if magic_2 && bytes.len() > 17 {
                bytes[16] = MAGIC_V2;
                bytes[17] &= 3;
            }
            if let Some(head) = downgrade_header(&bytes) {
                let h = BatchHeader::parse(&bytes).unwrap();
                if check(&bytes).is_ok() {
                    let mut v1 = head.to_vec();
                    v1.extend_from_slice(&bytes[HEADER_V2_BYTES..h.batch_len as usize]);
                    prop_assert!(check(&v1).is_ok());
                }
            }
        }
    }

    #[test]
    fn only_a_version_2_data_batch_is_downgraded() {
        let rec = Record {
            key: None,
            value: b"v".to_vec(),
            timestamp_ms: 1,
        };
        let mut v1 = Vec::new();
        encode(
            Offset(3),
            std::slice::from_ref(&rec),
            ProducerStamp::NONE,
            &mut v1,
        );
        assert_eq!(downgrade_header(&v1), None);
        let mut control = Vec::new();
        encode_control(Offset(3), 1, 2, CONTROL_BLANK, &[], &mut control);
        assert_eq!(downgrade_header(&control), None);
        assert_eq!(downgrade_header(&[]), None);
        assert_eq!(downgrade_header(&[2u8; 80]), None);
    }
}
