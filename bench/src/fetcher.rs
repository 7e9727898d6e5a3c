//! A consumer's connection driven by the consumer's own thread: one fetch
//! at a time, written and its answer read on the same thread, with no
//! reader thread and no hand-off between threads per fetch (the client
//! library's `Client` pipelines through a reader thread, which costs a
//! thread wake-up on every answer). The answer's batches are read straight
//! into their own buffer and their checksums checked where they lie, as the
//! library does.

use std::io::Write;
use std::net::TcpStream;

use es_protocol::client::read_response;
use es_protocol::requests::fetch::{Fetch, FetchOk};
use es_protocol::{Request, Response};

pub struct Fetcher {
    sock: TcpStream,
    next_id: u64,
}

impl Fetcher {
    /// Connects and shakes hands.
    pub fn connect(addr: &str, client_id: &str) -> Result<Fetcher, String> {
        let sock = crate::connect::handshaken(addr, client_id)?;
        Ok(Fetcher { sock, next_id: 1 })
    }

    /// One fetch, answered.
    pub fn fetch(&mut self, fetch: Fetch) -> Result<FetchOk, String> {
        match self.call(&Request::Fetch(fetch))? {
            Response::FetchOk(ok) => Ok(ok),
            Response::Error(e) => Err(format!("{}: {}", e.code, e.message)),
            other => Err(format!("unexpected answer {:?}", other.kind())),
        }
    }

    fn call(&mut self, req: &Request) -> Result<Response, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.sock
            .write_all(&req.to_frame(id, false))
            .map_err(|e| format!("send: {e}"))?;
        match read_response(&mut self.sock).map_err(|e| format!("receive: {e}"))? {
            Some((got, resp)) if got == id => Ok(resp),
            Some((got, _)) => Err(format!("an answer to request {got} while waiting for {id}")),
            None => Err("the broker closed the connection".into()),
        }
    }
}
