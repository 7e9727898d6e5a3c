//! `es-tools restore -i ARCHIVE|- --data-dir NEW [--topic T]...
//! [--rename OLD=NEW]... [--json]`: a dump back into a data dir a broker
//! can start on. Everything is written into the staging dir
//! `NEW.restoring-<pid>` (locked as a data dir), checked (every SHA-256
//! against the trailer, every batch's CRC), fsynced, and only then renamed
//! to `NEW`, so a crash leaves `NEW` absent or complete; the next restore
//! removes a dead run's staging dir. Indexes are rebuilt with es-format's
//! index rule, their footers saying "cleanly closed", so the broker's next
//! start scans only the last segment, as usual (`restore_entry.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};

use crate::archive_read;
use crate::datadir;
use crate::durable;
use crate::fail::{Fail, Outcome};
use crate::restore_entry::Staging;

pub struct RestoreOptions {
    pub input: String,
    pub data_dir: PathBuf,
    pub topics: Vec<String>,
    pub renames: Vec<(String, String)>,
    pub json: bool,
}

pub fn run(o: &RestoreOptions, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let started = Instant::now();
    let target = &o.data_dir;
    if !datadir::names(target)?.is_empty() {
        return Err(Fail(format!(
            "{} exists and is not empty: restore into a new or empty dir",
            target.display()
        )));
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Fail(format!("{}: not a directory name", target.display())))?;
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Fail::io(&parent, e))?;
    remove_dead_staging(&parent, &name)?;
    let staging = parent.join(format!("{name}.restoring-{}", std::process::id()));
    std::fs::create_dir(&staging).map_err(|e| Fail::io(&staging, e))?;
    let result = fill(o, &staging);
    let (st, problems) = match result {
        Ok(x) => x,
        Err(f) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(f);
        }
    };
    if !problems.is_empty() {
        let _ = std::fs::remove_dir_all(&staging);
        report(o, out, &st, &problems, "nothing restored", started)?;
        return Ok(Outcome::Problems);
    }
    durable::sync_tree(&staging)?;
    std::fs::rename(&staging, target).map_err(|e| {
        Fail(format!(
            "renaming {} to {}: {e}",
            staging.display(),
            target.display()
        ))
    })?;
    durable::sync_dir(&parent)?;
    report_done(o, out, &st, started)?;
    drop(st); // the lock, now on NEW/.lock, is held until here
    Ok(Outcome::Clean)
}

/// Reads the archive into `staging`: the staging state and the problems.
fn fill(o: &RestoreOptions, staging: &Path) -> Result<(Staging, Vec<String>), Fail> {
    let mut st = Staging::new(staging, &o.topics, &o.renames)?;
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
    what: &str,
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
            "restore: {}: {what}",
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

/// Removes `<name>.restoring-<pid>` dirs in `parent` whose process is gone
/// (a restore killed part-way).
fn remove_dead_staging(parent: &Path, name: &str) -> Result<(), Fail> {
    let prefix = format!("{name}.restoring-");
    for n in datadir::names(parent)? {
        let Some(pid) = n.strip_prefix(&prefix).and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: kill(2) with signal 0 sends nothing; it only asks whether the pid exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let dir = parent.join(&n);
            std::fs::remove_dir_all(&dir).map_err(|e| Fail::io(&dir, e))?;
        }
    }
    Ok(())
}
