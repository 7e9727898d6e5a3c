//! `es` with several brokers and a cluster's answers, without a cluster:
//! small fake brokers on loopback speak the binary protocol and answer
//! `not_leader` (or a group request `not_coordinator`) pointing at another
//! fake or at a real standalone
//! es-broker; `es cluster status` against a fake that describes a cluster
//! and against a real standalone broker; and against three real brokers
//! as a cluster, its partitions counted.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use es_protocol::frame::{self, HEADER_BYTES};
use es_protocol::requests::hello::HelloOk;
use es_protocol::{Kind, Request, Response};
use serde_json::json;

type Answer = dyn Fn(&Request) -> Response + Send + Sync;

/// A fake broker: shakes hands at version 2, then answers each request
/// with `answer`. Its address and how many requests it was sent.
fn fake(answer: impl Fn(&Request) -> Response + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let answer: Arc<Answer> = Arc::new(answer);
    let counter = seen.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(sock) = sock else { return };
            let (answer, counter) = (answer.clone(), counter.clone());
            std::thread::spawn(move || serve(sock, &*answer, &counter));
        }
    });
    (addr, seen)
}

fn serve(mut s: TcpStream, answer: &Answer, seen: &AtomicUsize) {
    loop {
        let mut header = [0u8; HEADER_BYTES];
        if s.read_exact(&mut header).is_err() {
            return;
        }
        let Ok((h, total)) = frame::check_header(&header, 1 << 24) else {
            return;
        };
        let mut payload = vec![0u8; total - HEADER_BYTES];
        if s.read_exact(&mut payload).is_err() {
            return;
        }
        let f = frame::from_parts(h, payload, 1 << 24).unwrap();
        let req = Request::from_frame(&f).unwrap();
        let resp = match &req {
            Request::Hello(_) => Response::HelloOk(HelloOk {
                version: 2,
                frame_bytes_max: 1 << 20,
                inflight_requests_max: 8,
                broker_version: "fake".into(),
            }),
            other => {
                seen.fetch_add(1, Ordering::SeqCst);
                answer(other)
            }
        };
        if s.write_all(&resp.to_frame(f.request_id, false)).is_err() {
            return;
        }
    }
}

/// `not_leader` naming the leader at `binary_addr`.
fn not_leader(binary_addr: &str) -> Response {
    let details = json!({"leader": {"node_id": 2, "http_addr": "127.0.0.1:1", "binary_addr": binary_addr}});
    Response::error_with_details(
        "not_leader",
        format!("node 2 leads it at {binary_addr}"),
        details.as_object().cloned(),
        2,
    )
}

fn topics(name: &str) -> Response {
    Response::AdminOk(json!({"topics": [{"name": name, "partitions": 1}]}))
}

/// An address where nothing listens.
fn closed() -> String {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

#[test]
fn the_next_broker_is_tried_when_one_refuses_connections() {
    let (up, seen) = fake(|_| topics("at-the-second"));
    let list = format!("{},{up}", closed());
    let out = ok(run_es(&["--broker", &list, "topic", "list"], b"", &[]));
    assert!(stdout(&out).contains("at-the-second"), "{}", stdout(&out));
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    // The same as repeated flags and from ES_BROKER.
    let out = ok(run_es(
        &["--broker", &closed(), "--broker", &up, "topic", "list"],
        b"",
        &[],
    ));
    assert!(stdout(&out).contains("at-the-second"));
    let out = ok(run_es(&["topic", "list"], b"", &[("ES_BROKER", &list)]));
    assert!(stdout(&out).contains("at-the-second"));
    // None up: the last refusal is said.
    let err = fails(&run_es(&["--broker", &closed(), "topic", "list"], b"", &[]), 1);
    assert!(err.contains("cannot reach the broker"), "{err}");
}

#[test]
fn a_request_follows_not_leader_to_the_leader() {
    let (leader, at_leader) = fake(|_| topics("at-the-leader"));
    let to = leader.clone();
    let (follower, at_follower) = fake(move |_| not_leader(&to));
    let out = ok(run_es(&["--broker", &follower, "topic", "list"], b"", &[]));
    assert!(stdout(&out).contains("at-the-leader"), "{}", stdout(&out));
    assert_eq!(at_follower.load(Ordering::SeqCst), 1);
    assert_eq!(at_leader.load(Ordering::SeqCst), 1);
}

#[test]
fn a_group_request_follows_not_coordinator_to_the_coordinator() {
    let (coordinator, at_coordinator) = fake(|_| {
        Response::AdminOk(json!({"groups": [
            {"name": "at-the-coordinator", "members": 1, "generation": 3, "topics": ["t"]}
        ]}))
    });
    let to = coordinator.clone();
    let (other, at_other) = fake(move |_| {
        let details = json!({"coordinator": {"node_id": 2, "http_addr": "127.0.0.1:1", "binary_addr": to}});
        Response::error_with_details(
            "not_coordinator",
            "node 2 coordinates groups",
            details.as_object().cloned(),
            2,
        )
    });
    let out = ok(run_es(&["--broker", &other, "group", "list"], b"", &[]));
    assert!(stdout(&out).contains("at-the-coordinator"), "{}", stdout(&out));
    assert_eq!(at_other.load(Ordering::SeqCst), 1);
    assert_eq!(at_coordinator.load(Ordering::SeqCst), 1);
}

#[test]
fn a_redirect_loop_is_refused() {
    let b_addr = Arc::new(Mutex::new(String::new()));
    let to_b = b_addr.clone();
    let (a, at_a) = fake(move |_| not_leader(&to_b.lock().unwrap()));
    let to_a = a.clone();
    let (b, at_b) = fake(move |_| not_leader(&to_a));
    *b_addr.lock().unwrap() = b;
    let err = fails(&run_es(&["--broker", &a, "topic", "list"], b"", &[]), 1);
    assert!(
        err.contains("not_leader") && err.contains("gave up after 3 redirects"),
        "{err}"
    );
    let asked = at_a.load(Ordering::SeqCst) + at_b.load(Ordering::SeqCst);
    assert_eq!(asked, 4, "the first ask and 3 redirects: {err}");
}

#[test]
fn produce_follows_not_leader_to_a_real_broker() {
    let broker = Broker::start();
    ok(broker.es(&["topic", "create", "t", "--partitions", "2"]));
    let to = broker.addr.clone();
    let (follower, at_follower) = fake(move |_| not_leader(&to));
    let out = ok(run_es(
        &["--broker", &follower, "produce", "t", "--key-separator", ":"],
        b"a:1\nb:2\nc:3\n",
        &[],
    ));
    assert!(
        at_follower.load(Ordering::SeqCst) >= 2,
        "describe and produce asked the follower first"
    );
    let _ = out;
    let read = ok(broker.es(&["consume", "t", "--from-beginning", "--max", "3", "--json"]));
    let mut values: Vec<String> = json_lines(&read)
        .iter()
        .map(|r| r["value"].as_str().unwrap().to_string())
        .collect();
    values.sort();
    assert_eq!(values, ["1", "2", "3"], "each record written once, at the leader");
}

#[test]
fn cluster_status_prints_nodes_and_partitions() {
    let doc = json!({
        "cluster_id": "c-1", "node_id": 1, "controller": {"leader": 2, "term": 4},
        "nodes": [
            {"node_id": 1, "raft_addr": "127.0.0.1:7001", "http_addr": "127.0.0.1:8081", "binary_addr": "127.0.0.1:9091", "state": "up"},
            {"node_id": 2, "raft_addr": "127.0.0.1:7002", "http_addr": "127.0.0.1:8082", "binary_addr": "127.0.0.1:9092", "state": "up"},
        ],
        "partitions": {"total": 6, "leaderless": 1, "under_replicated": 2}
    });
    let answer = doc.clone();
    let (addr, _) = fake(move |req| match req {
        Request::Admin(Kind::DescribeCluster, _) => Response::AdminOk(answer.clone()),
        _ => Response::error("invalid_request", "only DescribeCluster here"),
    });
    let out = ok(run_es(&["--broker", &addr, "cluster", "status"], b"", &[]));
    let text = stdout(&out);
    assert!(
        text.starts_with("cluster c-1  this node 1  controller leader 2 (term 4)"),
        "{text}"
    );
    assert!(
        has_row(
            &text,
            &[
                "2",
                "127.0.0.1:7002",
                "127.0.0.1:8082",
                "127.0.0.1:9092",
                "up",
                "leader",
                "-"
            ]
        ),
        "{text}"
    );
    assert!(
        text.contains("partitions: 6, leaderless 1, under-replicated 2"),
        "{text}"
    );
    let out = ok(run_es(
        &["--broker", &addr, "--json", "cluster", "status"],
        b"",
        &[],
    ));
    assert_eq!(json_lines(&out), vec![doc]);
}

#[test]
fn cluster_status_on_a_standalone_broker_says_so() {
    let broker = Broker::start();
    let err = fails(&broker.es(&["cluster", "status"]), 1);
    assert!(err.contains("runs standalone (no --peers)"), "{err}");
    let err = fails(&broker.es(&["--json", "cluster", "status"]), 1);
    let doc: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(doc["error"]["code"], "standalone", "{err}");
}

#[test]
fn cluster_status_of_a_real_cluster_counts_its_partitions() {
    let raft: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers = raft
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}=127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let nodes: Vec<Broker> = (0..3)
        .map(|i| {
            let (id, addr) = ((i + 1).to_string(), format!("127.0.0.1:{}", raft[i]));
            Broker::start_unready(&[
                "--node-id",
                &id,
                "--peers",
                &peers,
                "--raft-addr",
                &addr,
                "--raft-insecure",
                "--raft-heartbeat-ms",
                "100",
                "--raft-election-timeout-ms",
                "800",
            ])
        })
        .collect();
    wait_until("the topic created once the cluster has a controller", || {
        let o = nodes[0].es(&[
            "topic",
            "create",
            "t",
            "--partitions",
            "4",
            "--replication-factor",
            "3",
        ]);
        o.status.success().then_some(())
    });
    let text = wait_until("every partition led and in sync", || {
        let o = nodes[1].es(&["cluster", "status"]);
        let text = stdout(&o);
        text.contains("partitions: 4, leaderless 0, under-replicated 0")
            .then_some(text)
    });
    assert!(text.starts_with("cluster "), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{}", raft[2])), "{text}");
    let out = ok(nodes[2].es(&["--json", "cluster", "status"]));
    let doc = &json_lines(&out)[0];
    assert_eq!(doc["partitions"]["total"], 4, "{doc}");
    assert!(doc["partitions"]["leaderless"].is_u64(), "{doc}");
}
