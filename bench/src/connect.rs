//! es-bench's own connections (a lean producer's, a consumer's): opened
//! and handshaken as the client library does it, then driven by one thread
//! without the library's reader thread.

use std::net::TcpStream;

use es_protocol::client::{self, Options};

/// A connection to `addr` past its handshake, TCP_NODELAY on.
pub fn handshaken(addr: &str, client_id: &str) -> Result<TcpStream, String> {
    let options = Options {
        client_id: client_id.to_string(),
        ..Options::default()
    };
    client::connect(addr, &options)
        .map(|(sock, _)| sock)
        .map_err(|e| format!("connect to {addr}: {e}"))
}
