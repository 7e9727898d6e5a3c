//! Every decoder entry point of the batch format, against hostile bytes and
//! against what the encoders write.
//!
//! Contract: no entry point panics on any input; whatever an encoder
//! writes, `check`, `check_produced` (offsets from 0), `validate`,
//! `validate_framing(_parts)`, `records` and `Records` accept and give back
//! record for record.

use es_format::batch::*;
use es_format::Offset;
use proptest::prelude::*;

/// Calls every decoder entry point on `bytes`; only panics count.
fn decode_everything(bytes: &[u8], batches: u32, from: u64, below: u64) {
    let _ = BatchHeader::parse(bytes);
    if let Ok(h) = check(bytes) {
        let _ = records(&h, bytes);
    }
    let _ = check_produced(bytes);
    let _ = check_produced_summed(bytes, Some(checksum(bytes)));
    let _ = checksum(bytes);
    let _ = producer_of(bytes);
    let _ = record_count_of(bytes);
    let _ = validate(bytes, batches, from, below);
    let _ = validate_framing(bytes, batches, from, below);
    let (a, b) = bytes.split_at(bytes.len() / 2);
    let _ = validate_framing_parts([a, b], batches, from, below);
    let _ = Records::new(bytes, from, below).take(10_000).count();
    // A header-shaped start with the bytes as body: reaches the record walk.
    if let Ok(h) = BatchHeader::parse(bytes) {
        let _ = records(&h, bytes);
    }
}

fn batch_strategy() -> impl Strategy<Value = Vec<(Option<Vec<u8>>, Vec<u8>, i64)>> {
    proptest::collection::vec(
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            proptest::collection::vec(any::<u8>(), 0..48),
            any::<i64>(),
        ),
        1..8,
    )
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        batches in 0u32..4,
        from in any::<u64>(),
        below in any::<u64>(),
    ) {
        decode_everything(&bytes, batches, from, below);
    }

    #[test]
    fn damaged_batches_never_panic_a_decoder(
        recs in batch_strategy(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let records: Vec<Record> = recs.into_iter()
            .map(|(key, value, timestamp_ms)| Record { key, value, timestamp_ms }).collect();
        let mut bytes = Vec::new();
        encode(Offset(0), &records, ProducerStamp::NONE, &mut bytes);
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        // Framing that is wrong under a right checksum reaches every walk.
        let crc = checksum(&bytes);
        let mut resealed = bytes.clone();
        resealed[12..16].copy_from_slice(&crc.to_le_bytes());
        let cut = cut.index(bytes.len() + 1);
        for b in [&bytes[..], &resealed[..], &bytes[..cut], &resealed[..cut]] {
            decode_everything(b, 1, 0, u64::MAX);
        }
    }

    #[test]
    fn encode_validate_iterate_round_trips(
        batches in proptest::collection::vec((batch_strategy(), 0u64..3), 1..5),
        start in 0u64..1 << 40,
        window in any::<(u64, u64)>(),
    ) {
        let mut bytes = Vec::new();
        let mut parts = Vec::new();
        let mut want = Vec::new();
        let mut base = start;
        for (recs, gap) in &batches {
            base += gap;
            let records: Vec<Record> = recs.iter()
                .map(|(key, value, ts)| Record { key: key.clone(), value: value.clone(), timestamp_ms: *ts })
                .collect();
            let at = bytes.len();
            encode(Offset(base), &records, ProducerStamp::NONE, &mut bytes);
            let batch = &bytes[at..];
            let h = check(batch).unwrap();
            prop_assert_eq!(h.base_offset, Offset(base));
            prop_assert_eq!(h.batch_len as usize, batch.len());
            prop_assert_eq!(record_count_of(batch), records.len() as u32);
            prop_assert_eq!(producer_of(batch), None);
            let back = es_format::batch::records(&h, batch).unwrap();
            for (i, (got, r)) in back.iter().zip(&records).enumerate() {
                prop_assert_eq!(got.offset, Offset(base + i as u64));
                prop_assert_eq!(&got.key, &r.key);
                prop_assert_eq!(&got.value, &r.value);
                prop_assert_eq!(got.timestamp_ms, r.timestamp_ms);
                want.push((base + i as u64, r.clone()));
            }
            parts.push(at..bytes.len());
            base = h.next_offset().0;
        }
        let n = batches.len() as u32;
        let all = validate(&bytes, n, 0, u64::MAX).unwrap();
        prop_assert_eq!(all, Summary { batches: n, records: want.len() as u32 });
        let framing = validate_framing_parts(parts.iter().map(|r| &bytes[r.clone()]), n, 0, u64::MAX);
        prop_assert_eq!(framing.unwrap(), all);
        let got: Vec<_> = Records::new(&bytes, 0, u64::MAX).collect();
        prop_assert_eq!(got.len(), want.len());
        for (g, (offset, r)) in got.iter().zip(&want) {
            prop_assert_eq!(g.offset, *offset);
            prop_assert_eq!(g.timestamp_ms, r.timestamp_ms);
            prop_assert_eq!(g.key, r.key.as_deref());
            prop_assert_eq!(g.value, &r.value[..]);
        }
        // A window keeps exactly the records inside it.
        let (from, below) = (start + window.0 % 64, start + window.1 % 64);
        let inside = want.iter().filter(|(o, _)| *o >= from && *o < below).count();
        prop_assert_eq!(validate(&bytes, n, from, below).unwrap().records as usize, inside);
        prop_assert_eq!(Records::new(&bytes, from, below).count(), inside);
    }
}
