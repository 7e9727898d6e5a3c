//! `Client`: the HTTP side of a test broker, and the metrics it reads.

use super::*;

// ---------------------------------------------------------------------------
// HTTP client
// ---------------------------------------------------------------------------

/// A plain-HTTP JSON client bound to one broker address.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        // The request timeout only guards against a hang.
        let agent = ureq::AgentBuilder::new()
            .timeout(hang_guard())
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .build();
        Client {
            agent,
            base: format!("http://{addr}"),
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// One request; `Err` only for transport failures (refused, reset,
    /// timeout). Any HTTP status, error statuses included, is `Ok`. A body
    /// that is not JSON comes back as a JSON string.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<(u16, Value), String> {
        let (status, text) = self.try_request_text(method, path, body, timeout)?;
        let value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
        Ok((status, value))
    }

    /// Like [`Client::try_request`], returning the body as text.
    pub fn try_request_text(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<(u16, String), String> {
        let url = self.url(path);
        let mut req = self.agent.request(method, &url);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let result = match body {
            Some(bytes) => req.set("Content-Type", "application/json").send_bytes(bytes),
            None => req.call(),
        };
        let resp = match result {
            Ok(resp) => resp,
            Err(ureq::Error::Status(_, resp)) => resp,
            Err(e) => return Err(format!("{method} {url}: {e}")),
        };
        let status = resp.status();
        let text = resp
            .into_string()
            .map_err(|e| format!("{method} {url}: reading the body: {e}"))?;
        Ok((status, text))
    }

    /// One request that must get an HTTP response (panics on transport errors).
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        self.try_request(method, path, body, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    /// POST of a body given verbatim (malformed JSON and the like).
    pub fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        self.request("POST", path, Some(body.as_bytes()))
    }

    /// POST of arbitrary bytes (not necessarily UTF-8).
    pub fn post_bytes(&self, path: &str, body: &[u8]) -> (u16, Value) {
        self.request("POST", path, Some(body))
    }

    pub fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.request("PATCH", path, Some(body.to_string().as_bytes()))
    }

    pub fn patch_raw(&self, path: &str, body: &str) -> (u16, Value) {
        self.request("PATCH", path, Some(body.as_bytes()))
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.request("DELETE", path, None)
    }

    pub fn try_get(&self, path: &str) -> Result<(u16, Value), String> {
        self.try_request("GET", path, None, None)
    }

    pub fn try_post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        self.try_request("POST", path, Some(body.to_string().as_bytes()), None)
    }

    /// The `/metrics` text.
    pub fn metrics_text(&self) -> String {
        let (status, text) = self
            .try_request_text("GET", "/metrics", None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status, 200, "GET /metrics: {text}");
        text
    }

    /// The value of one Prometheus series, e.g. `es_fsync_rounds_total` or
    /// `es_partition_high_watermark{topic="orders",partition="0"}`. Labels must
    /// match exactly (in any order); `None` when the series is absent.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let want = parse_series(series);
        let text = self.metrics_text();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(parse_sample)
            .find(|(s, _)| *s == want)
            .map(|(_, v)| v)
    }

    /// The sum of every series of metric `name`, whatever their labels;
    /// `None` when there is none.
    pub fn metric_sum(&self, name: &str) -> Option<f64> {
        let text = self.metrics_text();
        let values: Vec<f64> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(parse_sample)
            .filter(|(s, _)| s.0 == name)
            .map(|(_, v)| v)
            .collect();
        if values.is_empty() {
            None
        } else {
            Some(values.iter().sum())
        }
    }
}

/// A series: metric name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

fn parse_series(s: &str) -> Series {
    let s = s.trim();
    match s.find('{') {
        None => (s.to_string(), Vec::new()),
        Some(open) => {
            let close = s.rfind('}').unwrap_or(s.len());
            let mut labels = Vec::new();
            let inner = &s[open + 1..close.max(open + 1)];
            // Label values in these tests never contain `,` or `"`.
            for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if let Some((k, v)) = part.split_once('=') {
                    labels.push((k.trim().to_string(), v.trim().trim_matches('"').to_string()));
                }
            }
            labels.sort();
            (s[..open].to_string(), labels)
        }
    }
}

fn parse_sample(line: &str) -> Option<(Series, f64)> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    // The value follows the closing brace (or the name), then an optional timestamp.
    let split_at = match line.rfind('}') {
        Some(close) => close + 1,
        None => line.find(char::is_whitespace)?,
    };
    let (series, rest) = line.split_at(split_at);
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((parse_series(series), value))
}
