//! Archive damage and corruption at dump time: a flipped byte makes
//! verify exit 1 naming the entry, a truncated archive "ends before its
//! trailer", a dump that met corruption says so in its trailer
//! (`--on-corrupt fail`) or records the gap (`skip`, `truncate`), and a
//! pending compaction swap is refused. Restore of a damaged archive leaves
//! nothing behind.

mod common;

use common::*;
use serde_json::Value;

fn verify(archive: &std::path::Path) -> (i32, String) {
    let o = tools(&["verify", "-i", archive.to_str().unwrap(), "--deep"]);
    (code(&o), stdout(&o))
}

/// Where `needle` (a segment's first bytes) lies in the archive.
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn a_flipped_byte_names_the_entry_and_a_cut_archive_has_no_trailer() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let logs = small_dir(&data);
    let archive = tmp.path().join("a.tar");
    dump_to(&data, &archive, &[], 0);
    assert_eq!(verify(&archive).0, 0);
    let bytes = std::fs::read(&archive).unwrap();

    let mut bad = bytes.clone();
    let at = find(&bad, &logs[1][..64]) + 100;
    bad[at] ^= 0x10;
    let damaged = tmp.path().join("bad.tar");
    std::fs::write(&damaged, &bad).unwrap();
    let o = tools(&["verify", "-i", damaged.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(
        stdout(&o).contains("entry es-dump/topics/t/0/00000000000000000008.log: SHA-256"),
        "{}",
        stdout(&o)
    );
    let (c, out) = verify(&damaged);
    assert_eq!(c, 1, "{out}");
    assert!(
        out.contains("00000000000000000008.log: bad batch"),
        "--deep names the batch too: {out}"
    );
    let new = tmp.path().join("new");
    restore_to(&damaged, &new, &[], 1);
    assert!(!new.exists(), "nothing restored");
    assert!(std::fs::read_dir(tmp.path()).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".restoring-")));

    for cut in [bytes.len() - 2048, bytes.len() / 2, 700] {
        let short = tmp.path().join("short.tar");
        std::fs::write(&short, &bytes[..cut]).unwrap();
        let o = tools(&["verify", "-i", short.to_str().unwrap()]);
        assert_eq!(code(&o), 1, "cut {cut}");
        let out = stdout(&o);
        assert!(
            out.contains("archive ends before its trailer") || out.contains("archive damaged"),
            "cut {cut}: {out}"
        );
    }
    let short = tmp.path().join("short.tar");
    std::fs::write(&short, &bytes[..bytes.len() - 2048]).unwrap();
    assert!(stdout(&tools(&["verify", "-i", short.to_str().unwrap()]))
        .contains("archive ends before its trailer"));
    assert_eq!(code(&tools(&["verify", "-i", "/nonexistent.tar"])), 2);
}

#[test]
fn corruption_at_dump_time_fail_skip_truncate() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut logs = small_dir(&data);
    // The second batch of the middle segment: offsets 10, 11 at byte 145.
    let second = u32::from_le_bytes(logs[1][8..12].try_into().unwrap()) as usize;
    logs[1][second + 70] ^= 0x02;
    std::fs::write(data.join("topics/t/0").join(seg_name(8)), &logs[1]).unwrap();

    let archive = tmp.path().join("fail.tar");
    let o = dump_to(&data, &archive, &["--json"], 1);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["status"], "failed");
    let p = &v["problems"][0];
    assert_eq!(p["file"], "topics/t/0/00000000000000000008.log");
    assert_eq!(
        (p["position"].as_u64(), p["expected_offset"].as_u64()),
        (Some(second as u64), Some(10))
    );
    let (c, out) = verify(&archive);
    assert_eq!(c, 1);
    assert!(out.contains("status \"failed\""), "{out}");

    for (mode, want_records, gaps) in [("skip", 18, 1), ("truncate", 10, 0)] {
        let archive = tmp.path().join(format!("{mode}.tar"));
        dump_to(&data, &archive, &["--on-corrupt", mode], 1);
        assert_eq!(verify(&archive).0, 0, "{mode}: a lossy dump is complete");
        let new = tmp.path().join(format!("new-{mode}"));
        let o = restore_to(&archive, &new, &["--json"], 0);
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["partitions"][0]["records"], want_records, "{mode}: {v}");
        let out = std::process::Command::new("tar")
            .arg("xOf")
            .arg(&archive)
            .arg("es-dump/topics/t/0/partition.json")
            .output()
            .unwrap();
        let pj: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(pj["gaps"].as_array().unwrap().len(), gaps, "{mode}: {pj}");
        let o = tools(&["check", "--data-dir", new.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{mode}: {}", stdout(&o));
    }
}

#[test]
fn a_pending_compaction_swap_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    small_dir(&data);
    std::fs::write(data.join("topics/t/0/compaction.swap"), b"x").unwrap();
    let archive = tmp.path().join("a.tar");
    let o = dump_to(&data, &archive, &[], 2);
    assert!(
        stderr(&o).contains("an interrupted compaction swap is pending"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("start es-broker once to finish it"));
}

/// `--compress zstd` (the cargo feature `zstd`, on by default): the
/// archive is a zstd stream that verify and restore read as they read a
/// plain one, giving the same data dir; a flipped byte is still caught.
#[cfg(feature = "zstd")]
#[test]
fn a_zstd_archive_verifies_and_restores() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    small_dir(&data);
    let (plain, zst) = (tmp.path().join("a.tar"), tmp.path().join("a.tar.zst"));
    dump_to(&data, &plain, &[], 0);
    dump_to(&data, &zst, &["--compress", "zstd"], 0);
    let bytes = std::fs::read(&zst).unwrap();
    assert_eq!(bytes[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    assert!(bytes.len() < std::fs::metadata(&plain).unwrap().len() as usize);
    assert_eq!(verify(&zst).0, 0);
    let (a, b) = (tmp.path().join("from-plain"), tmp.path().join("from-zstd"));
    for (archive, dir) in [(&plain, &a), (&zst, &b)] {
        restore_to(archive, dir, &[], 0);
    }
    for f in [
        "topics/t/0/00000000000000000008.log",
        "topics/t/0/00000000000000000008.index",
        "groups/g.json",
    ] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f}"
        );
    }
    let mut bad = bytes.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x40;
    let damaged = tmp.path().join("bad.tar.zst");
    std::fs::write(&damaged, &bad).unwrap();
    let (code, out) = verify(&damaged);
    assert_ne!(code, 0, "{out}");
}
