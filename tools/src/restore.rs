//! `es-tools restore -i ARCHIVE|- --data-dir NEW [--cold-dir C]
//! [--topic T]... [--rename OLD=NEW]... [--json]`: a dump back into a data
//! dir a broker can start on. Everything is written into the staging dir
//! `NEW.restoring-<pid>` (locked as a data dir; `staged.rs`), checked
//! (every SHA-256 against the trailer, every batch's CRC), fsynced, and
//! only then renamed to `NEW`, so a crash leaves `NEW` absent or complete.
//! Indexes are rebuilt with es-format's index rule, their footers saying
//! "cleanly closed", so the broker's next start scans only the last
//! segment, as usual (`restore_entry.rs`).
//!
//! Cold segments go to `NEW/cold`, or with `--cold-dir C` to `C`, staged
//! the same way and renamed into place just before `NEW` with a marker
//! file in it, removed once `NEW` is in place: a `C` with the marker and
//! no `NEW` is what a crash between the two renames leaves, and the next
//! restore removes it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};

use crate::archive_read;
use crate::datadir;
use crate::durable;
use crate::fail::{Fail, Outcome};
use crate::restore_entry::Staging;
use crate::staged::Staged;

/// In a `--cold-dir` renamed into place before its data dir.
const COLD_MARKER: &str = ".es-tools-restoring";

pub struct RestoreOptions {
    pub input: String,
    pub data_dir: PathBuf,
    pub cold_dir: Option<PathBuf>,
    pub topics: Vec<String>,
    pub renames: Vec<(String, String)>,
    pub merge: bool,
    pub json: bool,
}

pub fn run(o: &RestoreOptions, out: &mut dyn Write) -> Result<Outcome, Fail> {
    if o.merge && !datadir::names(&o.data_dir)?.is_empty() {
        return crate::merge::run(o, out);
    }
    let started = Instant::now();
    let cold = o.cold_dir.as_ref().filter(|c| **c != o.data_dir.join("cold"));
    if let Some(c) = cold {
        settle_cold(c, &o.data_dir)?;
    }
    let data = Staged::begin(&o.data_dir)?;
    let cold = match cold.map(|c| Staged::begin(c)).transpose() {
        Ok(c) => c,
        Err(f) => {
            data.abandon();
            return Err(f);
        }
    };
    let abandon = |cold: &Option<Staged>| {
        data.abandon();
        if let Some(c) = cold {
            c.abandon();
        }
    };
    let cold_root = cold
        .as_ref()
        .map_or_else(|| data.staging.join("cold"), |c| c.staging.clone());
    let filled = fill(o, &data.staging, &cold_root, Default::default()).and_then(|(st, problems)| {
        if problems.is_empty() {
            st.write_extras()?;
        }
        Ok((st, problems))
    });
    let (st, problems) = match filled {
        Ok(x) => x,
        Err(f) => {
            abandon(&cold);
            return Err(f);
        }
    };
    if !problems.is_empty() {
        abandon(&cold);
        report(o, out, &st, &problems, started)?;
        return Ok(Outcome::Problems);
    }
    if let Some(c) = &cold {
        std::fs::create_dir_all(&c.staging).map_err(|e| Fail::io(&c.staging, e))?;
        durable::write(&c.staging.join(COLD_MARKER), b"")?;
        if let Err(f) = c.commit() {
            abandon(&cold);
            return Err(f);
        }
    }
    data.commit()?;
    if let Some(c) = &cold {
        let marker = c.target.join(COLD_MARKER);
        std::fs::remove_file(&marker).map_err(|e| Fail::io(&marker, e))?;
        durable::sync_dir(&c.target)?;
    }
    report_done(o, out, &st, started)?;
    drop(st); // the lock, now on NEW/.lock, is held until here
    Ok(Outcome::Clean)
}

/// A cold dir with the marker is left from a restore that died between
/// its two renames: removed if its data dir never came, else complete.
fn settle_cold(cold: &std::path::Path, data: &std::path::Path) -> Result<(), Fail> {
    let marker = cold.join(COLD_MARKER);
    if !marker.exists() {
        return Ok(());
    }
    if datadir::names(data)?.is_empty() {
        std::fs::remove_dir_all(cold).map_err(|e| Fail::io(cold, e))
    } else {
        std::fs::remove_file(&marker).map_err(|e| Fail::io(&marker, e))
    }
}

/// Reads the archive into the staging dirs: the staging state and the
/// problems. The archive's topics `exists` names (as restored) are left out.
pub fn fill(
    o: &RestoreOptions,
    staging: &std::path::Path,
    cold: &std::path::Path,
    exists: std::collections::BTreeSet<String>,
) -> Result<(Staging, Vec<String>), Fail> {
    let mut st = Staging::new(staging, cold, &o.topics, &o.renames, exists)?;
    let reader = archive_read::open(&o.input)?;
    let seen = archive_read::read(reader, |path, r| st.entry(path, r));
    if let Some(f) = st.io_error.take() {
        return Err(f);
    }
    let mut problems = seen.problems;
    if problems.is_empty() {
        if let Some(m) = &seen.manifest {
            problems.extend(st.missing_partitions(m));
        }
    }
    Ok((st, problems))
}

fn report(
    o: &RestoreOptions,
    out: &mut dyn Write,
    st: &Staging,
    problems: &[String],
    started: Instant,
) -> Result<(), Fail> {
    if o.json {
        let v = json!({"status": "problems", "data_dir": o.data_dir.display().to_string(), "problems": problems,
                       "partitions": st.partitions, "elapsed_ms": started.elapsed().as_millis() as u64});
        writeln!(out, "{v}")?;
    } else {
        for p in problems {
            writeln!(out, "problem {p}")?;
        }
        writeln!(
            out,
            "restore: {}: nothing restored",
            crate::report::count(problems.len(), "problem")
        )?;
    }
    Ok(())
}

fn report_done(o: &RestoreOptions, out: &mut dyn Write, st: &Staging, started: Instant) -> Result<(), Fail> {
    let parts: &[Value] = &st.partitions;
    let ms = started.elapsed().as_millis() as u64;
    if o.json {
        let v = json!({"status": "complete", "data_dir": o.data_dir.display().to_string(), "partitions": parts, "elapsed_ms": ms});
        writeln!(out, "{v}")?;
    } else {
        for p in parts {
            writeln!(out, "partition {}", crate::report::line(p))?;
        }
        writeln!(
            out,
            "restore: {} partitions into {} in {ms} ms: complete",
            parts.len(),
            o.data_dir.display()
        )?;
    }
    Ok(())
}
