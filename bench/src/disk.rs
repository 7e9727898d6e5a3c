//! The disk phase: the produce write pattern with no broker. `producers`
//! writer threads, each appending `batch x record-size` bytes to a file of
//! its own and calling fdatasync after every write, for `duration`. Its
//! MB/s is the disk's limit for that pattern and its latency is the
//! write + fdatasync time, the figures the broker is compared with. Paced
//! (`rate`), each writer starts its writes on a schedule and latency runs
//! from the scheduled start, exactly as a paced producer is timed: the
//! disk's latency at the load a paced broker phase carried.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::counters::Counters;
use crate::latency::Latency;
use crate::payload;
use crate::phase::Phase;
use crate::progress::Progress;
use crate::rounds::Measured;
use crate::window::Window;

pub struct Pattern {
    pub writers: usize,
    /// Records per write and bytes per record (the write is their product).
    pub batch: usize,
    pub record_size: usize,
    /// O_DIRECT writes of whole pages, the partial last page rewritten by
    /// the next write (as the broker's segment writer does); else buffered.
    pub direct: bool,
    /// Records/s over all writers; `None`: as fast as the disk goes.
    pub rate: Option<f64>,
}

/// Runs the pattern in `dir` for `warmup` (not measured), then `duration`,
/// reported as `name`; the files are removed afterwards.
pub fn run(
    pattern: &Pattern,
    name: &str,
    dir: &Path,
    warmup: Duration,
    duration: Duration,
    quiet: bool,
) -> Result<Phase, String> {
    Ok(measure(pattern, name, dir, warmup, duration, quiet)?.phase(name, None))
}

/// [`run`]'s figures, to add up with other slices (rounds.rs); `label`
/// names the progress line.
pub fn measure(
    pattern: &Pattern,
    label: &str,
    dir: &Path,
    warmup: Duration,
    duration: Duration,
    quiet: bool,
) -> Result<Measured, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let counters = Arc::new(Counters::default());
    let stop = AtomicBool::new(false);
    let window = Window::starting_now(warmup, duration);
    let progress = Progress::start(label.into(), counters.clone(), window.from, quiet);
    let results: Vec<Result<Latency, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..pattern.writers)
            .map(|i| {
                let (counters, stop) = (&counters, &stop);
                let path = dir.join(format!("disk-{i}.dat"));
                s.spawn(move || {
                    let r = writer(&path, i, pattern, window, counters, stop);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a disk writer thread panicked".into()))
            })
            .collect()
    });
    let seconds = window.measured_secs();
    progress.finish();
    for i in 0..pattern.writers {
        let _ = std::fs::remove_file(dir.join(format!("disk-{i}.dat")));
    }
    crate::scratch::settle_filesystem(dir);
    let latency = Latency::merged(results)?;
    Ok(Measured {
        totals: counters.totals(),
        seconds,
        latency,
        target_rate: pattern.rate,
    })
}

fn writer(
    path: &Path,
    index: usize,
    pattern: &Pattern,
    window: Window,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<Latency, String> {
    let mut options = OpenOptions::new();
    options.create(true).truncate(true).write(true);
    if pattern.direct {
        options.custom_flags(libc::O_DIRECT);
    }
    let file: File = options.open(path).map_err(|e| {
        let hint = if pattern.direct && e.raw_os_error() == Some(libc::EINVAL) {
            " (the filesystem refuses O_DIRECT: try --disk-io buffered)"
        } else {
            ""
        };
        format!("cannot open {}: {e}{hint}", path.display())
    })?;
    let records = pattern.batch as u64;
    let buf = payload::value(pattern.batch * pattern.record_size, index as u64);
    let mut appender = Appender::new(file, pattern.direct, buf.len());
    let mut latency = Latency::new();
    // Paced: write k starts at start + k x interval (or at once if late).
    let interval = pattern
        .rate
        .map(|r| Duration::from_secs_f64(records as f64 * pattern.writers as f64 / r));
    let start = Instant::now();
    for k in 0u32.. {
        if window.over() || stop.load(Ordering::Relaxed) || crate::interrupt::requested() {
            break;
        }
        let t0 = match interval {
            Some(every) => {
                let at = start + every.mul_f64(f64::from(k));
                if at >= window.until {
                    break;
                }
                if let Some(wait) = at.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                at
            }
            None => Instant::now(),
        };
        appender
            .append(&buf)
            .map_err(|e| format!("write + fdatasync {}: {e}", path.display()))?;
        if window.counts(t0) {
            latency.record(t0.elapsed());
            counters.add(records, buf.len() as u64);
        }
    }
    Ok(latency)
}

/// Direct I/O alignment: one page, as the broker's segment writer uses.
const PAGE_BYTES: usize = 4096;

/// Appends to a file and fdatasyncs after every append.
struct Appender {
    file: File,
    direct: bool,
    /// File position of the end of what was appended.
    end: u64,
    /// Direct: a page-aligned window of `staging`, holding the partial last
    /// page's bytes at its start, then the next append, then zeros.
    staging: Vec<u8>,
    align: usize,
}

impl Appender {
    fn new(file: File, direct: bool, append_bytes: usize) -> Appender {
        let len = if direct { 2 * PAGE_BYTES + append_bytes } else { 0 };
        let staging = vec![0u8; len + PAGE_BYTES];
        let align = staging.as_ptr().align_offset(PAGE_BYTES);
        Appender {
            file,
            direct,
            end: 0,
            staging,
            align,
        }
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if !self.direct {
            self.file.write_all_at(bytes, self.end)?;
            self.end += bytes.len() as u64;
            return self.file.sync_data();
        }
        let floor = self.end & !(PAGE_BYTES as u64 - 1);
        let head = (self.end - floor) as usize;
        let total = (head + bytes.len()).next_multiple_of(PAGE_BYTES);
        let window = &mut self.staging[self.align..self.align + total];
        // window[..head] still holds the partial page from the last append.
        window[head..head + bytes.len()].copy_from_slice(bytes);
        window[head + bytes.len()..].fill(0);
        self.file.write_all_at(window, floor)?;
        self.end += bytes.len() as u64;
        let new_floor = self.end & !(PAGE_BYTES as u64 - 1);
        let keep = (self.end - new_floor) as usize;
        let from = (new_floor - floor) as usize;
        window.copy_within(from..from + keep, 0);
        self.file.sync_data()
    }
}
