//! Several brokers: the addresses a client may start from, and requests
//! that follow a cluster's answers.
//!
//! A cluster answers a request for a partition this node does not lead
//! with `not_leader`, naming the leader (Error frame details, protocol
//! version 2). [`Brokers::call`] sends the request there, at most
//! [`REDIRECTS_MAX`] times per request (brokers that keep pointing
//! elsewhere are refused, not followed forever); waits out
//! `leader_not_available` (and a `not_leader` that knows no leader, or
//! names one that refuses connections: it is down, and an election
//! follows) with a doubling backoff, at most [`LEADER_WAITS_MAX`] times;
//! and returns
//! `outcome_unknown`, and every other error, as it came: a produce whose
//! outcome is unknown is never sent again behind the caller's back. Both
//! `not_leader` and `leader_not_available` are definite (nothing was
//! written), so resending after them writes nothing twice.
//!
//! Connecting tries each address in turn: one that refuses the connection
//! (or cannot be reached) is passed over; one that answers and refuses the
//! handshake is not.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Client, ClientError, Options};
use crate::limits::{LEADER_WAITS_MAX, LEADER_WAIT_MS_FIRST, LEADER_WAIT_MS_MAX, REDIRECTS_MAX};
use crate::requests::error::Leader;
use crate::{ErrorCode, Request, Response};

/// The broker addresses of `values`, each a HOST:PORT or a comma-separated
/// list of them (`--broker a:9090,b:9090`, repeated or not): trimmed,
/// empty entries dropped, each address once, in the order given.
pub fn parse_list<S: AsRef<str>>(values: &[S]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        for a in v.as_ref().split(',').map(str::trim).filter(|a| !a.is_empty()) {
            if !out.iter().any(|o| o == a) {
                out.push(a.to_string());
            }
        }
    }
    out
}

/// Connects to the first of `addrs` that takes a connection, with its
/// address. A refused or unreachable address is passed over (the next is
/// tried); any other failure (a refused handshake, TLS) is returned.
pub fn connect_first(addrs: &[String], options: &Options) -> Result<(Client, String), ClientError> {
    let mut last = None;
    for addr in addrs {
        match connect_to(addr, options) {
            Ok(c) => return Ok((c, addr.clone())),
            Err(ClientError::Io(e)) => last = Some(ClientError::Io(e)),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| ClientError::Protocol("no broker address given".into())))
}

/// Connects to `addr`; over TLS, checking the certificate against `addr`'s
/// host unless the options name the server (a leader named by a redirect
/// is checked against its own host: `redirect_options`).
pub fn connect_to(addr: &str, options: &Options) -> Result<Client, ClientError> {
    Client::connect(addr, options.clone())
}

/// What a failed request calls for.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Send it to this leader (its binary address).
    Redirect(Leader),
    /// No leader now: wait, then send it again.
    Wait,
    /// Report the error as it is.
    Fail,
}

/// What `e` calls for: a `not_leader` naming its leader (or a
/// `not_coordinator` naming the group coordinator) is a redirect; one
/// naming none, or `leader_not_available` (`coordinator_not_available`),
/// a wait; anything else (a
/// `not_leader` for several partitions, `outcome_unknown`, a lost
/// connection) goes back to the caller.
pub fn next_step(e: &ClientError) -> Next {
    let ClientError::Broker { code, details, .. } = e else {
        return Next::Fail;
    };
    match code.as_str() {
        ErrorCode::LEADER_NOT_AVAILABLE | ErrorCode::COORDINATOR_NOT_AVAILABLE => Next::Wait,
        ErrorCode::NOT_LEADER => match details.as_ref().and_then(|d| d.get("leader")) {
            Some(serde_json::Value::Null) => Next::Wait,
            Some(v) => Leader::from_json(v).map_or(Next::Fail, Next::Redirect),
            // No details (a version 1 answer) or a per-partition map.
            None => Next::Fail,
        },
        // A group request: the same, at the group coordinator.
        ErrorCode::NOT_COORDINATOR => match details.as_ref().and_then(|d| d.get("coordinator")) {
            Some(serde_json::Value::Null) => Next::Wait,
            Some(v) => Leader::from_json(v).map_or(Next::Fail, Next::Redirect),
            None => Next::Fail,
        },
        _ => Next::Fail,
    }
}

/// How long the `n`th wait for a leader (from 0) lasts.
pub fn leader_wait(n: u32) -> Duration {
    let ms = LEADER_WAIT_MS_FIRST.saturating_mul(1u64 << n.min(20));
    Duration::from_millis(ms.min(LEADER_WAIT_MS_MAX))
}

/// A connection to one of several brokers, moved to where the cluster
/// says a request belongs. `Send + Sync`.
pub struct Brokers {
    addrs: Vec<String>,
    options: Options,
    current: Mutex<(Arc<Client>, String)>,
}

impl Brokers {
    /// Connects to the first of `addrs` that takes a connection
    /// ([`connect_first`]).
    pub fn connect(addrs: &[String], options: Options) -> Result<Brokers, ClientError> {
        let (client, addr) = connect_first(addrs, &options)?;
        Ok(Brokers {
            addrs: addrs.to_vec(),
            options,
            current: Mutex::new((Arc::new(client), addr)),
        })
    }

    /// The connection requests go to now.
    pub fn client(&self) -> Arc<Client> {
        self.current.lock().expect("lock").0.clone()
    }

    /// The address of the connection requests go to now.
    pub fn addr(&self) -> String {
        self.current.lock().expect("lock").1.clone()
    }

    /// The addresses given.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// A new connection after the current one was lost: the first of the
    /// given addresses that takes one.
    pub fn reconnect(&self) -> Result<Arc<Client>, ClientError> {
        let (client, addr) = connect_first(&self.addrs, &self.options)?;
        let client = Arc::new(client);
        *self.current.lock().expect("lock") = (client.clone(), addr);
        Ok(client)
    }

    /// Sends `req` and waits for its answer, following the cluster: see
    /// the module's doc. The connection a redirect opens becomes the
    /// current one.
    pub fn call(&self, req: &Request) -> Result<Response, ClientError> {
        let (mut redirects, mut waits) = (0usize, 0u32);
        loop {
            let err = match self.client().call(req) {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            match next_step(&err) {
                Next::Redirect(leader) if redirects < REDIRECTS_MAX => {
                    redirects += 1;
                    match connect_to(&leader.binary_addr, &redirect_options(&self.options)) {
                        Ok(client) => {
                            *self.current.lock().expect("lock") = (Arc::new(client), leader.binary_addr);
                        }
                        // The leader the cluster still names is down:
                        // ask again here once it has elected another.
                        Err(ClientError::Io(_)) if waits < LEADER_WAITS_MAX => {
                            std::thread::sleep(leader_wait(waits));
                            waits += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Next::Redirect(_) => return Err(gave_up(err, &format!("after {REDIRECTS_MAX} redirects"))),
                Next::Wait if waits < LEADER_WAITS_MAX => {
                    std::thread::sleep(leader_wait(waits));
                    waits += 1;
                }
                Next::Wait => {
                    return Err(gave_up(
                        err,
                        &format!("after waiting {LEADER_WAITS_MAX} times for a leader"),
                    ))
                }
                Next::Fail => return Err(err),
            }
        }
    }
}

/// The options for a connection to a leader a redirect named: over TLS,
/// its certificate is checked against the leader's own host.
pub fn redirect_options(options: &Options) -> Options {
    #[allow(unused_mut)]
    let mut options = options.clone();
    #[cfg(feature = "tls")]
    if let Some(tls) = options.tls.as_mut() {
        tls.server_name = None;
    }
    options
}

/// `e` with what the client tried before giving up added to its message.
pub fn gave_up(e: ClientError, what: &str) -> ClientError {
    match e {
        ClientError::Broker {
            code,
            message,
            details,
        } => ClientError::Broker {
            code,
            message: format!("{message} (gave up {what})"),
            details,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{self, HEADER_BYTES};
    use crate::requests::hello::HelloOk;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake broker on a free port: shakes hands at version 2, then
    /// answers every request with `answer(the request's number on this
    /// server, from 0)`. Returns its address and its request counter.
    fn fake(answer: impl Fn(usize) -> Response + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(AtomicUsize::new(0));
        let (answer, counter) = (Arc::new(answer), seen.clone());
        std::thread::spawn(move || {
            for sock in listener.incoming() {
                let (answer, counter) = (answer.clone(), counter.clone());
                std::thread::spawn(move || serve(sock.unwrap(), &*answer, &counter));
            }
        });
        (addr, seen)
    }

    fn serve(mut s: TcpStream, answer: &dyn Fn(usize) -> Response, seen: &AtomicUsize) {
        let mut first = true;
        loop {
            let mut header = [0u8; HEADER_BYTES];
            if s.read_exact(&mut header).is_err() {
                return;
            }
            let (h, total) = frame::check_header(&header, 1 << 20).unwrap();
            let mut payload = vec![0u8; total - HEADER_BYTES];
            s.read_exact(&mut payload).unwrap();
            let f = frame::from_parts(h, payload, 1 << 20).unwrap();
            let resp = if first {
                first = false;
                Response::HelloOk(HelloOk {
                    version: 2,
                    frame_bytes_max: 1 << 20,
                    inflight_requests_max: 4,
                    broker_version: "fake".into(),
                })
            } else {
                answer(seen.fetch_add(1, Ordering::SeqCst))
            };
            if s.write_all(&resp.to_frame(f.request_id, false)).is_err() {
                return;
            }
        }
    }

    fn not_leader(to: Option<&str>) -> Response {
        let leader = match to {
            Some(addr) => serde_json::json!({"node_id": 2, "http_addr": "127.0.0.1:1", "binary_addr": addr}),
            None => serde_json::Value::Null,
        };
        let details = serde_json::json!({ "leader": leader });
        Response::error_with_details("not_leader", "node 2 leads it", details.as_object().cloned(), 2)
    }

    fn ok() -> Response {
        Response::AdminOk(serde_json::json!({"answered": true}))
    }

    fn req() -> Request {
        Request::Admin(crate::Kind::ListTopics, serde_json::json!({}))
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
    fn parses_lists_and_repeats() {
        assert_eq!(
            parse_list(&["a:1,b:2", " c:3 ,", "a:1"]),
            vec!["a:1".to_string(), "b:2".into(), "c:3".into()]
        );
        assert!(parse_list(&[",", ""]).is_empty());
    }

    #[test]
    fn follows_one_redirect_to_the_leader() {
        let (leader, at_leader) = fake(|_| ok());
        let to = leader.clone();
        let (follower, at_follower) = fake(move |_| not_leader(Some(&to)));
        let b = Brokers::connect(std::slice::from_ref(&follower), Options::default()).unwrap();
        assert_eq!(b.call(&req()).unwrap(), ok());
        assert_eq!(at_follower.load(Ordering::SeqCst), 1);
        assert_eq!(at_leader.load(Ordering::SeqCst), 1);
        assert_eq!(b.addr(), leader, "the leader's connection is kept");
    }

    #[test]
    fn refuses_a_redirect_loop() {
        // Two brokers each naming the other as the leader.
        let b_addr = Arc::new(Mutex::new(String::new()));
        let to_b = b_addr.clone();
        let (a, at_a) = fake(move |_| not_leader(Some(&to_b.lock().unwrap())));
        let to_a = a.clone();
        let (b, at_b) = fake(move |_| not_leader(Some(&to_a)));
        *b_addr.lock().unwrap() = b;
        let brokers = Brokers::connect(&[a], Options::default()).unwrap();
        let e = brokers.call(&req()).unwrap_err();
        assert_eq!(e.code(), Some("not_leader"));
        assert!(e.to_string().contains("gave up after 3 redirects"), "{e}");
        let asked = at_a.load(Ordering::SeqCst) + at_b.load(Ordering::SeqCst);
        assert_eq!(asked, REDIRECTS_MAX + 1, "the first ask and one per redirect");
    }

    #[test]
    fn tries_the_next_broker_when_one_refuses_connections() {
        let (up, at_up) = fake(|_| ok());
        let addrs = [closed(), up.clone()];
        let b = Brokers::connect(&addrs, Options::default()).unwrap();
        assert_eq!(b.addr(), up);
        assert_eq!(b.call(&req()).unwrap(), ok());
        assert_eq!(at_up.load(Ordering::SeqCst), 1);
        match Brokers::connect(&[closed()], Options::default()) {
            Err(ClientError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn waits_out_an_election_then_succeeds() {
        let (addr, seen) = fake(|n| match n {
            0 => Response::error("leader_not_available", "electing"),
            1 => not_leader(None),
            _ => ok(),
        });
        let b = Brokers::connect(&[addr], Options::default()).unwrap();
        assert_eq!(b.call(&req()).unwrap(), ok());
        assert_eq!(seen.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_named_leader_that_is_down_is_waited_out() {
        let dead = closed();
        let (addr, seen) = fake(move |n| match n {
            0 | 1 => not_leader(Some(&dead)),
            _ => ok(),
        });
        let b = Brokers::connect(std::slice::from_ref(&addr), Options::default()).unwrap();
        assert_eq!(b.call(&req()).unwrap(), ok());
        assert_eq!(seen.load(Ordering::SeqCst), 3, "asked again after each wait");
        assert_eq!(b.addr(), addr, "still on the broker that answered");
    }

    #[test]
    fn outcome_unknown_is_never_resent() {
        let (addr, seen) = fake(|_| Response::error("outcome_unknown", "proposed; result unknown"));
        let b = Brokers::connect(&[addr], Options::default()).unwrap();
        let e = b.call(&req()).unwrap_err();
        assert_eq!(e.code(), Some("outcome_unknown"));
        assert_eq!(seen.load(Ordering::SeqCst), 1, "sent once");
    }

    #[test]
    fn what_each_answer_calls_for() {
        let broker = |code: &str, details: serde_json::Value| ClientError::Broker {
            code: code.into(),
            message: String::new(),
            details: details.as_object().cloned(),
        };
        let leader = serde_json::json!({"node_id": 3, "http_addr": "h", "binary_addr": "b:1"});
        assert_eq!(
            next_step(&broker("not_leader", serde_json::json!({ "leader": leader }))),
            Next::Redirect(Leader {
                node_id: 3,
                http_addr: "h".into(),
                binary_addr: "b:1".into()
            })
        );
        assert_eq!(
            next_step(&broker(
                "not_coordinator",
                serde_json::json!({ "coordinator": leader })
            )),
            Next::Redirect(Leader::from_json(&leader).unwrap())
        );
        assert_eq!(
            next_step(&broker(
                "not_coordinator",
                serde_json::json!({ "coordinator": null })
            )),
            Next::Wait
        );
        assert_eq!(
            next_step(&broker("coordinator_not_available", serde_json::Value::Null)),
            Next::Wait
        );
        let spanning = serde_json::json!({"leaders": {"0": leader}});
        assert_eq!(next_step(&broker("not_leader", spanning)), Next::Fail);
        assert_eq!(
            next_step(&broker("not_leader", serde_json::Value::Null)),
            Next::Fail
        );
        assert_eq!(
            next_step(&broker("leader_not_available", serde_json::Value::Null)),
            Next::Wait
        );
        assert_eq!(
            next_step(&broker("outcome_unknown", serde_json::Value::Null)),
            Next::Fail
        );
        assert_eq!(next_step(&ClientError::Closed), Next::Fail);
        assert_eq!(leader_wait(0), Duration::from_millis(LEADER_WAIT_MS_FIRST));
        assert_eq!(leader_wait(40), Duration::from_millis(LEADER_WAIT_MS_MAX));
    }
}
