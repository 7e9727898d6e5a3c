//! When a phase runs and which part of it counts: the load starts now,
//! runs a warm-up that is not measured (`--warmup`), then is measured until
//! `until`. A request counts when it was sent (or scheduled) at or after
//! `from`.

use std::time::{Duration, Instant};

#[derive(Copy, Clone, Debug)]
pub struct Window {
    pub from: Instant,
    pub until: Instant,
}

impl Window {
    pub fn starting_now(warmup: Duration, duration: Duration) -> Window {
        let from = Instant::now() + warmup;
        Window {
            from,
            until: from + duration,
        }
    }

    /// Whether something that happened at `t` is measured.
    pub fn counts(&self, t: Instant) -> bool {
        t >= self.from
    }

    /// Whether the load should stop.
    pub fn over(&self) -> bool {
        Instant::now() >= self.until
    }

    /// Seconds from the end of the warm-up to now (what rates divide by).
    pub fn measured_secs(&self) -> f64 {
        Instant::now().saturating_duration_since(self.from).as_secs_f64()
    }
}
