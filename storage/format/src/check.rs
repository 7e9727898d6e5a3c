//! Checking one batch as the log takes it: whole, its checksum right
//! ([`check`]), and for a producer's batch framed right and numbered from 0
//! ([`check_produced`]).

use crate::checksum::verify;
use crate::header::BatchHeader;
use crate::records::walk;
use crate::BatchError;

/// Checks that `buf` starts with one whole, checksum-valid batch and returns
/// its header. Records inside are validated lazily by
/// [`records`](crate::batch::records).
pub fn check(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    check_summed(buf, None)
}

/// [`check`], given the checksum of `buf`'s covered bytes if it was
/// computed as they arrived (storage's `BatchBuf`): used when the batch is
/// all of `buf`, instead of reading it again.
fn check_summed(buf: &[u8], summed: Option<u32>) -> Result<BatchHeader, BatchError> {
    let h = BatchHeader::parse(buf)?;
    let len = h.batch_len as usize;
    let Some(batch) = buf.get(..len) else {
        return Err(BatchError::Incomplete {
            needed: len,
            have: buf.len(),
        });
    };
    let summed = summed.filter(|_| len == buf.len());
    verify(batch, h.crc, summed)?;
    Ok(h)
}

/// Checks a batch a producer built, for appending as it is: one whole,
/// checksum-valid batch whose records are framed right and numbered 0, 1,
/// ... without gaps. Returns its header and whether a record has no key.
pub fn check_produced(buf: &[u8]) -> Result<(BatchHeader, bool), BatchError> {
    check_produced_summed(buf, None)
}

/// [`check_produced`], given the checksum of `buf`'s covered bytes if it
/// was computed as they arrived (storage's `BatchBuf::received_checksum`).
pub fn check_produced_summed(buf: &[u8], summed: Option<u32>) -> Result<(BatchHeader, bool), BatchError> {
    let h = check_summed(buf, summed)?;
    if h.batch_len as usize != buf.len() {
        return Err(BatchError::Malformed(format!(
            "{} bytes after the batch",
            buf.len() - h.batch_len as usize
        )));
    }
    // In u64: a last offset delta of u32::MAX is a valid header.
    if h.last_offset_delta as u64 + 1 != h.record_count as u64 {
        return Err(BatchError::Malformed(
            "a produced batch numbers its records 0, 1, ... without gaps".into(),
        ));
    }
    let mut keyless = false;
    walk(&h, buf, |r| keyless |= r.key.is_none())?;
    Ok((h, keyless))
}

#[cfg(test)]
mod tests {
    use crate::batch::*;
    use crate::layout::HEADER_BYTES;
    use crate::Offset;
    use proptest::prelude::*;

    fn rec(key: Option<&[u8]>, value: &[u8], ts: i64) -> Record {
        Record {
            key: key.map(|k| k.to_vec()),
            value: value.to_vec(),
            timestamp_ms: ts,
        }
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let mut buf = Vec::new();
        encode(
            Offset(3),
            &[rec(Some(b"key"), b"value", 1)],
            ProducerStamp::NONE,
            &mut buf,
        );
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(check(&bad).is_err(), "flip at byte {i} not detected");
        }
    }

    #[test]
    fn every_truncation_is_incomplete_or_malformed() {
        let mut buf = Vec::new();
        encode(Offset(0), &[rec(None, b"abc", 1)], ProducerStamp::NONE, &mut buf);
        for cut in 0..buf.len() {
            assert!(matches!(check(&buf[..cut]), Err(BatchError::Incomplete { .. })));
        }
    }

    #[test]
    fn a_produced_batch_is_whole_and_numbered_from_zero() {
        let mut buf = Vec::new();
        encode(
            Offset(0),
            &[rec(None, b"a", 1), rec(Some(b"k"), b"b", 2)],
            ProducerStamp::NONE,
            &mut buf,
        );
        let (h, keyless) = check_produced(&buf).unwrap();
        assert_eq!((h.record_count, keyless), (2, true));
        let (_, keyless) = check_produced_summed(&buf, Some(checksum(&buf))).unwrap();
        assert!(keyless);
        let e = check_produced_summed(&buf, Some(checksum(&buf) ^ 1)).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
        let mut longer = buf.clone();
        longer.push(0);
        let e = check_produced(&longer).unwrap_err();
        assert!(e.to_string().contains("1 bytes after the batch"), "{e}");
        // A received checksum of more bytes than the batch is not used.
        assert!(check_produced_summed(&longer, Some(0)).is_err());
        assert!(check(&longer).is_ok(), "check takes the batch at the start");
        let mut gap = Vec::new();
        let kept = records(&check(&buf).unwrap(), &buf).unwrap();
        encode_kept(Offset(0), &kept[1..], ProducerStamp::NONE, &mut gap);
        let e = check_produced(&gap).unwrap_err();
        assert!(e.to_string().contains("without gaps"), "{e}");
    }

    #[test]
    fn a_last_offset_delta_of_u32_max_is_refused_not_a_panic() {
        let mut buf = vec![0u8; HEADER_BYTES];
        buf[8..12].copy_from_slice(&((HEADER_BYTES + 20) as u32).to_le_bytes());
        buf[16] = MAGIC;
        buf[20..24].copy_from_slice(&1u32.to_le_bytes());
        buf[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        buf.extend_from_slice(&u32::MAX.to_le_bytes());
        buf.extend_from_slice(&0i64.to_le_bytes());
        buf.extend_from_slice(&(-1i32).to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        let crc = checksum(&buf);
        buf[12..16].copy_from_slice(&crc.to_le_bytes());
        assert!(check(&buf).is_ok());
        let e = check_produced(&buf).unwrap_err();
        assert!(e.to_string().contains("without gaps"), "{e}");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(h) = check(&bytes) {
                let _ = records(&h, &bytes);
            }
        }

        #[test]
        fn arbitrary_header_with_valid_crc_never_panics(
            body in proptest::collection::vec(any::<u8>(), 0..256),
            count in 1u32..8, delta in 0u32..8,
        ) {
            // A correctly checksummed batch whose records are garbage.
            let len = HEADER_BYTES + body.len();
            let mut buf = vec![0u8; HEADER_BYTES];
            buf[8..12].copy_from_slice(&(len as u32).to_le_bytes());
            buf[16] = MAGIC;
            buf[20..24].copy_from_slice(&count.to_le_bytes());
            buf[24..28].copy_from_slice(&delta.to_le_bytes());
            buf.extend_from_slice(&body);
            let crc = checksum(&buf);
            buf[12..16].copy_from_slice(&crc.to_le_bytes());
            if let Ok(h) = check(&buf) {
                let _ = records(&h, &buf);
            }
        }

        #[test]
        fn arbitrary_v2_header_with_valid_crc_never_panics(
            body in proptest::collection::vec(any::<u8>(), 0..256),
            count in 0u32..8, delta in 0u32..8, attributes in any::<u8>(),
        ) {
            let len = HEADER_V2_BYTES + body.len();
            let mut buf = vec![0u8; HEADER_V2_BYTES];
            buf[8..12].copy_from_slice(&(len as u32).to_le_bytes());
            buf[16] = MAGIC_V2;
            buf[17] = attributes;
            buf[20..24].copy_from_slice(&count.to_le_bytes());
            buf[24..28].copy_from_slice(&delta.to_le_bytes());
            buf.extend_from_slice(&body);
            let crc = checksum(&buf);
            buf[12..16].copy_from_slice(&crc.to_le_bytes());
            if let Ok(h) = check(&buf) {
                let _ = records(&h, &buf);
                let _ = control_body(&h, &buf);
                let _ = Records::new(&buf, 0, u64::MAX).count();
                let _ = validate(&buf, 1, 0, u64::MAX);
            }
        }
    }
}
