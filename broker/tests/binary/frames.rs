//! Frames on the wire: larger than the read buffer, written in pieces,
//! trickling in or cut off, and hostile frames that get an error frame and
//! a closed connection.

use super::*;

/// Sends raw bytes and returns the frames read back until the broker closes.
/// Frames larger than the broker's 256 KiB read buffer, between small
/// ones, written in odd-sized pieces: each decodes once, in order.
#[test]
fn frames_larger_than_the_read_buffer_and_split_writes() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    let b = Broker::start(2);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "big", "partitions": 1}))
        .unwrap();
    let batch_of = |value: &[u8]| {
        let mut bb = BatchBuilder::default();
        bb.push(None, value, 0);
        bb.finish(0, None).unwrap()
    };
    // Odd ones are ProduceBatch frames: the large ones have their batch
    // read into a buffer of its own.
    let sizes = [10usize, 3 << 20, 7, 700 << 10, 1, 5 << 20, 12, 90 << 10];
    let mut stream = hello_frame();
    for (i, size) in sizes.iter().enumerate() {
        let value: Vec<u8> = (0..*size).map(|j| (i * 31 + j) as u8).collect();
        let req = if i % 2 == 1 {
            Request::ProduceBatch(ProduceBatch {
                topic: "big".into(),
                partition: 0,
                batch: batch_of(&value),
            })
        } else {
            Request::Produce(Produce {
                topic: "big".into(),
                records: vec![record(None, &value, Some(0))],
            })
        };
        stream.extend_from_slice(&req.to_frame(i as u64 + 1, false));
    }
    // A large batch whose checksum is wrong: an error answer, nothing
    // written, the connection goes on.
    let mut bad = batch_of(&vec![7u8; 300 << 10]);
    bad[100] ^= 1;
    let req = Request::ProduceBatch(ProduceBatch {
        topic: "big".into(),
        partition: 0,
        batch: bad,
    });
    stream.extend_from_slice(&req.to_frame(100, false));
    let last = Request::Produce(Produce {
        topic: "big".into(),
        records: vec![record(None, b"last", Some(0))],
    });
    stream.extend_from_slice(&last.to_frame(101, false));
    let mut s = TcpStream::connect(b.binary_addr()).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    // Pieces that cut headers and payloads anywhere.
    for piece in stream.chunks(65_537) {
        s.write_all(piece).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut answers = Vec::new();
    while answers.len() < sizes.len() + 3 {
        let n = s.read(&mut buf).expect("answers arrive");
        assert!(
            n > 0,
            "the broker closed the connection after {} answers",
            answers.len()
        );
        got.extend_from_slice(&buf[..n]);
        answers.clear();
        let mut at = 0;
        while let Ok((f, used)) = frame::parse(&got[at..], 1 << 24) {
            at += used;
            answers.push(f);
        }
    }
    let bad_answer = answers
        .iter()
        .find(|f| f.request_id == 100)
        .expect("an answer to the bad batch");
    match Response::from_frame(bad_answer).unwrap() {
        Response::Error(e) => assert_eq!(e.code, "invalid_request", "{}", e.message),
        other => panic!("expected an error, got {other:?}"),
    }
    let all = fetch_all(&c, "big", 0);
    assert_eq!(all.len(), sizes.len() + 1);
    for (i, (offset, _, value)) in all.iter().take(sizes.len()).enumerate() {
        assert_eq!(*offset, i as u64);
        assert_eq!(value.len(), sizes[i]);
        assert!(
            value.iter().enumerate().all(|(j, v)| *v == (i * 31 + j) as u8),
            "record {i} intact"
        );
    }
    assert_eq!(all[sizes.len()].2, b"last".to_vec());
}

/// A large batch arrives in small pieces with pauses (the broker drains the
/// socket and waits for more many times), and another is cut off by the
/// client closing mid-batch: the first lands whole, the second not at all,
/// and the broker serves on.
#[test]
fn a_large_batch_that_trickles_in_or_is_cut_off() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    // A trickle never stalls long enough to be refused, however slow the
    // machine (--frame-stall-ms at its largest, an hour).
    let b = Broker::start_with(&["--shards", "2", "--frame-stall-ms", FRAME_STALL_MS_MAX]);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "slow", "partitions": 1}))
        .unwrap();
    let frame_of = |id: u64, value: &[u8]| {
        let mut bb = BatchBuilder::default();
        bb.push(None, value, 0);
        Request::ProduceBatch(ProduceBatch {
            topic: "slow".into(),
            partition: 0,
            batch: bb.finish(0, None).unwrap(),
        })
        .to_frame(id, false)
    };
    let value: Vec<u8> = (0..(300usize << 10)).map(|j| (j % 251) as u8).collect();
    // The bytes the shards hold for large frames being received: a batch's
    // once its header has been read, until it is handled or dropped.
    let held = || b.metric_sum("es_request_budget_bytes_held").unwrap_or(0.0);

    // Cut off: the frame's first 200 KiB, then, once the broker is
    // receiving the batch, the connection closes.
    let mut cut = TcpStream::connect(b.binary_addr()).unwrap();
    cut.write_all(&hello_frame()).unwrap();
    cut.write_all(&frame_of(1, &value)[..200 << 10]).unwrap();
    wait_for("the cut-off batch to be received", || {
        held() >= value.len() as f64
    });
    drop(cut);
    wait_for("the cut-off batch's room to be freed", || held() == 0.0);

    // Trickling: 1000-byte pieces, a pause after each of the first 64,
    // then after every 64th. The broker starts its receive clock when it
    // has read the batch header (and holds the batch's room, which is
    // seen); from then on the test measures how long it takes to send the
    // rest, which the broker cannot have received sooner.
    let mut s = TcpStream::connect(b.binary_addr()).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s.write_all(&hello_frame()).unwrap();
    let mut sending = None;
    for (i, piece) in frame_of(7, &value).chunks(1000).enumerate() {
        s.write_all(piece).unwrap();
        if i == 0 {
            wait_for("the broker to read the trickled batch's header", || {
                held() >= value.len() as f64
            });
            sending = Some(Instant::now());
        }
        if i < 64 || i % 64 == 63 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // At least 63 pauses of 2 ms.
    let sent_in = sending.expect("a first piece").elapsed().as_secs_f64();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let answer = loop {
        let n = s.read(&mut buf).expect("an answer arrives");
        assert!(n > 0, "the broker closed the connection");
        got.extend_from_slice(&buf[..n]);
        let mut at = 0;
        let mut found = None;
        while let Ok((f, used)) = frame::parse(&got[at..], 1 << 24) {
            at += used;
            if f.request_id == 7 {
                found = Some(Response::from_frame(&f).unwrap());
            }
        }
        if let Some(r) = found {
            break r;
        }
    };
    match answer {
        Response::ProduceBatchOk(ok) => assert_eq!((ok.base_offset, ok.record_count), (0, 1)),
        other => panic!("expected ProduceBatchOk, got {other:?}"),
    }
    let all = fetch_all(&c, "slow", 0);
    assert_eq!(all.len(), 1, "the cut-off batch wrote nothing");
    assert_eq!(all[0].2, value);
    // The trickled batch took the pauses to arrive after its header was
    // read, and the broker's receive histogram says so (the cut-off batch
    // is not in it: it never finished arriving).
    let received = b
        .metric_sum("es_binary_batch_receive_duration_seconds_sum")
        .expect("es_binary_batch_receive_duration_seconds");
    assert!(
        received >= sent_in,
        "{received} s receiving a batch whose last {sent_in} s of sending came after its header was read"
    );
}

#[test]
fn hostile_frames_get_an_error_frame_and_a_closed_connection() {
    let b = Broker::start_with(&["--shards", "2", "--frame-bytes-max", "65536"]);
    let (status, _) = b.post("/v1/topics", json!({"name": "safe", "partitions": 1}));
    assert_eq!(status, 201);
    let addr = b.binary_addr();

    // No handshake first.
    let produce = Request::Produce(Produce {
        topic: "safe".into(),
        records: vec![record(None, b"x", None)],
    });
    let frames = raw_exchange(&addr, &produce.to_frame(5, false));
    assert_eq!(last_error_code(&frames), "handshake_required");

    // Unsupported version.
    let bad_hello = Request::Hello(Hello {
        min_version: 7,
        max_version: 9,
        client_id: "x".into(),
        api_key: String::new(),
    });
    assert_eq!(
        last_error_code(&raw_exchange(&addr, &bad_hello.to_frame(0, false))),
        "unsupported_version"
    );

    // Garbage after a good handshake.
    let mut bytes = hello_frame();
    bytes.extend_from_slice(b"\x00\x00\x00\x0cGARBAGE-GARBAGE");
    let frames = raw_exchange(&addr, &bytes);
    assert!(matches!(frames[0], Response::HelloOk(_)));
    assert_eq!(last_error_code(&frames), "malformed_frame");

    // An oversized frame, refused from its header alone.
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&frame::encode(Kind::Produce, 9, &vec![0u8; 70_000], false)[..64]);
    let frames = raw_exchange(&addr, &bytes);
    assert_eq!(last_error_code(&frames), "frame_too_large");
    if let Some(Response::Error(_)) = frames.last() {
        // The error names the request id when the header was readable.
    }

    // A response kind sent as a request; an unknown kind byte.
    let mut bytes = hello_frame();
    bytes.extend_from_slice(&frame::encode(Kind::FetchOk, 3, &[], false));
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "unknown_request");
    let mut bytes = hello_frame();
    let mut unknown = frame::encode(Kind::Produce, 3, &[], false);
    unknown[4] = 0x42;
    bytes.extend_from_slice(&unknown);
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "malformed_frame");

    // A truncated produce payload.
    let mut bytes = hello_frame();
    let good = produce.to_frame(4, false);
    let mut cut = frame::encode(
        Kind::Produce,
        4,
        &good[frame::HEADER_BYTES..good.len() - 3],
        false,
    );
    bytes.append(&mut cut);
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "malformed_frame");

    // Random noise on many connections.
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..50 {
        let noise: Vec<u8> = (0..512)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let mut bytes = hello_frame();
        bytes.extend_from_slice(&noise);
        let _ = raw_exchange(&addr, &bytes);
    }

    // Nothing was written, and everyone else is served.
    let c = connect(&b, false);
    assert!(fetch_all(&c, "safe", 0).is_empty());
    assert_eq!(
        c.produce("safe", vec![record(None, b"ok", None)]).unwrap(),
        vec![(0, 0)]
    );
    let (status, _) = b.get("/health");
    assert_eq!(status, 200);
    let err = match Client::connect(&addr, Options::default()) {
        Ok(c) => c
            .produce("safe", vec![record(None, &vec![0u8; 70_000], None)])
            .unwrap_err(),
        Err(e) => e,
    };
    assert!(
        matches!(err, ClientError::Protocol(_)),
        "the client refuses frames over the broker's limit: {err}"
    );
}
