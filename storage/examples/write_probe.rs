//! The segment writer's disk pattern without the broker: paced direct
//! appends of 1 MiB, each followed by fdatasync, through glommio's
//! `DmaFile` (io_uring), with the write, the sync and the whole append
//! timed separately. Compare with `es-bench disk --rate R`, which does the
//! same with blocking calls in a thread per writer (what it found:
//! docs/design/disk-threads.md).
//!
//! ```text
//! cargo run --release -p es-storage --example write_probe -- MODE DIR [EXECUTORS] [STEP_BYTES]
//! ```
//!
//! Two writers, 214 appends/s each, 8 s. MODE: `extend` (each write grows
//! the file, as the segment writer's do), `falloc` (the whole file is
//! allocated first), `step` (allocated STEP_BYTES ahead while writing,
//! default 16 MiB), `dsync` (`O_DSYNC` writes, no fdatasync), `relay`
//! (the executor hands each append to a thread of its own, which makes the
//! blocking `pwrite` + `fdatasync`: the shape of the broker's disk threads,
//! docs/storage.md "Disk threads"). EXECUTORS:
//! 1 (both writers on one glommio executor, default) or 2 (one each, as
//! two shards). Env `SPIN_US`: the executors' spin before parking
//! (default 0). The files go in DIR and are removed at the end.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::io::{DmaFile, OpenOptions};
use glommio::LocalExecutorBuilder;

const WRITERS: usize = 2;
const APPEND_BYTES: usize = 1 << 20;
const APPENDS_PER_S: u64 = 214;
const SECONDS: u64 = 8;
/// What `falloc` allocates up front: more than 8 s of appends.
const FALLOC_BYTES: u64 = 1800 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_else(|| "extend".into());
    let dir = PathBuf::from(args.get(2).cloned().unwrap_or_else(|| "write-probe".into()));
    let executors: usize = args
        .get(3)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .clamp(1, WRITERS);
    let step: u64 = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(16 << 20);
    if !["extend", "falloc", "step", "dsync", "relay"].contains(&mode.as_str()) {
        eprintln!("MODE must be extend, falloc, step, dsync or relay");
        std::process::exit(2);
    }
    std::fs::create_dir_all(&dir).expect("create DIR");
    let dir = std::path::absolute(&dir).expect("absolute DIR");
    let paths: Vec<PathBuf> = (0..WRITERS).map(|w| dir.join(format!("probe-{w}.dat"))).collect();
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
    let per = WRITERS / executors;
    let joins: Vec<_> = (0..executors)
        .map(|e| {
            let (mode, mine) = (mode.clone(), paths[e * per..(e + 1) * per].to_vec());
            LocalExecutorBuilder::default()
                .spin_before_park(Duration::from_micros(
                    std::env::var("SPIN_US")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                ))
                .spawn(move || async move {
                    let tasks: Vec<_> = mine
                        .into_iter()
                        .map(|path| glommio::spawn_local(writer(path, mode.clone(), step)))
                        .collect();
                    for t in tasks {
                        t.await;
                    }
                })
                .expect("start an executor")
        })
        .collect();
    for j in joins {
        j.join().expect("executor");
    }
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
}

async fn writer(path: PathBuf, mode: String, step: u64) {
    if mode == "relay" {
        return relay_writer(path).await;
    }
    let flags = if mode == "dsync" { libc::O_DSYNC } else { 0 };
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .custom_flags(flags)
        .dma_open(&path)
        .await
        .expect("open");
    let file = Rc::new(file);
    if mode == "falloc" {
        file.pre_allocate(FALLOC_BYTES, false).await.expect("fallocate");
    }
    let allocated = Rc::new(Cell::new(0u64));
    let busy = Rc::new(Cell::new(false));
    let interval = Duration::from_secs(1) / APPENDS_PER_S as u32;
    let start = Instant::now();
    let (mut writes, mut syncs, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    let mut pos = 0u64;
    let mut k = 0u32;
    while start.elapsed() < Duration::from_secs(SECONDS) {
        let due = start + interval * k;
        k += 1;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            glommio::timer::sleep(wait).await;
        }
        let mut buf = file.alloc_dma_buffer(APPEND_BYTES);
        buf.as_bytes_mut().fill(7);
        let t0 = Instant::now();
        file.write_at(buf, pos).await.expect("write");
        let t1 = Instant::now();
        if mode != "dsync" {
            file.fdatasync().await.expect("fdatasync");
        }
        let t2 = Instant::now();
        pos += APPEND_BYTES as u64;
        if mode == "step" && !busy.get() && allocated.get() < pos + step / 2 {
            allocate_ahead(&file, &allocated, &busy, allocated.get().max(pos) + step);
        }
        writes.push(ms(t1 - t0));
        syncs.push(ms(t2 - t1));
        totals.push(ms(t2 - due));
    }
    report(&path, &mode, &mut writes, &mut syncs, &mut totals);
    let _ = file.close_rc().await;
}

/// `relay`: the executor task paces the appends; a thread of its own does
/// each one's blocking `pwrite` + `fdatasync` back to back and wakes the
/// task (a foreign wake) when both are done.
async fn relay_writer(path: PathBuf) {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new() // blocking-ok: opened before the first append
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .expect("open");
    type Job = (u64, futures::channel::oneshot::Sender<(Duration, Duration)>);
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let thread = std::thread::spawn(move || {
        let mut staging = vec![7u8; APPEND_BYTES + 4096];
        let align = staging.as_ptr().align_offset(4096);
        let buf = &mut staging[align..align + APPEND_BYTES];
        while let Ok((pos, done)) = rx.recv() {
            let t0 = Instant::now();
            file.write_all_at(buf, pos).expect("write"); // blocking-ok: the relay thread
            let t1 = Instant::now();
            file.sync_data().expect("fdatasync"); // blocking-ok: the relay thread
            let _ = done.send((t1 - t0, t1.elapsed()));
        }
    });
    let interval = Duration::from_secs(1) / APPENDS_PER_S as u32;
    let start = Instant::now();
    let (mut writes, mut syncs, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    let mut pos = 0u64;
    let mut k = 0u32;
    while start.elapsed() < Duration::from_secs(SECONDS) {
        let due = start + interval * k;
        k += 1;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            glommio::timer::sleep(wait).await;
        }
        let (done, answer) = futures::channel::oneshot::channel();
        tx.send((pos, done)).expect("relay thread");
        let (w, s) = answer.await.expect("relay thread answers");
        pos += APPEND_BYTES as u64;
        writes.push(ms(w));
        syncs.push(ms(s));
        totals.push(ms(due.elapsed()));
    }
    drop(tx);
    thread.join().expect("relay thread"); // blocking-ok: the probe's last step
    report(&path, "relay", &mut writes, &mut syncs, &mut totals);
}

/// One writer's line: write, fdatasync and from-due percentiles (ms).
fn report(path: &Path, mode: &str, writes: &mut [f64], syncs: &mut [f64], totals: &mut [f64]) {
    println!(
        "{} {mode}: {} appends; write p50 {:.2} p99 {:.2} | fdatasync p50 {:.2} p99 {:.2} | from due p50 {:.2} p99 {:.2} max {:.2} ms",
        name(path),
        totals.len(),
        pct(writes, 0.5),
        pct(writes, 0.99),
        pct(syncs, 0.5),
        pct(syncs, 0.99),
        pct(totals, 0.5),
        pct(totals, 0.99),
        pct(totals, 1.0),
    );
}

/// Allocates the file up to `target` in the background, one at a time.
fn allocate_ahead(file: &Rc<DmaFile>, allocated: &Rc<Cell<u64>>, busy: &Rc<Cell<bool>>, target: u64) {
    let (file, allocated, busy) = (file.clone(), allocated.clone(), busy.clone());
    busy.set(true);
    glommio::spawn_local(async move {
        file.pre_allocate(target, false).await.expect("fallocate");
        allocated.set(target);
        busy.set(false);
    })
    .detach();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The `p` quantile of `v` (sorted in place); 0 when empty.
fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p) as usize]
}
