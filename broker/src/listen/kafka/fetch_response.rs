//! The Fetch response (versions 4 to 12), framed and encoded by hand into
//! one buffer sized once: each partition's stored batches are converted
//! to Kafka's form straight into it (records.rs `to_kafka`), where the
//! crate's encoder would take them as a buffer of their own and copy them
//! again. Byte for byte what `kafka-protocol` encodes (tests below).
//! Written: no fetch session (`session_id` 0), no aborted transactions
//! (null), no preferred read replica (-1), no tagged fields.

use bytes::Bytes;

use super::records;

/// One partition's answer: its fields and its stored batches, whose
/// Kafka form takes `records_len` bytes.
pub struct PartitionOut {
    pub index: i32,
    pub error: i16,
    pub high_watermark: i64,
    pub log_start: i64,
    pub batches: Vec<Bytes>,
    pub records_len: usize,
    pub compacted: bool,
}

/// A topic's partitions, in request order.
pub struct TopicOut {
    pub name: String,
    pub partitions: Vec<PartitionOut>,
}

/// The first flexible version (compact arrays and strings, tagged fields).
const FLEXIBLE: i16 = 12;

/// The whole frame: length prefix, response header, body.
pub fn encode(
    version: i16,
    correlation_id: i32,
    throttle_ms: i32,
    topics: &[TopicOut],
) -> Result<Vec<u8>, String> {
    debug_assert!((4..=12).contains(&version), "the versions advertised");
    let flexible = version >= FLEXIBLE;
    let mut out = Vec::with_capacity(frame_len(version, topics));
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        out.push(0); // response header v1: no tagged fields
    }
    out.extend_from_slice(&throttle_ms.to_be_bytes());
    if version >= 7 {
        out.extend_from_slice(&0i16.to_be_bytes()); // error code
        out.extend_from_slice(&0i32.to_be_bytes()); // session id: none
    }
    array_len(&mut out, flexible, topics.len());
    for t in topics {
        string(&mut out, flexible, &t.name);
        array_len(&mut out, flexible, t.partitions.len());
        for p in &t.partitions {
            out.extend_from_slice(&p.index.to_be_bytes());
            out.extend_from_slice(&p.error.to_be_bytes());
            out.extend_from_slice(&p.high_watermark.to_be_bytes());
            out.extend_from_slice(&p.high_watermark.to_be_bytes()); // last stable offset
            if version >= 5 {
                out.extend_from_slice(&p.log_start.to_be_bytes());
            }
            // Aborted transactions: null.
            if flexible {
                out.push(0);
            } else {
                out.extend_from_slice(&(-1i32).to_be_bytes());
            }
            if version >= 11 {
                out.extend_from_slice(&(-1i32).to_be_bytes()); // preferred read replica
            }
            if flexible {
                put_uvarint(&mut out, p.records_len as u64 + 1);
            } else {
                out.extend_from_slice(&(p.records_len as i32).to_be_bytes());
            }
            let at = out.len();
            for b in &p.batches {
                records::to_kafka(b, p.compacted, &mut out)?;
            }
            if out.len() - at != p.records_len {
                return Err(format!(
                    "partition {}: {} bytes of records written, {} announced",
                    p.index,
                    out.len() - at,
                    p.records_len
                ));
            }
            if flexible {
                out.push(0); // partition's tagged fields
            }
        }
        if flexible {
            out.push(0); // topic's tagged fields
        }
    }
    if flexible {
        out.push(0); // response's tagged fields
    }
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// The frame's length, length prefix included (the buffer's one size).
fn frame_len(version: i16, topics: &[TopicOut]) -> usize {
    let mut n = 4 + 4 + 1 + 4 + 6 + 5;
    for t in topics {
        n += 5 + 2 + t.name.len() + 5;
        for p in &t.partitions {
            n += 4 + 2 + 8 + 8 + 8 + 4 + 4 + 5 + p.records_len + 1;
        }
        n += 1;
    }
    n + usize::from(version >= FLEXIBLE)
}

fn array_len(out: &mut Vec<u8>, flexible: bool, n: usize) {
    if flexible {
        put_uvarint(out, n as u64 + 1);
    } else {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    }
}

fn string(out: &mut Vec<u8>, flexible: bool, s: &str) {
    if flexible {
        put_uvarint(out, s.len() as u64 + 1);
    } else {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_format::batch::BatchBuilder;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, TopicName};

    /// A stored batch of `n` records at `base`.
    fn stored(base: u64, n: usize) -> Bytes {
        let mut b = BatchBuilder::with_capacity(0);
        for i in 0..n {
            b.push(
                (i % 2 == 0).then_some(&b"key"[..]),
                &vec![i as u8; 200 + i],
                1_000 + i as i64,
            );
        }
        Bytes::from(b.finish(base, None).unwrap())
    }

    fn part(index: i32, error: i16, batches: Vec<Bytes>) -> PartitionOut {
        let records_len = batches
            .iter()
            .map(|b| records::kafka_len(b, false).unwrap())
            .sum();
        PartitionOut {
            index,
            error,
            high_watermark: 40 + index as i64,
            log_start: 3,
            batches,
            records_len,
            compacted: false,
        }
    }

    #[test]
    fn every_version_encodes_as_the_crate_does() {
        let topics = || {
            vec![
                TopicOut {
                    name: "orders".into(),
                    partitions: vec![part(0, 0, vec![stored(3, 5), stored(8, 2)]), part(2, 1, vec![])],
                },
                TopicOut {
                    name: "t2".into(),
                    partitions: vec![part(1, 0, vec![stored(0, 1)])],
                },
            ]
        };
        for version in 4..=12 {
            let ours = encode(version, 77, 9, &topics()).unwrap();
            let body = FetchResponse::default()
                .with_throttle_time_ms(9)
                .with_session_id(0)
                .with_responses(
                    topics()
                        .into_iter()
                        .map(|t| {
                            FetchableTopicResponse::default()
                                .with_topic(TopicName(super::super::codec::s(t.name)))
                                .with_partitions(
                                    t.partitions
                                        .into_iter()
                                        .map(|p| {
                                            let mut records = Vec::new();
                                            for b in &p.batches {
                                                records::to_kafka(b, false, &mut records).unwrap();
                                            }
                                            PartitionData::default()
                                                .with_partition_index(p.index)
                                                .with_error_code(p.error)
                                                .with_high_watermark(p.high_watermark)
                                                .with_last_stable_offset(p.high_watermark)
                                                .with_log_start_offset(p.log_start)
                                                .with_aborted_transactions(None)
                                                .with_preferred_read_replica(BrokerId(-1))
                                                .with_records(Some(Bytes::from(records)))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let theirs = super::super::codec::frame(ApiKey::Fetch, version, 77, &body).unwrap();
            assert_eq!(ours, theirs, "version {version}");
            assert!(ours.len() <= frame_len(version, &topics()), "sized once");
        }
    }

    #[test]
    fn records_that_do_not_add_up_fail_the_response() {
        let mut p = part(0, 0, vec![stored(0, 3)]);
        p.records_len += 1;
        let topics = [TopicOut {
            name: "t".into(),
            partitions: vec![p],
        }];
        assert!(encode(12, 1, 0, &topics).is_err());
    }
}
