//! es-bench's own connections (a lean producer's, a consumer's): opened
//! and handshaken as the client library does it, then driven by one thread
//! without the library's reader thread.

use std::net::TcpStream;
use std::sync::OnceLock;

use es_protocol::client::{self, brokers, Options};

/// `--api-key`, set once by main before any connection.
static API_KEY: OnceLock<String> = OnceLock::new();

/// Sets the key every connection sends in its Hello.
pub fn set_api_key(key: String) {
    let _ = API_KEY.set(key);
}

/// The client options every es-bench connection starts from: the default,
/// with `--api-key`.
pub fn options() -> Options {
    Options {
        api_key: API_KEY.get().cloned().unwrap_or_default(),
        ..Options::default()
    }
}

/// A connection to `addr` past its handshake, TCP_NODELAY on.
pub fn handshaken(addr: &str, client_id: &str) -> Result<TcpStream, String> {
    let options = Options {
        client_id: client_id.to_string(),
        ..options()
    };
    client::connect(addr, &options)
        .map(|(sock, _)| sock)
        .map_err(|e| format!("connect to {addr}: {e}"))
}

/// The first of `addrs` that takes a connection (one that refuses it or
/// cannot be reached is passed over).
pub fn first_reachable(addrs: &[String], options: &Options) -> Result<String, String> {
    brokers::connect_first(addrs, options)
        .map(|(_, addr)| addr)
        .map_err(|e| format!("connect to {}: {e}", addrs.join(",")))
}
