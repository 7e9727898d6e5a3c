//! `dump --from-offset/--to-offset/--from-time/--to-time`: whole batches
//! from the first that overlaps the range to the last; a segment cut at
//! its front takes its first kept batch's base as its name; the restore
//! checks clean.

mod common;

use common::*;
use serde_json::Value;

/// The base offsets of the batches in each restored segment, by file name.
fn restored(tmp: &std::path::Path, range: &[&str]) -> Vec<(String, Vec<u64>)> {
    listed(tmp, range, "base")
}

/// The record offsets of each restored segment, by file name.
fn restored_records(tmp: &std::path::Path, range: &[&str]) -> Vec<(String, Vec<u64>)> {
    listed(tmp, range, "records")
}

fn listed(tmp: &std::path::Path, range: &[&str], what: &str) -> Vec<(String, Vec<u64>)> {
    let data = tmp.join("data");
    if !data.exists() {
        small_dir(&data);
    }
    let name = range.join("_");
    let archive = tmp.join(format!("{name}.tar"));
    dump_to(&data, &archive, range, 0);
    let new = tmp.join(format!("new{name}"));
    restore_to(&archive, &new, &[], 0);
    let o = tools(&["check", "--data-dir", new.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let dir = new.join("topics/t/0");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let o = tools(&["dump-log", "--json", "--records", dir.join(&n).to_str().unwrap()]);
            let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
            let batches = v["batches"].as_array().unwrap().iter();
            let got = if what == "base" {
                batches.map(|b| b["base"].as_u64().unwrap()).collect()
            } else {
                batches
                    .flat_map(|b| {
                        b["records"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| r["offset"].as_u64().unwrap())
                    })
                    .collect()
            };
            (n, got)
        })
        .collect()
}

#[test]
fn offset_and_time_ranges_keep_whole_batches() {
    let tmp = tempfile::tempdir().unwrap();
    // Segments 0, 8, 16; batches of two records; timestamps 1000 + offset.
    assert_eq!(
        restored(tmp.path(), &["--from-offset", "11", "--to-offset", "16"]),
        vec![
            ("00000000000000000010.log".to_string(), vec![10, 12, 14]),
            ("00000000000000000016.log".to_string(), vec![16]),
        ]
    );
    assert_eq!(
        restored(tmp.path(), &["--from-time", "1005", "--to-time", "1006"]),
        vec![("00000000000000000004.log".to_string(), vec![4, 6])]
    );
    assert_eq!(
        restored(tmp.path(), &["--from-offset", "20"]),
        vec![("00000000000000000020.log".to_string(), vec![20, 22])]
    );
    assert_eq!(restored(tmp.path(), &["--from-offset", "100"]), vec![]);
}

#[test]
fn exact_cuts_the_boundary_batches_to_the_range() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(
        restored_records(
            tmp.path(),
            &["--from-offset", "11", "--to-offset", "16", "--exact"]
        ),
        vec![
            ("00000000000000000010.log".to_string(), vec![11, 12, 13, 14, 15]),
            ("00000000000000000016.log".to_string(), vec![16]),
        ]
    );
    assert_eq!(
        restored_records(
            tmp.path(),
            &["--from-time", "1005", "--to-time", "1006", "--exact"]
        ),
        vec![("00000000000000000004.log".to_string(), vec![5, 6])]
    );
    assert_eq!(
        restored_records(
            tmp.path(),
            &["--from-offset", "11", "--to-offset", "11", "--exact"]
        ),
        vec![("00000000000000000010.log".to_string(), vec![11])]
    );
    // Without --exact, whole batches.
    assert_eq!(
        restored_records(tmp.path(), &["--from-offset", "11", "--to-offset", "11"]),
        vec![("00000000000000000010.log".to_string(), vec![10, 11])]
    );
}
