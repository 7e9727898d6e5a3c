//! Metric handles for what runs on every request, registered once per
//! shard: a `metrics` macro call looks its series up each time (hundreds of
//! nanoseconds, and label strings to build), a kept handle does not.

use std::cell::RefCell;
use std::collections::HashMap;

use metrics::{Counter, Histogram};

/// One binary-protocol endpoint's series.
#[derive(Clone)]
pub struct EndpointMetrics {
    pub ok: Counter,
    pub error: Counter,
    pub duration: Histogram,
}

pub struct HotMetrics {
    /// `es_append_duration_seconds`
    pub append_duration: Histogram,
    /// `es_records_appended_total`
    pub records_appended: Counter,
    /// `es_binary_batch_receive_duration_seconds`
    pub batch_receive: Histogram,
    binary: RefCell<HashMap<&'static str, EndpointMetrics>>,
}

impl HotMetrics {
    pub fn new() -> HotMetrics {
        HotMetrics {
            append_duration: metrics::histogram!("es_append_duration_seconds"),
            records_appended: metrics::counter!("es_records_appended_total"),
            batch_receive: metrics::histogram!("es_binary_batch_receive_duration_seconds"),
            binary: RefCell::new(HashMap::new()),
        }
    }

    /// `es_binary_requests_total{endpoint, status}` and
    /// `es_binary_request_duration_seconds{endpoint}`.
    pub fn binary(&self, endpoint: &'static str) -> EndpointMetrics {
        self.binary
            .borrow_mut()
            .entry(endpoint)
            .or_insert_with(|| EndpointMetrics {
                ok: metrics::counter!("es_binary_requests_total", "endpoint" => endpoint, "status" => "ok"),
                error: metrics::counter!("es_binary_requests_total", "endpoint" => endpoint, "status" => "error"),
                duration: metrics::histogram!("es_binary_request_duration_seconds", "endpoint" => endpoint),
            })
            .clone()
    }
}
