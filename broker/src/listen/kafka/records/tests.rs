//! RecordBatch v2 both ways, and the decoders fuzzed: no input panics
//! (`PROPTEST_CASES` raises the count, as `make fuzz` does).

use proptest::prelude::*;

use super::*;

/// Key, value and timestamp delta of a record to build.
type Rec = (Option<Vec<u8>>, Option<Vec<u8>>, i64);

/// A Kafka v2 batch of `records` (key, value, timestamp delta), as a
/// producer writes it: uncompressed, CreateTime, CRC-32C.
fn kafka_batch(records: &[Rec], headers: bool, producer: (i64, i16, i32)) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (k, v, ts)) in records.iter().enumerate() {
        let mut r = vec![0u8];
        put_varlong(&mut r, *ts);
        put_varint(&mut r, i as i32);
        for f in [k, v] {
            match f {
                Some(b) => {
                    put_varint(&mut r, b.len() as i32);
                    r.extend_from_slice(b);
                }
                None => put_varint(&mut r, -1),
            }
        }
        if headers {
            put_varint(&mut r, 1);
            put_varint(&mut r, 1);
            r.push(b'h');
            put_varint(&mut r, 0);
        } else {
            put_varint(&mut r, 0);
        }
        put_varint(&mut body, r.len() as i32);
        body.extend(r);
    }
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&1_000i64.to_be_bytes());
    b.extend_from_slice(&1_000i64.to_be_bytes());
    b.extend_from_slice(&producer.0.to_be_bytes());
    b.extend_from_slice(&producer.1.to_be_bytes());
    b.extend_from_slice(&producer.2.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend(body);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[CRC_FROM..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

const NONE: (i64, i16, i32) = (-1, -1, -1);

#[test]
fn null_and_empty_keys_and_timestamps_survive_both_ways() {
    let recs = vec![
        (None, Some(b"a".to_vec()), 0),
        (Some(Vec::new()), Some(b"b".to_vec()), 5),
        (Some(b"k".to_vec()), None, -3),
    ];
    let c = to_es(&kafka_batch(&recs, false, NONE), false, 1 << 20, 0).unwrap();
    assert_eq!(
        (es_format::batch::record_count_of(&c.batch), c.producer),
        (3, None)
    );
    let mut out = Vec::new();
    to_kafka(&c.batch, false, &mut out).unwrap();
    let back = to_es(&out, false, 1 << 20, 0).unwrap();
    let h = BatchHeader::parse(&back.batch).unwrap();
    let got: Vec<_> = Records::new(&back.batch, 0, u64::MAX)
        .map(|r| (r.key.map(<[u8]>::to_vec), r.value.to_vec(), r.timestamp_ms))
        .collect();
    assert_eq!(
        got,
        vec![
            (None, b"a".to_vec(), 1000),
            (Some(Vec::new()), b"b".to_vec(), 1005),
            (Some(b"k".to_vec()), Vec::new(), 997)
        ]
    );
    assert_eq!(h.record_count, 3);
}

#[test]
fn the_batch_is_checked_by_storage_wherever_it_starts_in_its_page() {
    let recs: Vec<Rec> = (0..40)
        .map(|i| (Some(vec![b'k'; i % 3]), Some(vec![i as u8; 300]), i as i64 * 7))
        .collect();
    for in_page in [0, 1, 4000, 4095] {
        let c = to_es(&kafka_batch(&recs, false, NONE), false, 1 << 20, in_page).unwrap();
        let h = es_format::batch::check(&c.batch).expect("a whole, checked es batch");
        assert_eq!((h.record_count, h.last_offset_delta), (40, 39));
        assert_eq!((h.first_timestamp_ms, h.max_timestamp_ms), (1000, 1000 + 39 * 7));
        let back: Vec<_> = Records::new(&c.batch, 0, u64::MAX)
            .map(|r| {
                (
                    r.key.map(<[u8]>::to_vec),
                    Some(r.value.to_vec()),
                    r.timestamp_ms - 1000,
                )
            })
            .collect();
        assert_eq!(back, recs);
    }
}

#[test]
fn headers_transactions_bad_crc_and_compaction_rules_are_refused() {
    let one = vec![(Some(b"k".to_vec()), Some(b"v".to_vec()), 0)];
    assert_eq!(
        to_es(&kafka_batch(&one, true, NONE), false, 1 << 20, 0)
            .unwrap_err()
            .code,
        INVALID_RECORD
    );
    let mut tx = kafka_batch(&one, false, NONE);
    tx[22] |= 1 << 4;
    let crc = crc32c::crc32c(&tx[CRC_FROM..]);
    tx[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(to_es(&tx, false, 1 << 20, 0).unwrap_err().code, INVALID_RECORD);
    let mut bad = kafka_batch(&one, false, NONE);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(to_es(&bad, false, 1 << 20, 0).unwrap_err().code, CORRUPT_MESSAGE);
    let empty_value = vec![(Some(b"k".to_vec()), Some(Vec::new()), 0)];
    assert_eq!(
        to_es(&kafka_batch(&empty_value, false, NONE), true, 1 << 20, 0)
            .unwrap_err()
            .code,
        INVALID_RECORD
    );
    let no_key = vec![(None, Some(b"v".to_vec()), 0)];
    assert_eq!(
        to_es(&kafka_batch(&no_key, false, NONE), true, 1 << 20, 0)
            .unwrap_err()
            .code,
        INVALID_RECORD
    );
    // A null value on a compacted topic is a delete: stored empty, fetched null.
    let tombstone = vec![(Some(b"k".to_vec()), None, 0)];
    let c = to_es(&kafka_batch(&tombstone, false, NONE), true, 1 << 20, 0).unwrap();
    let mut out = Vec::new();
    to_kafka(&c.batch, true, &mut out).unwrap();
    assert_eq!(out[out.len() - 2], 1, "value length -1 (zigzag 1): null");
}

#[test]
fn an_idempotent_batch_keeps_its_producer_fields() {
    let one = vec![(Some(b"k".to_vec()), Some(b"v".to_vec()), 0)];
    let c = to_es(&kafka_batch(&one, false, (7, 2, 40)), false, 1 << 20, 0).unwrap();
    assert_eq!(c.producer, Some((7, 2, 40)));
    assert_eq!(es_format::batch::producer_of(&c.batch), Some((7, 2, 40)));
}

#[test]
fn compressed_records_decompress_under_the_bound() {
    let recs: Vec<_> = (0..50)
        .map(|i| (Some(vec![b'k'; i]), Some(vec![b'v'; 100]), i as i64))
        .collect();
    let plain = kafka_batch(&recs, false, NONE);
    let payload = &plain[KAFKA_HEADER_BYTES..];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, payload).unwrap();
    let lz = {
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut e, payload).unwrap();
        e.finish().unwrap()
    };
    let sn = snap::raw::Encoder::new().compress_vec(payload).unwrap();
    for (codec, data) in [(1i16, gz.finish().unwrap()), (2, sn), (3, lz)] {
        let mut b = plain[..KAFKA_HEADER_BYTES].to_vec();
        b.extend(&data);
        b[21..23].copy_from_slice(&codec.to_be_bytes());
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_FROM..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            es_format::batch::record_count_of(&to_es(&b, false, 1 << 20, 0).unwrap().batch),
            50,
            "codec {codec}"
        );
        assert_eq!(
            to_es(&b, false, 1000, 0).unwrap_err().code,
            MESSAGE_TOO_LARGE,
            "codec {codec} bounded"
        );
    }
}

proptest! {
    #[test]
    fn any_bytes_are_refused_or_converted_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = to_es(&bytes, false, 1 << 16, 0);
        let _ = to_es(&bytes, true, 1 << 16, 0);
    }

    #[test]
    fn a_valid_batch_with_any_byte_changed_never_panics(
        recs in proptest::collection::vec((proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)), -5i64..5), 1..6),
        at in any::<usize>(),
        to in any::<u8>(),
    ) {
        let mut b = kafka_batch(&recs, false, NONE);
        let i = at % b.len();
        b[i] = to;
        let crc = crc32c::crc32c(&b[CRC_FROM.min(b.len())..]);
        if b.len() > 21 { b[17..21].copy_from_slice(&crc.to_be_bytes()); }
        let _ = to_es(&b, false, 1 << 16, 0);
    }

    #[test]
    fn any_frame_is_decoded_or_refused_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), key in 0i16..40, version in -1i16..14) {
        let mut f = key.to_be_bytes().to_vec();
        f.extend_from_slice(&version.to_be_bytes());
        f.extend(bytes);
        let _ = crate::listen::kafka::decode_frame(bytes::Bytes::from(f));
    }
}
