//! A small blocking HTTP/1.1 client for the schema registry (`es schema`):
//! one request per connection (`Connection: close`), plain or over TLS
//! (`https://`, trusting `--tls-ca` or the system's CA certificates), the
//! API key as `Authorization: Bearer`. Answers are bounded
//! ([`ANSWER_BYTES_MAX`]).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::tls::TlsOptions;
use serde_json::Value;

use crate::error::{code, CliError, Result};
use crate::limits::{REGISTRY_ANSWER_BYTES_MAX as ANSWER_BYTES_MAX, REGISTRY_TIMEOUT_SECS};

/// Where the registry is: `http[s]://HOST:PORT[/prefix]`.
pub struct Registry {
    tls: bool,
    host: String,
    port: u16,
    prefix: String,
    api_key: Option<String>,
    ca: Option<std::path::PathBuf>,
}

/// A registry answer: its HTTP status and body.
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Registry {
    /// Parses `url`; says what is wrong with it.
    pub fn new(url: &str, api_key: Option<String>, ca: Option<std::path::PathBuf>) -> Result<Registry> {
        let bad = |why: &str| {
            CliError::new(
                code::INVALID_ARGUMENT,
                format!("--registry {url:?}: {why} (for example http://127.0.0.1:8081)"),
            )
        };
        let (tls, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else {
            return Err(bad("it must start with http:// or https://"));
        };
        let (authority, prefix) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h, p.parse::<u16>().map_err(|_| bad("its port is not a number"))?)
            }
            _ => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(bad("it has no host"));
        }
        Ok(Registry {
            tls,
            host: host.trim_start_matches('[').trim_end_matches(']').to_string(),
            port,
            prefix: prefix.trim_end_matches('/').to_string(),
            api_key,
            ca,
        })
    }

    fn shown(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }

    /// One request; `Err` when the registry cannot be reached or its
    /// answer is not HTTP. Error statuses are answers.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer> {
        let unreachable = |e: io::Error| {
            CliError::new(
                code::BROKER_UNREACHABLE,
                format!(
                    "cannot reach the schema registry at {}: {e}. Is es-broker running with --registry-addr? Set --registry or ES_REGISTRY.",
                    self.shown()
                ),
            )
        };
        let addrs: Vec<_> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(unreachable)?
            .collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host resolves to no address");
        let mut sock = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, Duration::from_secs(REGISTRY_TIMEOUT_SECS)) {
                Ok(s) => {
                    sock = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let sock = sock.ok_or(last).map_err(unreachable)?;
        sock.set_read_timeout(Some(Duration::from_secs(REGISTRY_TIMEOUT_SECS)))
            .map_err(unreachable)?;
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let mut head = format!(
            "{method} {}/{} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nAccept: application/vnd.schemaregistry.v1+json\r\n",
            if self.prefix.is_empty() { String::new() } else { format!("/{}", self.prefix) },
            path.trim_start_matches('/'),
            self.host,
            self.port
        );
        if let Some(key) = &self.api_key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        if body.is_some() {
            head.push_str("Content-Type: application/vnd.schemaregistry.v1+json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", payload.len()));
        let raw = if self.tls {
            let opts = TlsOptions::new(self.ca.as_deref())
                .map_err(|e| CliError::new(code::TLS_ERROR, format!("TLS to the schema registry: {e}")))?;
            let name = rustls_pki_types::ServerName::try_from(self.host.clone())
                .map_err(|e| CliError::new(code::TLS_ERROR, format!("{:?}: {e}", self.host)))?;
            let conn = rustls::ClientConnection::new(Arc::clone(&opts.config), name)
                .map_err(|e| CliError::new(code::TLS_ERROR, e.to_string()))?;
            exchange(rustls::StreamOwned::new(conn, sock), &head, &payload)
        } else {
            exchange(sock, &head, &payload)
        }
        .map_err(|e| {
            if e.get_ref().is_some_and(|i| i.is::<rustls::Error>()) {
                CliError::new(
                    code::TLS_ERROR,
                    format!("TLS to the schema registry at {}: {e}", self.shown()),
                )
            } else {
                unreachable(e)
            }
        })?;
        parse_answer(&raw).ok_or_else(|| {
            CliError::new(
                code::PROTOCOL_ERROR,
                format!("{} did not answer as an HTTP schema registry does", self.shown()),
            )
        })
    }
}

fn exchange(mut s: impl Read + Write, head: &str, payload: &str) -> io::Result<Vec<u8>> {
    s.write_all(head.as_bytes())?;
    s.write_all(payload.as_bytes())?;
    s.flush()?;
    let mut raw = Vec::new();
    let mut limited = s.take(ANSWER_BYTES_MAX as u64 + 1);
    match limited.read_to_end(&mut raw) {
        Ok(_) => {}
        // A TLS peer that closes without close_notify: what came is whole
        // when its length says so (parse_answer checks).
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    if raw.len() > ANSWER_BYTES_MAX {
        return Err(io::Error::other(format!(
            "an answer larger than {ANSWER_BYTES_MAX} bytes"
        )));
    }
    Ok(raw)
}

/// Status and JSON body of a whole HTTP answer (`Content-Length` framed,
/// as the broker sends); `None` when it is not one.
fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let body = &raw[split + 4..];
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let length = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    if length.is_some_and(|n| n != body.len()) {
        return None;
    }
    let body = serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    Some(Answer { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_answers() {
        let r = Registry::new("http://localhost:8081", None, None).unwrap();
        assert_eq!((r.host.as_str(), r.port, r.tls), ("localhost", 8081, false));
        let r = Registry::new("https://[::1]:9/sr/", None, None).unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.tls, r.prefix.as_str()),
            ("::1", 9, true, "sr")
        );
        assert!(Registry::new("ftp://x", None, None).is_err());
        assert!(Registry::new("http://x:port", None, None).is_err());
        let a = parse_answer(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((a.status, a.body), (404, serde_json::json!({})));
        assert!(
            parse_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n{}").is_none(),
            "cut short"
        );
        assert!(parse_answer(b"garbage").is_none());
    }
}
