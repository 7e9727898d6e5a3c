//! One measured phase of a run (disk, produce, consume, ...) and its
//! figures; comparisons with other phases of the same run are filled in
//! afterwards (compare.rs).

use crate::counters::Totals;
use crate::latency::{Latency, Percentiles};

#[derive(Clone, Debug)]
pub struct Phase {
    /// `disk`, `produce`, `produce half-rate`, `consume`, `e2e`.
    pub name: String,
    /// The shard count of the broker es-bench started, if it started one
    /// with an explicit count.
    pub shards: Option<usize>,
    pub totals: Totals,
    pub seconds: f64,
    /// The records/s the phase was paced at, if it was.
    pub target_rate: Option<f64>,
    /// Per request: produce send to fsynced ack, fetch round trip, disk
    /// write + fdatasync.
    pub latency: Option<Percentiles>,
    /// e2e: a record's send time to its receipt by a consumer.
    pub e2e: Option<Percentiles>,
    pub compare: Comparison,
}

/// Ratios against other phases of the same run.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// MB/s as a percentage of the `disk` phase's MB/s.
    pub pct_of_disk: Option<f64>,
    /// p99 latency over the `disk` phase's p99 (write + fdatasync).
    pub p99_vs_disk: Option<f64>,
    /// records/s over the same phase's records/s at the first shard count.
    pub vs_first_shards: Option<f64>,
}

impl Phase {
    pub fn new(name: &str, shards: Option<usize>, totals: Totals, seconds: f64, latency: &Latency) -> Phase {
        Phase {
            name: name.to_string(),
            shards,
            totals,
            seconds,
            target_rate: None,
            latency: latency.percentiles(),
            e2e: None,
            compare: Comparison::default(),
        }
    }

    fn per_second(&self, n: u64) -> f64 {
        if self.seconds > 0.0 {
            n as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub fn records_per_s(&self) -> f64 {
        self.per_second(self.totals.records)
    }

    pub fn requests_per_s(&self) -> f64 {
        self.per_second(self.totals.requests)
    }

    /// Value bytes per second, in 10^6 bytes.
    pub fn mb_per_s(&self) -> f64 {
        self.per_second(self.totals.bytes) / 1e6
    }
}
