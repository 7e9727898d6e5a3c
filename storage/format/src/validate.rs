//! Validating a run of batches as a reader takes it (a FetchOk, a
//! ProduceBatch): exactly the batches announced, each whole, its checksum
//! right (unless the caller verified it), its records framed right, offsets
//! increasing from batch to batch. After that [`Records`] walks the run
//! without allocating and cannot fail.
//!
//! [`Records`]: crate::batch::Records

use crate::checksum::verify;
use crate::header::BatchHeader;
use crate::layout::HEADER_BYTES;
use crate::records::walk;
use crate::BatchError;

/// What [`validate`] found.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub batches: u32,
    /// Records with offsets in the `[from, below)` window given to `validate`.
    pub records: u32,
}

/// Checks that `bytes` is exactly `batches` whole batches, each with a good
/// checksum and record framing that adds up, with offsets increasing from
/// batch to batch. Counts the records in `[from, below)`.
pub fn validate(bytes: &[u8], batches: u32, from: u64, below: u64) -> Result<Summary, BatchError> {
    scan([bytes], batches, from, below, true)
}

/// Like [`validate`] without the checksums: for batches whose checksums the
/// caller verified already (a broker serving what its storage checked).
pub fn validate_framing(bytes: &[u8], batches: u32, from: u64, below: u64) -> Result<Summary, BatchError> {
    scan([bytes], batches, from, below, false)
}

/// Like [`validate_framing`] over batches held in several buffers, each of
/// them whole batches, to be sent back to back (a broker's reply made of
/// the buffers its storage read).
pub fn validate_framing_parts<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
    batches: u32,
    from: u64,
    below: u64,
) -> Result<Summary, BatchError> {
    scan(parts, batches, from, below, false)
}

/// Every error names the batch it is in: `record batch {i}: {why}`.
fn scan<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
    batches: u32,
    from: u64,
    below: u64,
    crc: bool,
) -> Result<Summary, BatchError> {
    let in_batch = |i: u32, why: String| BatchError::Malformed(format!("record batch {i}: {why}"));
    let why = |e: BatchError| match e {
        BatchError::Incomplete { needed, have } => format!("{have} bytes left, a header needs {needed}"),
        BatchError::Malformed(why) => why,
    };
    let mut summary = Summary::default();
    let mut next_base = 0u64;
    let mut extra = 0usize;
    for bytes in parts {
        let mut rest = bytes;
        while !rest.is_empty() {
            if summary.batches == batches {
                extra += rest.len();
                break;
            }
            let i = summary.batches;
            let bad = |e: BatchError| in_batch(i, why(e));
            let h = BatchHeader::parse(rest).map_err(bad)?;
            let len = h.batch_len as usize;
            let Some((batch, after)) = rest.split_at_checked(len) else {
                return Err(in_batch(
                    i,
                    format!("length {len} does not fit the {} bytes left", rest.len()),
                ));
            };
            if crc {
                verify(batch, h.crc, None).map_err(bad)?;
            }
            let base = h.base_offset.0;
            if base < next_base {
                return Err(in_batch(i, format!("base offset {base} goes backwards")));
            }
            // `parse` checked that the batch's offsets do not overflow.
            next_base = h.next_offset().0;
            let mut in_window = 0u32;
            walk(&h, batch, |r| {
                let offset = base + r.delta as u64;
                if offset >= from && offset < below {
                    in_window += 1;
                }
            })
            .map_err(bad)?;
            summary.records += in_window;
            summary.batches += 1;
            rest = after;
        }
    }
    if summary.batches < batches {
        return Err(in_batch(
            summary.batches,
            format!("0 bytes left, a header needs {HEADER_BYTES}"),
        ));
    }
    if extra > 0 {
        return Err(BatchError::Malformed(format!(
            "{extra} bytes after the last record batch"
        )));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use crate::batch::*;
    use proptest::prelude::*;

    fn rec<'a>(key: Option<&'a [u8]>, value: &'a [u8], ts: i64) -> RecordRef<'a> {
        RecordRef {
            offset: 0,
            timestamp_ms: ts,
            key,
            value,
        }
    }

    fn two_batches() -> Vec<u8> {
        let mut out = Vec::new();
        encode_refs(10, &[rec(Some(b"k"), b"a", 1), rec(None, b"", 2)], &mut out);
        encode_refs(12, &[rec(Some(b""), b"ccc", 3)], &mut out);
        out
    }

    #[test]
    fn walks_what_it_encodes_within_the_window() {
        let bytes = two_batches();
        assert_eq!(
            validate(&bytes, 2, 0, u64::MAX).unwrap(),
            Summary {
                batches: 2,
                records: 3
            }
        );
        let all: Vec<_> = Records::new(&bytes, 0, u64::MAX).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(
            (all[0].offset, all[0].key, all[0].value),
            (10, Some(&b"k"[..]), &b"a"[..])
        );
        assert_eq!((all[1].offset, all[1].key, all[1].timestamp_ms), (11, None, 2));
        assert_eq!(
            (all[2].offset, all[2].key, all[2].value),
            (12, Some(&b""[..]), &b"ccc"[..])
        );
        let window: Vec<u64> = Records::new(&bytes, 11, 12).map(|r| r.offset).collect();
        assert_eq!(window, vec![11]);
        assert_eq!(validate(&bytes, 2, 11, 12).unwrap().records, 1);
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = two_batches();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(validate(&bad, 2, 0, u64::MAX).is_err(), "flip at {i}");
        }
        for cut in 0..bytes.len() {
            assert!(validate(&bytes[..cut], 2, 0, u64::MAX).is_err(), "cut at {cut}");
        }
        assert!(validate(&bytes, 1, 0, u64::MAX).is_err(), "trailing batch");
        assert!(validate(&bytes, 3, 0, u64::MAX).is_err(), "missing batch");
    }

    #[test]
    fn batches_out_of_order_are_refused() {
        let mut bytes = Vec::new();
        encode_refs(12, &[rec(None, b"x", 1)], &mut bytes);
        encode_refs(10, &[rec(None, b"y", 1)], &mut bytes);
        assert!(validate(&bytes, 2, 0, u64::MAX).is_err());
    }

    #[test]
    fn errors_name_the_batch() {
        let bytes = two_batches();
        let first = check(&bytes).unwrap().batch_len as usize;
        let e = validate(&bytes[..first + 10], 2, 0, u64::MAX).unwrap_err();
        assert_eq!(
            e,
            BatchError::Malformed("record batch 1: 10 bytes left, a header needs 56".into())
        );
        let e = validate(&bytes[..first], 2, 0, u64::MAX).unwrap_err();
        assert_eq!(
            e,
            BatchError::Malformed("record batch 1: 0 bytes left, a header needs 56".into())
        );
        let e = validate(&bytes, 1, 0, u64::MAX).unwrap_err();
        let extra = bytes.len() - first;
        assert_eq!(
            e,
            BatchError::Malformed(format!("{extra} bytes after the last record batch"))
        );
        let mut bad = bytes.clone();
        bad[first + 16] = 9;
        let e = validate(&bad, 2, 0, u64::MAX).unwrap_err();
        assert_eq!(e, BatchError::Malformed("record batch 1: unknown magic 9".into()));
        let mut bad = bytes.clone();
        bad[HEADER_BYTES + 5] ^= 1; // the first record's timestamp
        let e = validate(&bad, 2, 0, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("record batch 0: checksum mismatch"), "{e}");
        assert!(
            validate_framing(&bad, 2, 0, u64::MAX).is_ok(),
            "the checksum is the caller's"
        );
    }

    #[test]
    fn parts_split_at_batch_boundaries_read_as_one_run() {
        let bytes = two_batches();
        let first = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let whole = validate_framing(&bytes, 2, 11, u64::MAX).unwrap();
        let (a, b) = bytes.split_at(first);
        assert_eq!(validate_framing_parts([a, b], 2, 11, u64::MAX).unwrap(), whole);
        assert_eq!(
            validate_framing_parts([a, &[][..], b], 2, 11, u64::MAX).unwrap(),
            whole
        );
        // A part must hold whole batches, all of them and nothing more.
        for cut in 1..bytes.len() {
            if cut != first {
                let (a, b) = bytes.split_at(cut);
                assert!(
                    validate_framing_parts([a, b], 2, 0, u64::MAX).is_err(),
                    "cut at {cut}"
                );
            }
        }
        assert!(
            validate_framing_parts([a], 2, 0, u64::MAX).is_err(),
            "missing batch"
        );
        assert!(
            validate_framing_parts([a, b], 1, 0, u64::MAX).is_err(),
            "trailing batch"
        );
        assert!(
            validate_framing_parts([b, a], 2, 0, u64::MAX).is_err(),
            "out of order"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), n in 0u32..4) {
            if validate(&bytes, n, 0, u64::MAX).is_ok() {
                let _ = Records::new(&bytes, 0, u64::MAX).count();
            }
            // Unvalidated input must not panic the walker either.
            let _ = Records::new(&bytes, 0, u64::MAX).take(1000).count();
        }
    }
}
