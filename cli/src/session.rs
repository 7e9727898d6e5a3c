//! A connection to the broker, and the requests every command makes.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::tls::TlsOptions;
use es_protocol::client::{Client, ClientError, Options};
use es_protocol::Kind;
use serde_json::{json, Value};

use crate::args::Global;
use crate::error::{code, connect_error, request_error, CliError, Result};
use crate::topic_info::TopicInfo;

pub struct Session {
    pub client: Arc<Client>,
    /// The broker address, as the user gave it (for messages).
    pub addr: String,
    options: Options,
}

impl Session {
    /// Connects and shakes hands; `gzip` compresses every request frame.
    pub fn open(global: &Global, gzip: bool) -> Result<Session> {
        let options = Options {
            client_id: format!("es-cli/{}", env!("CARGO_PKG_VERSION")),
            api_key: global.api_key.clone().unwrap_or_default(),
            gzip,
            connect_timeout: Duration::from_secs(10),
            tls: tls_options(global)?,
        };
        let addrs = resolve(&global.broker).map_err(|e| {
            CliError::new(
                code::BROKER_UNREACHABLE,
                format!(
                    "cannot find the broker's host in {}: {e}. Set --broker or ES_BROKER to the broker's HOST:PORT.",
                    global.broker
                ),
            )
        })?;
        let client = connect_any(&addrs, &options).map_err(|e| connect_error(&global.broker, e))?;
        Ok(Session {
            client: Arc::new(client),
            addr: global.broker.clone(),
            options,
        })
    }

    /// A new connection with the same options (after the first one was lost).
    pub fn reconnect(&self) -> std::result::Result<Client, ClientError> {
        connect_any(&resolve(&self.addr)?, &self.options)
    }

    /// A topic request; `topic` names the topic in error messages.
    pub fn admin(&self, kind: Kind, body: Value, topic: &str) -> Result<Value> {
        self.client
            .admin(kind, body)
            .map_err(|e| request_error(&self.addr, topic, e))
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
    let host = global
        .broker
        .rsplit_once(':')
        .map_or(global.broker.as_str(), |(host, _)| host);
    tls.server_name = Some(host.trim_start_matches('[').trim_end_matches(']').to_string());
    Ok(Some(tls))
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
