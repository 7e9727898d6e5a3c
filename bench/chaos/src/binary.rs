//! A binary-protocol connection with deadlines, one request at a time: a
//! broker that is paused or killed turns into an error the workload can
//! classify, never a hang.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use es_protocol::client::{self, Options};
use es_protocol::{Request, Response};

use crate::outcome::Outcome;

/// How long connecting and the handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

pub struct BinConn {
    addr: String,
    client_id: String,
    sock: Option<TcpStream>,
    next_id: u64,
}

impl BinConn {
    pub fn new(addr: &str, client_id: &str) -> BinConn {
        BinConn {
            addr: addr.to_string(),
            client_id: client_id.to_string(),
            sock: None,
            next_id: 1,
        }
    }

    /// Sends `req` and waits up to `timeout` for its answer. An error frame
    /// is `Refused`, an answer that never came `Unknown`; a connection that
    /// could not be made sent nothing (`Refused`).
    pub fn call(&mut self, req: &Request, timeout: Duration) -> Result<Response, Outcome> {
        if self.sock.is_none() {
            let options = Options {
                client_id: self.client_id.clone(),
                connect_timeout: CONNECT_TIMEOUT,
                ..Options::default()
            };
            let (sock, _) = client::connect(&self.addr, &options)
                .map_err(|e| Outcome::Refused(format!("connect: {e}")))?;
            self.sock = Some(sock);
        }
        let sock = self.sock.as_mut().expect("connected above");
        let id = self.next_id;
        self.next_id += 1;
        let sent = sock
            .set_read_timeout(Some(timeout))
            .and_then(|_| sock.set_write_timeout(Some(timeout)))
            .and_then(|_| sock.write_all(&req.to_frame(id, false)));
        if let Err(e) = sent {
            self.sock = None;
            return Err(Outcome::Unknown(format!("send: {e}")));
        }
        match client::read_response(sock) {
            Ok(Some((got, Response::Error(e)))) if got == id => Err(Outcome::Refused(e.code)),
            Ok(Some((got, resp))) if got == id => Ok(resp),
            Ok(Some((_, Response::Error(e)))) => {
                self.sock = None;
                Err(Outcome::Unknown(format!(
                    "connection error {}: {}",
                    e.code, e.message
                )))
            }
            Ok(Some((got, _))) => {
                self.sock = None;
                Err(Outcome::Unknown(format!("answer to request {got}, not {id}")))
            }
            Ok(None) => {
                self.sock = None;
                Err(Outcome::Unknown("connection closed".into()))
            }
            Err(e) => {
                self.sock = None;
                Err(Outcome::Unknown(e.to_string()))
            }
        }
    }
}
