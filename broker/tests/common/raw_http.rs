//! Raw HTTP over TCP: for paths a URL parser would normalise, bodies the
//! server may refuse before reading them, and garbage.

use super::*;

// ---------------------------------------------------------------------------
// Raw HTTP over TCP (for paths a URL parser would normalise, bodies the
// server may refuse before reading them, and garbage)
// ---------------------------------------------------------------------------

/// One parsed HTTP response.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The body as JSON (a JSON string when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice::<Value>(&self.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.body).into_owned()))
    }

    pub fn pair(&self) -> (u16, Value) {
        (self.status, self.json())
    }
}

/// Sends `request` (complete bytes, head and body) on a fresh connection and
/// reads one response. The bytes are written from another thread while this
/// one reads, so a server that answers before it has read the whole body (a
/// 413) is heard; write errors after that are ignored. `Err` when the
/// connection ends before a complete response.
pub fn raw_exchange(addr: SocketAddr, request: Vec<u8>) -> Result<RawResponse, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    // Only a guard against a broker that never answers nor closes.
    stream
        .set_read_timeout(Some(hang_guard()))
        .map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let write_thread = thread::spawn(move || {
        let _ = writer.write_all(&request);
        let _ = writer.flush();
    });
    let result = read_response(&mut stream);
    // Unblocks the writer if the server stopped reading.
    let _ = stream.shutdown(Shutdown::Both);
    let _ = write_thread.join();
    result
}

/// Builds a request with `Host`, `Content-Length` (when there is a body) and
/// `Connection: close`.
pub fn raw_request(method: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let mut out =
        format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n").into_bytes();
    if !body.is_empty() || method == "POST" || method == "PATCH" || method == "PUT" {
        out.extend_from_slice(
            format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Reads one HTTP/1.1 response (Content-Length, chunked, or until EOF).
pub fn read_response(stream: &mut TcpStream) -> Result<RawResponse, String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let mut eof = false;
    // The head.
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(format!(
                    "connection closed before a complete response head ({} bytes: {:?})",
                    buf.len(),
                    String::from_utf8_lossy(&buf)
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(format!(
                    "reading the response head ({} bytes so far): {e}",
                    buf.len()
                ))
            }
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let header = |name: &str| -> Option<String> {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let content_length: Option<usize> = header("content-length").and_then(|v| v.parse().ok());
    let chunked = header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut body = buf.split_off(head_end);

    let mut fill = |body: &mut Vec<u8>, eof: &mut bool| -> Result<(), String> {
        match stream.read(&mut chunk) {
            Ok(0) => {
                *eof = true;
                Ok(())
            }
            Ok(n) => {
                body.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    };

    if status == 204 || status == 304 || (100..200).contains(&status) {
        body.clear();
    } else if let Some(len) = content_length {
        while body.len() < len {
            if eof {
                return Err(format!("body cut short: {} of {len} bytes", body.len()));
            }
            fill(&mut body, &mut eof).map_err(|e| format!("reading the body: {e}"))?;
        }
        body.truncate(len);
    } else if chunked {
        let mut decoded = Vec::new();
        let mut pos = 0usize;
        loop {
            // Chunk-size line.
            let line_end = loop {
                if let Some(i) = find(&body[pos..], b"\r\n") {
                    break pos + i;
                }
                if eof {
                    return Err("chunked body cut short".into());
                }
                fill(&mut body, &mut eof).map_err(|e| format!("reading a chunk: {e}"))?;
            };
            let size_text = String::from_utf8_lossy(&body[pos..line_end]).into_owned();
            let size_hex = size_text.split(';').next().unwrap_or("").trim();
            let size =
                usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {size_text:?}"))?;
            let data_start = line_end + 2;
            while body.len() < data_start + size + 2 {
                if eof {
                    return Err("chunked body cut short".into());
                }
                fill(&mut body, &mut eof).map_err(|e| format!("reading a chunk: {e}"))?;
            }
            if size == 0 {
                break;
            }
            decoded.extend_from_slice(&body[data_start..data_start + size]);
            pos = data_start + size + 2;
        }
        body = decoded;
    } else {
        while !eof {
            if fill(&mut body, &mut eof).is_err() {
                break;
            }
        }
    }
    Ok(RawResponse { status, head, body })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Writes `bytes` on a fresh connection, half-closes it and reads whatever
/// comes back for up to `read_for` (ignoring errors). For garbage input: the
/// point is that the broker survives it.
pub fn send_garbage(addr: SocketAddr, bytes: &[u8], read_for: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return got;
    };
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(read_for));
    let mut chunk = [0u8; 4096];
    let start = Instant::now();
    while start.elapsed() < read_for {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    got
}
