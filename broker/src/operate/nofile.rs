//! The file-descriptor budget (`ulimit -n`, `RLIMIT_NOFILE`): what the
//! broker may hold open at once, checked at start (before the shards run)
//! and after every topic create.
//!
//! At start the soft limit is raised to the hard limit when the budget
//! needs more (as memlock.rs does for locked memory); past the hard limit
//! the broker warns, naming what to raise, and runs: an operation that
//! finds no descriptor free fails with 503 `unavailable` and nothing else
//! (docs/operations.md, "File descriptors"), so refusing to start would
//! only turn a tight limit into an outage.

use crate::limits::{
    ACTIVE_SEGMENT_DESCRIPTORS, CLOSED_SEGMENT_DESCRIPTORS, NOFILE_CEILING_DESCRIPTORS,
    RESERVE_BASE_DESCRIPTORS, RESERVE_SHARD_DESCRIPTORS,
};
use crate::operate::config::Config;

/// What the broker may hold open at once, by what holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub partitions: u64,
    pub per_partition: u64,
    pub open_segments: u64,
    pub connections: u64,
    pub reserve: u64,
}

impl Budget {
    pub fn total(&self) -> u64 {
        self.partitions * self.per_partition
            + self.open_segments * CLOSED_SEGMENT_DESCRIPTORS
            + self.connections
            + self.reserve
    }

    fn describe(&self) -> String {
        format!(
            "{} partitions x {} descriptors + --open-segments-max {} + --connections-max {} + {} reserved",
            self.partitions, self.per_partition, self.open_segments, self.connections, self.reserve
        )
    }
}

/// The budget of `config` with `partitions` partitions.
pub fn budget(config: &Config, partitions: u64) -> Budget {
    let shards = config.shard_count() as u64;
    Budget {
        partitions,
        // Without disk threads the writer needs no duplicate.
        per_partition: if config.disk_threads == 0 {
            ACTIVE_SEGMENT_DESCRIPTORS - 1
        } else {
            ACTIVE_SEGMENT_DESCRIPTORS
        },
        open_segments: config.open_segments_per_shard() as u64 * shards,
        connections: config.connections_max as u64,
        reserve: RESERVE_BASE_DESCRIPTORS + RESERVE_SHARD_DESCRIPTORS * shards,
    }
}

/// The soft and hard `RLIMIT_NOFILE`.
fn limits() -> Result<(u64, u64), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!(
            "reading the open-files limit: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// At start, before the shards run: raises the soft limit to the hard
/// limit (at most [`NOFILE_CEILING_DESCRIPTORS`]) when the budget needs
/// more than it, warns when even that is short, and publishes both as
/// gauges. Returns the soft limit in force.
pub fn ensure(config: &Config, partitions: u64) -> Result<u64, String> {
    let need = budget(config, partitions);
    let (soft, hard) = limits()?;
    let mut limit = soft;
    if soft < need.total() {
        let target = hard.min(NOFILE_CEILING_DESCRIPTORS).max(soft);
        if target > soft {
            let raised = libc::rlimit {
                rlim_cur: target,
                rlim_max: hard,
            };
            // SAFETY: setrlimit reads one rlimit we own.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                tracing::info!(
                    from = soft,
                    to = target,
                    "raised the soft open-files limit (ulimit -n)"
                );
                limit = target;
            }
        }
    }
    metrics::gauge!("es_descriptors_limit").set(limit as f64);
    report(&need, limit);
    Ok(limit)
}

/// After a topic create or delete: publishes the budget of `partitions`
/// and warns if it passed the limit in force.
pub fn check(config: &Config, partitions: u64) {
    let Ok((soft, _)) = limits() else { return };
    report(&budget(config, partitions), soft);
}

fn report(need: &Budget, limit: u64) {
    metrics::gauge!("es_descriptors_budget").set(need.total() as f64);
    if need.total() > limit {
        tracing::warn!("{}", message(need, limit));
    }
}

/// What to do about a budget above the open-files limit `limit`.
pub fn message(need: &Budget, limit: u64) -> String {
    format!(
        "the broker may need {} file descriptors ({}) but the open-files limit (ulimit -n) is {limit}: \
         past it, an operation that needs a descriptor fails with 503 unavailable until one frees. \
         Raise the limit: `ulimit -n {}` in the shell that starts the broker (the hard limit too: \
         `ulimit -Hn`), `LimitNOFILE={}` in a systemd unit, `--ulimit nofile={}` for docker; or lower \
         --connections-max or --open-segments-max (docs/operations.md, \"File descriptors\")",
        need.total(),
        need.describe(),
        need.total(),
        need.total(),
        need.total(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::CONNECTIONS_MAX_DEFAULT;
    use clap::Parser;

    fn config(args: &[&str]) -> Config {
        let mut argv = vec!["es-broker"];
        argv.extend_from_slice(args);
        Config::try_parse_from(argv).expect("parses")
    }

    #[test]
    fn the_budget_adds_what_holds_descriptors() {
        let c = config(&["--shards", "2"]);
        let b = budget(&c, 1000);
        assert_eq!(b.per_partition, 3);
        assert_eq!(
            b.open_segments,
            es_storage::limits::OPEN_SEGMENTS_MAX_DEFAULT as u64
        );
        assert_eq!(b.connections, CONNECTIONS_MAX_DEFAULT as u64);
        assert_eq!(
            b.total(),
            3000 + es_storage::limits::OPEN_SEGMENTS_MAX_DEFAULT as u64
                + 10_000
                + RESERVE_BASE_DESCRIPTORS
                + 2 * RESERVE_SHARD_DESCRIPTORS
        );
        // Split over shards, rounded up.
        let c = config(&[
            "--shards",
            "3",
            "--open-segments-max",
            "10",
            "--disk-threads",
            "0",
        ]);
        let b = budget(&c, 1);
        assert_eq!((b.open_segments, b.per_partition), (12, 2));
        let m = message(&b, 100);
        for word in [
            "ulimit -n",
            "LimitNOFILE",
            "--connections-max",
            "--open-segments-max",
            "1 partitions",
        ] {
            assert!(m.contains(word), "{word}: {m}");
        }
    }
}
