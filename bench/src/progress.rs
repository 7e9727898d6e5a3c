//! The live progress line: every second, on stderr, `\r`-updated, the last
//! second's rates and the totals so far. Ends with the phase's totals and a
//! newline.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::counters::{Counters, Totals};

pub struct Progress {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the line for `label` unless `quiet`; until `measured_from` it
    /// says the phase is warming up.
    pub fn start(label: String, counters: Arc<Counters>, measured_from: Instant, quiet: bool) -> Progress {
        if quiet {
            return Progress {
                done: Arc::new(AtomicBool::new(true)),
                handle: None,
            };
        }
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let handle = std::thread::Builder::new()
            .name("es-bench-progress".into())
            .spawn(move || run(&label, &counters, measured_from, &flag))
            .ok();
        Progress { done, handle }
    }

    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(label: &str, counters: &Counters, measured_from: Instant, done: &AtomicBool) {
    let started = Instant::now();
    let mut next = started + Duration::from_secs(1);
    while !done.load(Ordering::Relaxed) && Instant::now() < measured_from {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if now >= next {
            next += Duration::from_secs(1);
            let line = format!(
                "{label} warming up {:>4.0}s",
                now.duration_since(started).as_secs_f64()
            );
            let _ = write!(std::io::stderr(), "\r{line:<100}");
        }
    }
    let start = Instant::now();
    let mut last = (start, Totals::default());
    let mut next = start + Duration::from_secs(1);
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if now < next {
            continue;
        }
        next += Duration::from_secs(1);
        let t = counters.totals();
        let secs = now.duration_since(last.0).as_secs_f64().max(1e-9);
        let line = format!(
            "{label} {:>4.0}s  {:>10.0} rec/s  {:>9.0} req/s  {:>8.1} MB/s  total {} rec",
            now.duration_since(start).as_secs_f64(),
            (t.records - last.1.records) as f64 / secs,
            (t.requests - last.1.requests) as f64 / secs,
            (t.bytes - last.1.bytes) as f64 / secs / 1e6,
            t.records
        );
        let _ = write!(std::io::stderr(), "\r{line:<100}");
        last = (now, t);
    }
    let t = counters.totals();
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let line = format!(
        "{label} done {:.1}s  {:.0} rec/s  {:.0} req/s  {:.1} MB/s  total {} rec",
        secs,
        t.records as f64 / secs,
        t.requests as f64 / secs,
        t.bytes as f64 / secs / 1e6,
        t.records
    );
    let _ = writeln!(std::io::stderr(), "\r{line:<100}");
}
