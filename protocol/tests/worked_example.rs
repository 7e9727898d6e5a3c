//! The worked example of docs/protocol.md, byte for byte.

use es_protocol::batch::RecordRef;
use es_protocol::requests::error::ErrorResponse;
use es_protocol::requests::fetch::{Fetch, FetchOk, FetchedRecord};
use es_protocol::requests::hello::Hello;
use es_protocol::requests::produce::{Produce, ProduceOk, ProduceRecord};
use es_protocol::{Request, Response};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

#[test]
fn bytes_match_the_doc() {
    let hello = Request::Hello(Hello {
        min_version: 1,
        max_version: 1,
        client_id: "demo".into(),
        api_key: String::new(),
    });
    assert_eq!(
        hello.to_frame(0, false),
        hex("00 00 00 18 01 00 00 00 00 00 00 00 00 00 00 00 00 01 00 01 00 04 64 65 6d 6f 00 00")
    );
    let produce = Request::Produce(Produce {
        topic: "orders".into(),
        records: vec![ProduceRecord {
            partition: None,
            timestamp_ms: None,
            key: Some(b"user-42".to_vec()),
            value: b"hi".to_vec(),
        }],
    });
    assert_eq!(
        produce.to_frame(1, false),
        hex(
            "00 00 00 35 02 00 00 00 00 00 00 00 00 00 00 01 00 06 6f 72 64 65 72 73 00 00 00 01 \
             ff ff ff ff ff ff ff ff ff ff ff ff 00 00 00 07 75 73 65 72 2d 34 32 00 00 00 02 68 69"
        )
    );
    let ok = Response::ProduceOk(ProduceOk {
        offsets: vec![(0, 0)],
    });
    assert_eq!(
        ok.to_frame(1, false),
        hex(
            "00 00 00 1c 82 00 00 00 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00"
        )
    );
    let fetch = Request::Fetch(Fetch {
        topic: "orders".into(),
        partition: 0,
        offset: Some(0),
        max_records: 100,
        max_bytes: 1 << 20,
        wait_ms: 0,
    });
    assert_eq!(
        fetch.to_frame(2, false),
        hex(
            "00 00 00 2c 03 00 00 00 00 00 00 00 00 00 00 02 00 06 6f 72 64 65 72 73 00 00 00 00 \
             00 00 00 00 00 00 00 00 00 00 00 64 00 10 00 00 00 00 00 00"
        )
    );
    let mut batches = Vec::new();
    es_protocol::batch::encode(
        0,
        &[RecordRef {
            offset: 0,
            timestamp_ms: 1_700_000_000_000,
            key: Some(b"user-42"),
            value: b"hi",
        }],
        &mut batches,
    );
    let fetched = Response::FetchOk(FetchOk::new(1, 1, 0, 1, batches, 0).unwrap());
    let bytes = hex("00 00 00 7d 83 00 00 00 00 00 00 00 00 00 00 02 \
         00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 01 \
         00 00 00 00 00 00 00 00 55 00 00 00 73 3e 4c 1b \
         01 00 ff ff 01 00 00 00 00 00 00 00 ff ff ff ff \
         00 68 e5 cf 8b 01 00 00 00 68 e5 cf 8b 01 00 00 ff ff ff ff ff ff ff ff \
         00 00 00 00 00 68 e5 cf 8b 01 00 00 07 00 00 00 75 73 65 72 2d 34 32 02 00 00 00 68 69");
    assert_eq!(fetched.to_frame(2, false), bytes);
    // And a client reads it back.
    let (frame, used) = es_protocol::frame::parse(&bytes, 1 << 20).unwrap();
    assert_eq!(used, bytes.len());
    let Response::FetchOk(ok) = Response::from_frame_owned(frame).unwrap() else {
        panic!("not a FetchOk");
    };
    assert_eq!(
        ok.to_records(),
        vec![FetchedRecord {
            offset: 0,
            timestamp_ms: 1_700_000_000_000,
            key: Some(b"user-42".to_vec()),
            value: b"hi".to_vec(),
        }]
    );
    let err = Response::Error(ErrorResponse {
        code: "topic_not_found".into(),
        message: "topic \"nope\" does not exist".into(),
        details: None,
    });
    assert_eq!(
        err.to_frame(3, false),
        hex("00 00 00 3c ff 00 00 00 00 00 00 00 00 00 00 03 00 0f 74 6f 70 69 63 5f 6e 6f 74 5f 66 6f 75 6e 64 \
             00 00 00 1b 74 6f 70 69 63 20 22 6e 6f 70 65 22 20 64 6f 65 73 20 6e 6f 74 20 65 78 69 73 74")
    );
}
