//! A full disk, for real: the broker's data directory on a small ext4
//! filesystem of its own, filled by produces.
//!
//! The contract: once the disk is full, produces get 503 `unavailable`
//! saying there is no space, and nothing else; every acknowledged record
//! reads back, and no refused one ever does (offsets stay contiguous: a
//! refused write gives its offsets back); no partition is poisoned
//! (`es_log_write_errors_total` counts only `no_space`). Deleting a topic
//! works on the full disk and its space comes back; the other topic then
//! takes produces again without a restart, a new topic can be created, and
//! after a restart everything acknowledged is there.
//!
//! Needs root, `mkfs.ext4`, `losetup` and `mount` (a loop device): without
//! them it says why and passes without running. The filesystem is
//! unmounted however the test ends ([`LoopFs`]'s drop).

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_error, create_topic, parse_offsets, values_of, wait_for, Broker};
use serde_json::{json, Value};

/// The filesystem's size: room for a few hundred large records.
const FS_BYTES: u64 = 48 << 20;

/// A small ext4 filesystem in a file, loop-mounted for this test.
/// Dropping it unmounts it (lazily if something still holds it), which
/// frees the loop device (`mount -o loop` sets it to clear itself).
struct LoopFs {
    /// The image and the mount point, removed once unmounted.
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

impl LoopFs {
    /// `Err(why)` where this machine cannot make one.
    fn make(bytes: u64) -> Result<LoopFs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root (a loop mount needs it)".into());
        }
        for tool in ["mkfs.ext4", "losetup", "mount", "umount"] {
            if !on_path(tool) {
                return Err(format!("{tool} is not installed"));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("es-full-disk-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let image = dir.path().join("fs.img");
        let file = std::fs::File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        file.set_len(bytes)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        drop(file);
        // -m 0: no blocks kept for root, who runs the broker here and
        // would otherwise write into them.
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0", "-b", "4096", "-E", "nodiscard"])
            .arg(&image))?;
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        run(Command::new("mount").args(["-o", "loop"]).arg(&image).arg(&mount))?;
        Ok(LoopFs { _dir: dir, mount })
    }

    /// Bytes an unprivileged write could still take.
    fn free_bytes(&self) -> u64 {
        let path = CString::new(self.mount.as_os_str().as_bytes()).expect("a path without NUL");
        // SAFETY: statvfs fills `out`, a plain C struct, from a valid path.
        let mut out: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is NUL-terminated and `out` is ours to fill.
        let rc = unsafe { libc::statvfs(path.as_ptr(), &mut out) };
        assert_eq!(rc, 0, "statvfs {}", self.mount.display());
        out.f_bavail as u64 * out.f_frsize as u64
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.mount).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
    }
}

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/sbin", "/usr/sbin"].map(PathBuf::from))
        .any(|d| d.join(tool).is_file())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// One record of `size` bytes whose value names it.
fn record(topic: &str, i: usize, size: usize) -> String {
    let head = format!("{topic}-{i}-");
    format!("{head}{}", "x".repeat(size.saturating_sub(head.len())))
}

fn produce_one(b: &Broker, topic: &str, value: &str) -> (u16, Value) {
    b.post(
        &format!("/v1/topics/{topic}/records"),
        json!({ "records": [ { "value": value, "partition": 0 } ] }),
    )
}

/// Asserts a refusal for want of room: 503 `unavailable` saying so.
#[track_caller]
fn assert_no_space(got: &(u16, Value)) {
    let message = assert_error(got, 503, "unavailable");
    let lower = message.to_lowercase();
    assert!(
        lower.contains("no space") || lower.contains("disk is full"),
        "the refusal says the disk is full: {message}"
    );
}

#[test]
fn a_full_disk_refuses_clearly_and_recovers_without_a_restart() {
    let fs = match LoopFs::make(FS_BYTES) {
        Ok(fs) => fs,
        Err(why) => {
            println!("SKIPPED full_disk: {why}");
            return;
        }
    };
    let data = fs.mount.join("data");
    std::fs::create_dir(&data).unwrap();
    let mut b = Broker::start_prepared(common::DEFAULT_SHARDS, &[], |dir: &Path| {
        std::os::unix::fs::symlink(&data, dir).unwrap();
    });
    let topics = ["filler", "keep"];
    for t in topics {
        create_topic(&b, t, 1);
    }

    // Fill it: large records until both topics are refused, then small
    // ones, so what is left is less than a page.
    let mut acked: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let mut refusals = 0u64;
    let mut i = 0usize;
    for size in [128 << 10, 4 << 10] {
        let mut refused = [false; 2];
        let most = i + 4 * (FS_BYTES as usize / size) + 100;
        while !(refused[0] && refused[1]) {
            assert!(i < most, "the disk never filled ({} bytes free)", fs.free_bytes());
            let t = i % 2;
            let value = record(topics[t], i, size);
            let got = produce_one(&b, topics[t], &value);
            match got.0 {
                200 => {
                    let offsets = parse_offsets(&got.1);
                    assert_eq!(
                        offsets,
                        vec![(0, acked[t].len() as u64)],
                        "offsets stay contiguous: refused writes gave theirs back"
                    );
                    acked[t].push(value);
                }
                _ => {
                    assert_no_space(&got);
                    refused[t] = true;
                    refusals += 1;
                }
            }
            i += 1;
        }
    }
    println!(
        "full: {} + {} records acknowledged, {refusals} refused, {} bytes free",
        acked[0].len(),
        acked[1].len(),
        fs.free_bytes()
    );
    assert!(
        acked[0].len() > 10 && acked[1].len() > 10,
        "both topics took records first"
    );

    // Reads keep serving every acknowledged record, and no refused one.
    for (t, topic) in topics.iter().enumerate() {
        assert_eq!(values_of(&b, topic, 0), acked[t], "{topic} on the full disk");
    }
    let no_space = b
        .metric(r#"es_log_write_errors_total{kind="no_space"}"#)
        .unwrap_or(0.0);
    assert!(
        no_space > 0.0,
        "the refused writes are counted:\n{}",
        b.metrics_text()
    );
    for kind in ["fsync", "io"] {
        let n = b
            .metric(&format!(r#"es_log_write_errors_total{{kind="{kind}"}}"#))
            .unwrap_or(0.0);
        assert_eq!(n, 0.0, "no partition was poisoned ({kind})");
    }

    // A create on the full disk either finds the little room it needs or
    // is refused, changing nothing.
    let created = b.post("/v1/topics", json!({ "name": "more", "partitions": 1 }));
    let listed = |b: &Broker| -> Vec<String> {
        let (status, body) = b.get("/v1/topics");
        assert_eq!(status, 200, "{body}");
        body["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    match created.0 {
        201 => assert!(listed(&b).contains(&"more".to_string())),
        _ => {
            assert_no_space(&created);
            assert!(
                !listed(&b).contains(&"more".to_string()),
                "a refused create creates nothing"
            );
        }
    }

    // The operator's remedy: delete a topic. It needs no room.
    let free_full = fs.free_bytes();
    let got = b.delete("/v1/topics/filler");
    assert_eq!(got.0, 200, "delete on a full disk: {}", got.1);
    assert_eq!(got.1, json!({ "name": "filler", "deleted": true }));
    let filler_bytes: u64 = acked[0].iter().map(|v| v.len() as u64).sum();
    wait_for("the deleted topic's space to come back", || {
        fs.free_bytes() > free_full + filler_bytes / 2
    });

    // Without a restart: the partition that met the full disk takes
    // produces again, and a topic can be created.
    for _ in 0..5 {
        let value = record("keep", i, 128 << 10);
        i += 1;
        let got = produce_one(&b, "keep", &value);
        assert_eq!(got.0, 200, "a produce once there is room: {}", got.1);
        assert_eq!(parse_offsets(&got.1), vec![(0, acked[1].len() as u64)]);
        acked[1].push(value);
    }
    if created.0 != 201 {
        create_topic(&b, "more", 1);
    }
    let after = vec![record("more", i, 1000)];
    let got = produce_one(&b, "more", &after[0]);
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(values_of(&b, "keep", 0), acked[1]);

    // A restart finds everything acknowledged, and the delete done.
    let status = b.sigterm_and_wait();
    assert!(status.success(), "a clean stop after the full disk: {status}");
    b.restart();
    assert_eq!(values_of(&b, "keep", 0), acked[1], "keep after a restart");
    assert_eq!(values_of(&b, "more", 0), after, "more after a restart");
    assert_error(&b.get("/v1/topics/filler"), 404, "topic_not_found");
}
