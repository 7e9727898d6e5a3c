//! A panic must not stop the broker.
//!
//! Contract: a request whose handling panics in the listener's own code
//! (the HTTP handler, the binary request task) is answered `internal`
//! (HTTP: 500 with `Connection: close`, then the connection closes; binary:
//! an error frame with the code `internal`, then the connection closes),
//! logged at error level and counted in
//! `es_request_panics_total{listener}`; every other connection, one open
//! across the panics included, keeps working, and the broker stays up.
//! The panic is a debug-build test hook (`ES_TEST_PANIC_TOPIC` in
//! broker/src/listen/listener.rs): a produce or fetch to the topic it names
//! panics there.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{create_topic, hang_guard, produce, read_response, Broker};
use es_protocol::client::{Client, ClientError, Options};
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::produce::ProduceRecord;
use serde_json::json;

/// The topic whose produces and fetches panic.
const BOOM: &str = "boom";
/// Panicking requests of each kind: enough that both shards get some.
const TRIES: usize = 6;

fn binary(b: &Broker) -> Client {
    Client::connect(
        &b.binary_addr(),
        Options {
            client_id: "panic-test".into(),
            ..Options::default()
        },
    )
    .expect("connect and handshake")
}

fn record(value: &str) -> ProduceRecord {
    ProduceRecord {
        partition: Some(0),
        timestamp_ms: None,
        key: None,
        value: value.as_bytes().to_vec(),
    }
}

fn fetch_of(topic: &str) -> Fetch {
    Fetch {
        topic: topic.into(),
        partition: 0,
        offset: Some(0),
        max_records: 100,
        max_bytes: 1 << 20,
        wait_ms: 0,
    }
}

/// One keep-alive HTTP request on a fresh connection: the response, and
/// whether the broker closed the connection after it.
fn http_once(b: &Broker, method: &str, path: &str, body: &str) -> ((u16, serde_json::Value), String, bool) {
    let mut s = TcpStream::connect(b.addr()).expect("connect");
    s.set_read_timeout(Some(hang_guard())).expect("timeout");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let resp = read_response(&mut s).expect("a whole response");
    let mut rest = [0u8; 1];
    let closed = matches!(s.read(&mut rest), Ok(0));
    (resp.pair(), resp.head.to_ascii_lowercase(), closed)
}

#[test]
fn a_request_that_panics_gets_internal_and_the_broker_keeps_serving() {
    // Only this test runs in this binary: nothing reads the environment
    // while it changes.
    std::env::set_var("ES_TEST_PANIC_TOPIC", BOOM);
    let mut b = Broker::start_with(&["--shards", "2"]);
    create_topic(&b, BOOM, 1);
    create_topic(&b, "fine", 1);
    // Open across the panics: it must keep working.
    let survivor = binary(&b);
    survivor
        .produce("fine", vec![record("before")])
        .expect("produce before");

    for i in 0..TRIES {
        // HTTP, a produce and a fetch: 500 internal, and the connection
        // closes although the client asked to keep it.
        let body = json!({"records": [{"value": "x", "partition": 0}]}).to_string();
        let produced = http_once(&b, "POST", &format!("/v1/topics/{BOOM}/records"), &body);
        let fetched = http_once(
            &b,
            "GET",
            &format!("/v1/topics/{BOOM}/partitions/0/records?offset=0"),
            "",
        );
        for ((got, head, closed), what) in [(produced, "produce"), (fetched, "fetch")] {
            assert_eq!(got.0, 500, "HTTP {what} #{i}: {}", got.1);
            assert_eq!(got.1["error"]["code"], "internal", "HTTP {what} #{i}: {}", got.1);
            assert!(head.contains("connection: close"), "HTTP {what} #{i}: {head}");
            assert!(closed, "HTTP {what} #{i}: the connection stayed open");
        }

        // Binary, a produce and a fetch, each on a connection of its own:
        // an `internal` error frame, then the connection is closed.
        for what in ["produce", "fetch"] {
            let c = binary(&b);
            let got = match what {
                "produce" => c.produce(BOOM, vec![record("x")]).map(drop),
                _ => c.fetch(fetch_of(BOOM)).map(drop),
            };
            match got {
                Err(ClientError::Broker { code, .. }) => assert_eq!(code, "internal", "binary {what} #{i}"),
                other => panic!("binary {what} #{i}: {other:?}"),
            }
            let after = c.produce("fine", vec![record("after")]);
            assert!(
                matches!(
                    after,
                    Err(ClientError::Closed | ClientError::Io(_) | ClientError::Protocol(_))
                ),
                "binary {what} #{i}: the connection stayed open: {after:?}"
            );
        }
    }

    b.assert_running();
    // Every other connection works: the one open across the panics, new
    // ones on both listeners.
    survivor
        .produce("fine", vec![record("during")])
        .expect("the open connection");
    let values: Vec<Vec<u8>> = survivor
        .fetch(fetch_of("fine"))
        .expect("fetch on the open connection")
        .to_records()
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(values, vec![b"before".to_vec(), b"during".to_vec()]);
    binary(&b)
        .produce("fine", vec![record("new")])
        .expect("a new binary connection");
    let offsets = produce(
        &b,
        "fine",
        json!({"records": [{"value": "http", "partition": 0}]}),
    );
    assert_eq!(offsets, vec![(0, 3)]);
    let (status, body) = b.get("/health");
    assert_eq!(status, 200, "{body}");

    // Counted, by listener, and logged at error level.
    let count = |listener: &str| b.metric(&format!("es_request_panics_total{{listener=\"{listener}\"}}"));
    assert_eq!(count("http"), Some((2 * TRIES) as f64));
    assert_eq!(count("binary"), Some((2 * TRIES) as f64));
    assert_eq!(count("operation"), Some(0.0));
    let log = b.stderr_text();
    assert!(
        log.lines()
            .any(|l| l.contains("ERROR") && l.contains("a request panicked")),
        "{log}"
    );
    // Nothing was written to the topic whose requests panicked.
    let (status, desc) = b.get(&format!("/v1/topics/{BOOM}"));
    assert_eq!(status, 200, "{desc}");
    assert_eq!(desc["partitions"][0]["high_watermark"], 0, "{desc}");
    assert!(b.sigterm_and_wait().success(), "{}", b.stderr_text());
}
