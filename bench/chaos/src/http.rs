//! A minimal HTTP/1.1 client with deadlines for the workload: one request
//! at a time on a keep-alive connection, re-opened after any error.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::outcome::Outcome;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest response body read (the workload's fetches are far smaller).
const BODY_BYTES_MAX: usize = 64 << 20;

pub struct HttpConn {
    addr: String,
    sock: Option<BufReader<TcpStream>>,
    /// The body of the last error answer (`Null` before any): a 421
    /// `not_leader` names the leader in `error.leader`.
    last_error: Value,
}

impl HttpConn {
    pub fn new(addr: &str) -> HttpConn {
        HttpConn {
            addr: addr.to_string(),
            sock: None,
            last_error: Value::Null,
        }
    }

    /// The body of the last error answer.
    pub fn last_error(&self) -> &Value {
        &self.last_error
    }

    /// Sends one request and waits up to `timeout` for its answer: the
    /// status and the JSON body. A 2xx answer is `Ok`; an error answer is
    /// `Refused` with its `error.code`; no answer is `Unknown`.
    pub fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, Outcome> {
        if self.sock.as_ref().is_some_and(|s| closed(s.get_ref())) {
            self.sock = None;
        }
        if self.sock.is_none() {
            let addr: SocketAddr = self
                .addr
                .parse()
                .map_err(|e| Outcome::Refused(format!("{}: {e}", self.addr)))?;
            let sock = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
                .map_err(|e| Outcome::Refused(format!("connect: {e}")))?;
            let _ = sock.set_nodelay(true);
            self.sock = Some(BufReader::new(sock));
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let result = self.exchange(req.as_bytes(), timeout);
        if result.is_err() {
            self.sock = None;
        }
        let (status, bytes) = result.map_err(Outcome::Unknown)?;
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            Ok(json)
        } else {
            let code = json["error"]["code"]
                .as_str()
                .map_or_else(|| format!("HTTP {status}"), str::to_string);
            self.last_error = json;
            Err(Outcome::Refused(code))
        }
    }

    fn exchange(&mut self, req: &[u8], timeout: Duration) -> Result<(u16, Vec<u8>), String> {
        let sock = self.sock.as_mut().ok_or("not connected")?;
        sock.get_ref()
            .set_read_timeout(Some(timeout))
            .and_then(|_| sock.get_ref().set_write_timeout(Some(timeout)))
            .map_err(|e| e.to_string())?;
        sock.get_mut().write_all(req).map_err(|e| format!("send: {e}"))?;
        let status_line = line(sock)?;
        let status = status_line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| format!("not an HTTP/1.1 status line: {status_line:?}"))?;
        let mut length = 0usize;
        let mut chunked = false;
        let mut close = false;
        loop {
            let l = line(sock)?;
            if l.is_empty() {
                break;
            }
            let Some((name, value)) = l.split_once(':') else {
                return Err(format!("bad header line {l:?}"));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value
                    .parse()
                    .map_err(|_| format!("bad Content-Length {value:?}"))?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let size_line = line(sock)?;
                let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(|_| format!("bad chunk size {size_line:?}"))?;
                if body.len() + size > BODY_BYTES_MAX {
                    return Err("response too large".into());
                }
                let start = body.len();
                body.resize(start + size, 0);
                sock.read_exact(&mut body[start..])
                    .map_err(|e| format!("chunk: {e}"))?;
                line(sock)?;
                if size == 0 {
                    break;
                }
            }
        } else {
            if length > BODY_BYTES_MAX {
                return Err("response too large".into());
            }
            body.resize(length, 0);
            sock.read_exact(&mut body).map_err(|e| format!("body: {e}"))?;
        }
        if close {
            self.sock = None;
        }
        Ok((status, body))
    }
}

/// One header line without its CRLF.
fn line(sock: &mut BufReader<TcpStream>) -> Result<String, String> {
    let mut l = String::new();
    match sock.read_line(&mut l) {
        Ok(0) => Err("the broker closed the connection".into()),
        Ok(_) => Ok(l.trim_end_matches(['\r', '\n']).to_string()),
        Err(e) => Err(format!("receive: {e}")),
    }
}

/// A kept-alive connection the broker has closed meanwhile (it restarted):
/// reading it says end of stream at once. Using it would turn a request
/// the broker never saw into an unknown outcome.
fn closed(sock: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    if sock.set_nonblocking(true).is_err() {
        return true;
    }
    let gone = match sock.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = sock.set_nonblocking(false);
    gone
}

/// `s` with every byte outside `A-Z a-z 0-9 - . _ ~` percent-encoded (a
/// path segment or query value).
pub fn escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
