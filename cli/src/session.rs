//! A connection to the broker, and the requests every command makes.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use es_protocol::client::brokers::{gave_up, leader_wait, next_step, redirect_options, Next};
use es_protocol::client::tls::TlsOptions;
use es_protocol::client::{Client, ClientError, Options};
use es_protocol::limits::{LEADER_WAITS_MAX, REDIRECTS_MAX};
use es_protocol::Kind;
use serde_json::{json, Value};

use crate::args::Global;
use crate::error::{code, connect_error, request_error, CliError, Result};
use crate::topic_info::TopicInfo;

pub struct Session {
    pub client: Arc<Client>,
    /// The broker address connected to, as the user gave it (for messages).
    pub addr: String,
    /// Every broker address given (`--broker a,b`).
    brokers: Vec<String>,
    /// Where the cluster last said a partition is led (a `not_leader`'s
    /// leader): the next reconnect goes there first.
    leader: Mutex<Option<String>>,
    options: Options,
}

impl Session {
    /// Connects to the first of the brokers given that takes a connection
    /// and shakes hands; `gzip` compresses every request frame.
    pub fn open(global: &Global, gzip: bool) -> Result<Session> {
        let options = Options {
            client_id: format!("es-cli/{}", env!("CARGO_PKG_VERSION")),
            api_key: global.api_key.clone().unwrap_or_default(),
            gzip,
            connect_timeout: Duration::from_secs(10),
            tls: tls_options(global)?,
        };
        let brokers = global.brokers();
        let mut unreachable = None;
        for broker in &brokers {
            match connect_to(broker, &options) {
                Ok(client) => {
                    return Ok(Session {
                        client: Arc::new(client),
                        addr: broker.clone(),
                        brokers,
                        leader: Mutex::new(None),
                        options,
                    })
                }
                // Not reachable (refused, no such host): the next one.
                Err(Failed::Resolve(e)) => unreachable = Some((broker.clone(), Failed::Resolve(e))),
                Err(Failed::Client(ClientError::Io(e))) => {
                    unreachable = Some((broker.clone(), Failed::Client(ClientError::Io(e))))
                }
                Err(Failed::Client(e)) => return Err(connect_error(broker, e)),
            }
        }
        Err(match unreachable {
            Some((broker, Failed::Resolve(e))) => CliError::new(
                code::BROKER_UNREACHABLE,
                format!(
                    "cannot find the broker's host in {broker}: {e}. Set --broker or ES_BROKER to the broker's HOST:PORT."
                ),
            ),
            Some((broker, Failed::Client(e))) => connect_error(&broker, e),
            None => CliError::new(code::INVALID_ARGUMENT, "no broker address given (--broker or ES_BROKER)"),
        })
    }

    /// A new connection with the same options (after the first one was
    /// lost): to the leader a `not_leader` named last, if any, else to the
    /// first broker given that takes one.
    pub fn reconnect(&self) -> std::result::Result<Client, ClientError> {
        if let Some(leader) = self.leader.lock().expect("lock").take() {
            if let Ok(client) = connect_to(&leader, &redirect_options(&self.options)) {
                return Ok(client);
            }
        }
        let mut last = None;
        for broker in &self.brokers {
            match connect_to(broker, &self.options) {
                Ok(client) => return Ok(client),
                Err(Failed::Resolve(e)) => last = Some(ClientError::Io(e)),
                Err(Failed::Client(ClientError::Io(e))) => last = Some(ClientError::Io(e)),
                Err(Failed::Client(e)) => return Err(e),
            }
        }
        Err(last.unwrap_or(ClientError::Closed))
    }

    /// Notes where `e` (a `not_leader` naming its leader) says requests
    /// belong: the next [`reconnect`](Session::reconnect) goes there.
    pub fn follow(&self, e: &ClientError) {
        if let Next::Redirect(leader) = next_step(e) {
            *self.leader.lock().expect("lock") = Some(leader.binary_addr);
        }
    }

    /// A topic request; `topic` names the topic in error messages.
    pub fn admin(&self, kind: Kind, body: Value, topic: &str) -> Result<Value> {
        self.admin_routed(kind, body)
            .map_err(|(addr, e)| request_error(&addr, topic, e))
    }

    /// A JSON request, sent where the cluster says it belongs: a
    /// `not_leader` (`not_coordinator`) naming a leader is followed (at most REDIRECTS_MAX
    /// times), `leader_not_available` (or a named leader that refuses
    /// connections: it is down) waited out (at most LEADER_WAITS_MAX
    /// times, backing off). The error comes with the address that gave it.
    pub fn admin_routed(&self, kind: Kind, body: Value) -> std::result::Result<Value, (String, ClientError)> {
        self.routed(kind, body).map(|(_, _, v)| v)
    }

    /// A connection to the cluster's group coordinator (`not_coordinator`
    /// followed, `coordinator_not_available` waited out, as
    /// [`admin_routed`](Session::admin_routed) does), and its address: where
    /// a group member sends its join, heartbeats and commits. Standalone,
    /// this session's connection.
    pub fn coordinator(&self) -> std::result::Result<(Arc<Client>, String), (String, ClientError)> {
        self.routed(Kind::ListGroups, serde_json::json!({}))
            .map(|(c, a, _)| (c, a))
    }

    /// [`admin_routed`](Session::admin_routed), with the connection that
    /// answered and its address.
    fn routed(
        &self,
        kind: Kind,
        body: Value,
    ) -> std::result::Result<(Arc<Client>, String, Value), (String, ClientError)> {
        let (mut client, mut addr) = (self.client.clone(), self.addr.clone());
        let (mut redirects, mut waits) = (0, 0);
        loop {
            let e = match client.admin(kind, body.clone()) {
                Ok(v) => return Ok((client, addr, v)),
                Err(e) => e,
            };
            match next_step(&e) {
                Next::Redirect(leader) if redirects < REDIRECTS_MAX => {
                    redirects += 1;
                    let options = redirect_options(&self.options);
                    match connect_to(&leader.binary_addr, &options) {
                        Ok(c) => {
                            client = Arc::new(c);
                            addr = leader.binary_addr;
                        }
                        // The leader the cluster still names is down: ask
                        // again here once it has elected another.
                        Err(Failed::Client(ClientError::Io(_))) if waits < LEADER_WAITS_MAX => {
                            std::thread::sleep(leader_wait(waits));
                            waits += 1;
                        }
                        Err(Failed::Client(e)) => return Err((leader.binary_addr, e)),
                        Err(Failed::Resolve(e)) => return Err((leader.binary_addr, ClientError::Io(e))),
                    }
                }
                Next::Redirect(_) => {
                    return Err((addr, gave_up(e, &format!("after {REDIRECTS_MAX} redirects"))))
                }
                Next::Wait if waits < LEADER_WAITS_MAX => {
                    std::thread::sleep(leader_wait(waits));
                    waits += 1;
                }
                Next::Wait => {
                    let what = format!("after waiting {LEADER_WAITS_MAX} times for a leader");
                    return Err((addr, gave_up(e, &what)));
                }
                Next::Fail => return Err((addr, e)),
            }
        }
    }

    /// The topic's partitions and config (fails when it does not exist).
    pub fn describe(&self, topic: &str) -> Result<(Value, TopicInfo)> {
        let doc = self.admin(Kind::DescribeTopic, json!({ "name": topic }), topic)?;
        let info = TopicInfo::parse(&doc)?;
        Ok((doc, info))
    }

    /// The largest frame the broker takes (from the handshake).
    pub fn frame_bytes_max(&self) -> usize {
        self.client.hello().frame_bytes_max as usize
    }
}

/// How to speak TLS to the broker: with `--tls-ca FILE`, trusting that
/// file's CA certificates; with `--tls` alone, the system's. The broker's
/// certificate must carry the host of `--broker` (each address it
/// resolves to is connected to under that name).
/// The certificate is checked against the host of each address connected
/// to (`connect_to`), unless a redirect names another.
fn tls_options(global: &Global) -> Result<Option<TlsOptions>> {
    if !global.tls && global.tls_ca.is_none() {
        return Ok(None);
    }
    let mut tls = TlsOptions::new(global.tls_ca.as_deref()).map_err(|e| {
        let message = match &global.tls_ca {
            Some(_) => format!("--tls-ca {e}"),
            None => {
                format!("--tls: {e}. Give the CA that signed the broker's certificate with --tls-ca FILE.")
            }
        };
        CliError::new(code::INVALID_ARGUMENT, message)
    })?;
    tls.server_name = None;
    Ok(Some(tls))
}

/// Why a broker address gave no connection.
enum Failed {
    /// Its host resolves to nothing.
    Resolve(io::Error),
    Client(ClientError),
}

/// Connects to `broker` (HOST:PORT): to the first address its host
/// resolves to that takes a connection. Over TLS the certificate must
/// carry that host.
fn connect_to(broker: &str, options: &Options) -> std::result::Result<Client, Failed> {
    let addrs = resolve(broker).map_err(Failed::Resolve)?;
    let mut options = options.clone();
    if let Some(tls) = options.tls.as_mut() {
        let host = broker.rsplit_once(':').map_or(broker, |(host, _)| host);
        tls.server_name = Some(host.trim_start_matches('[').trim_end_matches(']').to_string());
    }
    connect_any(&addrs, &options).map_err(Failed::Client)
}

/// The addresses `addr` (HOST:PORT) resolves to.
fn resolve(addr: &str) -> io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the name resolves to no address",
        ));
    }
    Ok(addrs)
}

/// Connects to the first of `addrs` that takes a connection: `localhost`
/// resolves to `::1` and `127.0.0.1`, and a broker listens on one of them
/// (es-broker's default `--binary-addr` is `127.0.0.1:9090`). A broker
/// that answers but refuses the handshake is not passed over.
fn connect_any(addrs: &[SocketAddr], options: &Options) -> std::result::Result<Client, ClientError> {
    let mut last = None;
    for a in addrs {
        match Client::connect(&a.to_string(), options.clone()) {
            Ok(client) => return Ok(client),
            Err(ClientError::Io(e)) => last = Some(ClientError::Io(e)),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(ClientError::Closed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    use es_protocol::requests::hello::HelloOk;
    use es_protocol::Response;

    #[test]
    fn connects_to_the_address_that_listens() {
        // Nothing listens on the first address (as on ::1 when `localhost`
        // also resolves to 127.0.0.1, where the broker listens).
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap();
        let broker = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let hello = Response::HelloOk(HelloOk {
                version: es_protocol::PROTOCOL_VERSION,
                frame_bytes_max: 1 << 20,
                inflight_requests_max: 8,
                broker_version: "test".into(),
            });
            s.write_all(&hello.to_frame(0, false)).unwrap();
            s
        });
        let client = connect_any(&[closed, open], &Options::default()).expect("connected to the second");
        assert_eq!(client.hello().broker_version, "test");
        drop(broker.join());
        match connect_any(&[closed], &Options::default()) {
            Err(ClientError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}
