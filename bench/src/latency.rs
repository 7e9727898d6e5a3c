//! Latency histograms (hdrhistogram, microseconds, 3 significant digits)
//! and their percentiles.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency recorded exactly: one hour; longer ones count as this.
const MAX_US: u64 = 3_600_000_000;

pub struct Latency {
    hist: Histogram<u64>,
}

/// Percentiles of a histogram, in microseconds.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            hist: Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"),
        }
    }

    pub fn record(&mut self, d: Duration) {
        self.record_us(d.as_micros().min(MAX_US as u128) as u64);
    }

    pub fn record_us(&mut self, us: u64) {
        self.hist.saturating_record(us.clamp(1, MAX_US));
    }

    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// Every worker's latencies in one, or the first worker's error.
    pub fn merged(results: Vec<Result<Latency, String>>) -> Result<Latency, String> {
        let mut latency = Latency::new();
        for r in results {
            latency.merge(&r?);
        }
        Ok(latency)
    }

    /// None when nothing was recorded.
    pub fn percentiles(&self) -> Option<Percentiles> {
        if self.hist.is_empty() {
            return None;
        }
        Some(Percentiles {
            count: self.hist.len(),
            p50_us: self.hist.value_at_quantile(0.50),
            p99_us: self.hist.value_at_quantile(0.99),
            p999_us: self.hist.value_at_quantile(0.999),
            max_us: self.hist.max(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_spread() {
        let mut a = Latency::new();
        assert_eq!(a.percentiles(), None);
        for us in 1..=1000 {
            a.record_us(us);
        }
        let mut b = Latency::new();
        b.record(Duration::from_secs(2));
        a.merge(&b);
        let p = a.percentiles().expect("recorded");
        assert_eq!(p.count, 1001);
        assert!((495..=505).contains(&p.p50_us), "{p:?}");
        assert!((985..=1000).contains(&p.p99_us), "{p:?}");
        assert!(p.max_us >= 1_999_000, "{p:?}");
    }
}
