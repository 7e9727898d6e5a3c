//! The binary protocol against the real broker: handshake, topic requests,
//! produce and fetch (plain and gzip), pipelining many requests on one
//! connection, long-poll, error frames with the HTTP codes, and hostile
//! frames that get an error frame and a closed connection while the broker
//! keeps serving everyone else.
//!
//! Files: `requests.rs` (each kind of request and its answers),
//! `frames.rs` (frame sizes, split and trickling frames, hostile frames),
//! `budgets.rs` (what connections and large frames cost the broker),
//! `producers.rs` (producers' batches, groups, durability under kill -9).

mod budgets;
#[path = "../common/mod.rs"]
mod common;
mod frames;
mod producers;
mod requests;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{hang_guard, wait_for, Broker};
use es_protocol::client::{Client, ClientError, Options};
use es_protocol::frame;
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::hello::Hello;
use es_protocol::requests::produce::{Produce, ProduceRecord};
use es_protocol::{Kind, Request, Response};
use serde_json::json;

/// The largest `--frame-stall-ms` (an hour): for tests whose frames must
/// never be refused as stalled, whatever the pauses of a slow machine.
const FRAME_STALL_MS_MAX: &str = "3600000";

fn connect(b: &Broker, gzip: bool) -> Client {
    Client::connect(
        &b.binary_addr(),
        Options {
            client_id: "binary-test".into(),
            gzip,
            ..Options::default()
        },
    )
    .expect("connect and handshake")
}

fn record(key: Option<&str>, value: &[u8], partition: Option<u32>) -> ProduceRecord {
    ProduceRecord {
        partition,
        timestamp_ms: None,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.to_vec(),
    }
}

/// A producer's batch of `values`, without keys, all at `timestamp_ms`.
fn batch_of(values: &[Vec<u8>], timestamp_ms: i64) -> Vec<u8> {
    let mut bb = es_protocol::batch::BatchBuilder::default();
    for v in values {
        bb.push(None, v, timestamp_ms);
    }
    bb.finish(0, None).unwrap()
}

fn fetch_all(c: &Client, topic: &str, partition: u32) -> Vec<(u64, Option<Vec<u8>>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let ok = c
            .fetch(Fetch {
                topic: topic.into(),
                partition,
                offset: Some(offset),
                max_records: 10_000,
                max_bytes: 1 << 20,
                wait_ms: 0,
            })
            .expect("fetch");
        if ok.is_empty() {
            return out;
        }
        offset = ok.next_offset;
        out.extend(ok.to_records().into_iter().map(|r| (r.offset, r.key, r.value)));
    }
}

fn raw_exchange(addr: &str, bytes: &[u8]) -> Vec<Response> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok((f, used)) = frame::parse(&got[at..], 1 << 24) {
        out.push(Response::from_frame(&f).expect("a response frame"));
        at += used;
    }
    assert_eq!(at, got.len(), "only whole frames come back");
    out
}

fn hello_frame() -> Vec<u8> {
    Request::Hello(Hello {
        min_version: 1,
        max_version: 1,
        client_id: "raw".into(),
        api_key: String::new(),
    })
    .to_frame(0, false)
}

fn last_error_code(frames: &[Response]) -> String {
    match frames.last() {
        Some(Response::Error(e)) => e.code.clone(),
        other => panic!("expected an error frame last, got {other:?}"),
    }
}
