//! A minimal HTTP/1.1 client for the soak's HTTP workloads: one request
//! at a time on a keep-alive connection (or one with `Connection: close`),
//! responses read by `Content-Length` or chunked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a response may take before the soak gives up on the broker.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

pub struct HttpConn {
    sock: BufReader<TcpStream>,
    host: String,
}

/// A response: status code and body.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl HttpConn {
    pub fn connect(addr: &str) -> Result<HttpConn, String> {
        let sock = TcpStream::connect(addr).map_err(|e| format!("connect to {addr}: {e}"))?;
        sock.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
        sock.set_read_timeout(Some(RESPONSE_TIMEOUT))
            .map_err(|e| format!("read timeout: {e}"))?;
        Ok(HttpConn {
            sock: BufReader::with_capacity(16 << 10, sock),
            host: addr.to_string(),
        })
    }

    /// Sends one request and reads its response. With `close`, asks the
    /// broker to close the connection after it, and waits until it has.
    pub fn request(&mut self, method: &str, path: &str, body: &[u8], close: bool) -> Result<Reply, String> {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        if close {
            req.push_str("Connection: close\r\n");
        }
        req.push_str("\r\n");
        let mut frame = req.into_bytes();
        frame.extend_from_slice(body);
        self.sock
            .get_mut()
            .write_all(&frame)
            .map_err(|e| format!("send {method} {path}: {e}"))?;
        let reply = self.read_reply().map_err(|e| format!("{method} {path}: {e}"))?;
        if close {
            // The broker closes first: the end of the stream says it has.
            let mut rest = Vec::new();
            self.sock
                .read_to_end(&mut rest)
                .map_err(|e| format!("{method} {path}: waiting for the close: {e}"))?;
        }
        Ok(reply)
    }

    fn read_reply(&mut self) -> Result<Reply, String> {
        let status_line = self.line()?;
        let status = status_line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| format!("not an HTTP/1.1 status line: {status_line:?}"))?;
        let mut length = None;
        let mut chunked = false;
        loop {
            let line = self.line()?;
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                return Err(format!("bad header line {line:?}"));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| format!("bad Content-Length {value:?}"))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
        let body = if chunked {
            self.chunked_body()?
        } else {
            let mut body = vec![0u8; length.unwrap_or(0)];
            self.sock
                .read_exact(&mut body)
                .map_err(|e| format!("body: {e}"))?;
            body
        };
        Ok(Reply { status, body })
    }

    fn chunked_body(&mut self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let size_line = self.line()?;
            let size_hex = size_line.split(';').next().unwrap_or("").trim();
            let size =
                usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {size_line:?}"))?;
            let start = body.len();
            body.resize(start + size, 0);
            self.sock
                .read_exact(&mut body[start..])
                .map_err(|e| format!("chunk: {e}"))?;
            let _ = self.line()?;
            if size == 0 {
                return Ok(body);
            }
        }
    }

    /// One header line without its CRLF.
    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.sock.read_line(&mut line) {
            Ok(0) => Err("the broker closed the connection".into()),
            Ok(_) => Ok(line.trim_end_matches(['\r', '\n']).to_string()),
            Err(e) => Err(format!("receive: {e}")),
        }
    }
}

/// `reply` as JSON when its status is `want`, else an error naming both.
pub fn expect_json(reply: Reply, want: u16, what: &str) -> Result<serde_json::Value, String> {
    if reply.status != want {
        return Err(format!(
            "{what}: HTTP {} (wanted {want}): {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        ));
    }
    serde_json::from_slice(&reply.body).map_err(|e| format!("{what}: not JSON ({e})"))
}
