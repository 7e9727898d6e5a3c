//! The produce phase: `producers` producer connections for `warmup` (not
//! measured) and then `duration`, with the live progress line; their
//! latencies merged into one histogram.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use crate::counters::Counters;
use crate::latency::Latency;
use crate::phase::Phase;
use crate::producer::{self, Shared, Spec};
use crate::progress::Progress;
use crate::rounds::Measured;
use crate::window::Window;

/// Runs the producers of `spec` and reports them as `name`.
pub fn run(
    spec: &Spec,
    warmup: Duration,
    duration: Duration,
    name: &str,
    shards: Option<usize>,
    quiet: bool,
) -> Result<Phase, String> {
    Ok(measure(spec, warmup, duration, name, quiet)?.phase(name, shards))
}

/// [`run`]'s figures, to add up with other slices (rounds.rs); `label`
/// names the progress line.
pub fn measure(
    spec: &Spec,
    warmup: Duration,
    duration: Duration,
    label: &str,
    quiet: bool,
) -> Result<Measured, String> {
    let counters = Arc::new(Counters::default());
    let stop = AtomicBool::new(false);
    let acked: Vec<AtomicU64> = (0..spec.partitions).map(|_| AtomicU64::new(0)).collect();
    let shared = Shared {
        counters: &counters,
        stop: &stop,
        acked: &acked,
    };
    let window = Window::starting_now(warmup, duration);
    let progress = Progress::start(label.to_string(), counters.clone(), window.from, quiet);
    let results = producer::run_all(spec, window, &shared);
    let seconds = window.measured_secs();
    progress.finish();
    let latency = Latency::merged(results)?;
    Ok(Measured {
        totals: counters.totals(),
        seconds,
        latency,
        target_rate: spec.rate,
    })
}
