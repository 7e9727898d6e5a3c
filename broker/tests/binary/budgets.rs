//! What connections and large frames cost the broker: memory for
//! announced sizes and idle connections, the shard's request budget, and
//! room freed when a frame stops arriving.

use super::*;

/// What a frame header announces costs a client 16 bytes: the broker's
/// memory must follow what a client sends, not what it announces. Before
/// the handshake no frame may be larger than a Hello can be; after it, a
/// header announcing 16 MiB grows no buffer until the bytes come.
#[test]
fn announced_frame_sizes_cost_the_broker_nothing_until_sent() {
    let b = Broker::start_with(&["--shards", "2"]);
    let addr = b.binary_addr();

    // Before the handshake: a Hello header announcing 1 MiB, and 100 bytes
    // of it, is refused at once (not waited for).
    let mut bytes = frame::encode(Kind::Hello, 7, &vec![0u8; 1 << 20], false);
    bytes.truncate(frame::HEADER_BYTES + 100);
    assert_eq!(last_error_code(&raw_exchange(&addr, &bytes)), "frame_too_large");

    // After it: 64 connections each announce a 15 MiB frame and send
    // 100 bytes of it. The HelloOk comes after the broker read both (one
    // write, one shard task), so the buffers are sized by then.
    let rss = || broker_rss(&b);
    let before = rss();
    let mut held = Vec::new();
    for i in 0..64u64 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(hang_guard())).unwrap();
        let mut bytes = hello_frame();
        let mut big = frame::encode(Kind::Fetch, i, &vec![0u8; 15 << 20], false);
        big.truncate(frame::HEADER_BYTES + 100);
        bytes.extend_from_slice(&big);
        s.write_all(&bytes).unwrap();
        let mut head = [0u8; frame::HEADER_BYTES];
        s.read_exact(&mut head).unwrap();
        assert_eq!(head[4], 0x81, "HelloOk first");
        held.push(s);
    }
    // Looked at twice, half a second apart, for a broker that would grow
    // its buffers later. The pause cannot fail a broker that sizes them by
    // what has arrived: with nothing more sent, there is nothing to grow by,
    // however long the pause lasts or however slow the broker is.
    for _ in 0..2 {
        let grown = rss().saturating_sub(before);
        assert!(
            grown < 256 << 20,
            "64 announced 15 MiB frames grew the broker by {} MiB",
            grown >> 20
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Everyone else is served meanwhile.
    let (status, _) = b.post("/v1/topics", json!({"name": "t", "partitions": 1}));
    assert_eq!(status, 201);
    let c = connect(&b, false);
    assert_eq!(
        c.produce("t", vec![record(None, b"x", None)]).unwrap(),
        vec![(0, 0)]
    );
    drop(held);
}

/// The broker's resident memory, in bytes.
fn broker_rss(b: &Broker) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", b.pid())).unwrap(); // blocking-ok: a test
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .expect("VmRSS");
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() << 10
}

/// An idle connection holds a small read buffer: 400 connections past
/// their handshake grow the broker by well under what 256 KiB buffers
/// would (100 MiB; 10,000 such connections would hold 2.5 GB).
#[test]
fn idle_connections_hold_little_memory() {
    let b = Broker::start_with(&["--shards", "2"]);
    let addr = b.binary_addr();
    let before = broker_rss(&b);
    let mut held = Vec::new();
    for _ in 0..400 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(hang_guard())).unwrap();
        s.write_all(&hello_frame()).unwrap();
        held.push(s);
    }
    let answer = |s: &mut TcpStream| {
        let mut head = [0u8; frame::HEADER_BYTES];
        s.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; len + 4 - frame::HEADER_BYTES];
        s.read_exact(&mut rest).unwrap();
        head[4]
    };
    for s in &mut held {
        assert_eq!(answer(s), 0x81, "HelloOk");
    }
    let grown = broker_rss(&b).saturating_sub(before);
    assert!(
        grown < 48 << 20,
        "400 idle connections grew the broker by {} MiB",
        grown >> 20
    );
    // They still work, for small requests and large ones.
    let big =
        Request::Admin(Kind::DescribeTopic, json!({ "name": "x".repeat(300 << 10) })).to_frame(1, false);
    for s in held.iter_mut().take(3) {
        s.write_all(&big).unwrap();
        assert_eq!(answer(s), 0xff, "an error frame: no such topic");
        s.write_all(&Request::Admin(Kind::ListTopics, json!({})).to_frame(2, false))
            .unwrap();
        assert_eq!(answer(s), Kind::AdminOk as u8, "the topic list");
    }
}

/// A shard holds at most `--request-shard-bytes` of large requests, from
/// a frame's header until its answer: a client that sends most of a large
/// frame and stalls holds that frame's bytes, so another client's large
/// frame waits, unread and unanswered, while small requests are still
/// answered; once the first client goes away the waiting frame is read
/// and answered.
#[test]
fn large_requests_wait_for_the_shards_request_budget() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    // A's frame stays unfinished as long as the test needs, however slow
    // the machine: --frame-stall-ms at its largest (an hour).
    let b = Broker::start_with(&[
        "--shards",
        "1",
        "--frame-bytes-max",
        "1048576",
        "--request-shard-bytes",
        "1048576",
        "--frame-stall-ms",
        FRAME_STALL_MS_MAX,
    ]);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "rb", "partitions": 1}))
        .unwrap();
    let large = |id: u64| {
        let mut bb = BatchBuilder::default();
        for i in 0..600 {
            bb.push(None, &[i as u8; 1000], 1_700_000_000_000);
        }
        Request::ProduceBatch(ProduceBatch {
            topic: "rb".into(),
            partition: 0,
            batch: bb.finish(0, None).unwrap(),
        })
        .to_frame(id, false)
    };
    let handshaken = || {
        let mut s = TcpStream::connect(b.binary_addr()).unwrap();
        s.write_all(&hello_frame()).unwrap();
        let mut head = [0u8; frame::HEADER_BYTES];
        s.read_exact(&mut head).unwrap();
        let mut rest = vec![0u8; u32::from_be_bytes(head[..4].try_into().unwrap()) as usize + 4 - 16];
        s.read_exact(&mut rest).unwrap();
        s
    };
    let held = || {
        b.metric(r#"es_request_budget_bytes_held{shard="0"}"#)
            .unwrap_or(0.0)
    };

    // A: all but the last kilobyte of a 600 KB frame, then nothing.
    let mut a = handshaken();
    let frame_a = large(1);
    a.write_all(&frame_a[..frame_a.len() - 1000]).unwrap();
    wait_for("A's frame is charged", || held() >= frame_a.len() as f64);

    // B: a whole 600 KB frame, which does not fit beside A's.
    let mut bc = handshaken();
    bc.write_all(&large(2)).unwrap();
    wait_for("B's frame waits", || {
        b.metric(r#"es_request_budget_waits_total{listener="binary"}"#)
            .unwrap_or(0.0)
            >= 1.0
    });
    // Small requests still flow, and are appended before B's frame (its
    // records would come first otherwise).
    assert_eq!(
        c.produce("rb", vec![record(None, b"small", None)]).unwrap(),
        vec![(0, 0)]
    );
    // No answer to B while the budget is held: after the broker has
    // answered a request that came later, B's connection has nothing to
    // read (looked at without waiting).
    bc.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    match bc.read(&mut byte) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("no answer while the budget is held, got {other:?}"),
    }
    bc.set_nonblocking(false).unwrap();

    // A goes away: B's frame is read, appended and answered.
    drop(a);
    bc.set_read_timeout(Some(hang_guard())).unwrap();
    let mut head = [0u8; frame::HEADER_BYTES];
    bc.read_exact(&mut head).unwrap();
    assert_eq!(head[4], Kind::ProduceBatchOk as u8, "B's answer");
    let mut rest = vec![0u8; u32::from_be_bytes(head[..4].try_into().unwrap()) as usize + 4 - 16];
    bc.read_exact(&mut rest).unwrap();
    assert_eq!(fetch_all(&c, "rb", 0).len(), 601, "the small record and B's 600");
    wait_for("every charge is released", || held() == 0.0);
}

/// A client that sends most of a large frame and then nothing is closed
/// with `frame_stalled` after `--frame-stall-ms`, and the room its frame
/// held in the shard's request budget is freed: a frame read into the
/// connection's buffer (a large admin request) and a large ProduceBatch
/// read into memory of its own alike.
#[test]
fn a_large_frame_that_stops_arriving_is_refused_and_its_room_freed() {
    use es_protocol::batch::BatchBuilder;
    use es_protocol::requests::produce_batch::ProduceBatch;
    let b = Broker::start_with(&["--shards", "1", "--frame-stall-ms", "300"]);
    let c = connect(&b, false);
    c.admin(Kind::CreateTopic, json!({"name": "st", "partitions": 1}))
        .unwrap();
    let mut bb = BatchBuilder::default();
    for i in 0..300 {
        bb.push(None, &[i as u8; 1000], 1_700_000_000_000);
    }
    let frames = [
        Request::Admin(Kind::DescribeTopic, json!({ "name": "x".repeat(200 << 10) })).to_frame(7, false),
        Request::ProduceBatch(ProduceBatch {
            topic: "st".into(),
            partition: 0,
            batch: bb.finish(0, None).unwrap(),
        })
        .to_frame(8, false),
    ];
    for (i, frame) in frames.iter().enumerate() {
        let mut bytes = hello_frame();
        bytes.extend_from_slice(&frame[..frame.len() - 1000]);
        let got = raw_exchange(&b.binary_addr(), &bytes);
        assert_eq!(last_error_code(&got), "frame_stalled", "frame {i}: {got:?}");
        wait_for("the stalled frame's room is freed", || {
            b.metric(r#"es_request_budget_bytes_held{shard="0"}"#)
                .unwrap_or(0.0)
                == 0.0
        });
    }
    assert_eq!(b.metric("es_binary_stalled_frames_total"), Some(2.0));
    // Nothing was appended.
    assert!(fetch_all(&c, "st", 0).is_empty());
}
