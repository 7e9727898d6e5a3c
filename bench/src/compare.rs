//! Ratios between phases of one run: the broker against the disk (MB/s and
//! p99), and each shard count against the first.

use crate::phase::Phase;

/// Fills every phase's `compare` from the others.
pub fn fill(phases: &mut [Phase]) {
    let disk_of = |name: &str| {
        phases
            .iter()
            .find(|p| p.name == name)
            .map(|d| (d.mb_per_s(), d.latency.map(|l| l.p99_us)))
    };
    let disk = disk_of("disk");
    // A paced broker phase compares with the disk paced the same way.
    let disk_half = disk_of("disk half-rate").or(disk);
    let shard_counts: Vec<usize> = phases.iter().filter_map(|p| p.shards).collect();
    let several_shard_counts = shard_counts.windows(2).any(|w| w[0] != w[1]);
    let snapshot: Vec<(String, Option<usize>, f64)> = phases
        .iter()
        .map(|p| (p.name.clone(), p.shards, p.records_per_s()))
        .collect();
    for p in phases.iter_mut() {
        if p.name.starts_with("produce") {
            let against = if p.name == "produce half-rate" {
                disk_half
            } else {
                disk
            };
            if let Some((disk_mb, disk_p99)) = against {
                if disk_mb > 0.0 {
                    p.compare.pct_of_disk = Some(p.mb_per_s() / disk_mb * 100.0);
                }
                if let (Some(ours), Some(theirs)) = (p.latency, disk_p99) {
                    p.compare.p99_vs_disk = Some(ours.p99_us as f64 / theirs.max(1) as f64);
                }
            }
        }
        if several_shard_counts && p.shards.is_some() {
            let first = snapshot
                .iter()
                .find(|(name, shards, _)| *name == p.name && shards.is_some());
            if let Some((_, _, base)) = first {
                if *base > 0.0 {
                    p.compare.vs_first_shards = Some(p.records_per_s() / base);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Totals;
    use crate::latency::Latency;

    fn phase(name: &str, shards: Option<usize>, bytes: u64, p99_us: u64) -> Phase {
        let mut l = Latency::new();
        l.record_us(p99_us);
        let totals = Totals {
            records: bytes / 1000,
            bytes,
            requests: 1,
        };
        Phase::new(name, shards, totals, 1.0, &l)
    }

    #[test]
    fn ratios_against_disk_and_first_shard_count() {
        let mut phases = vec![
            phase("disk", None, 400_000_000, 2000),
            phase("produce", Some(1), 360_000_000, 3000),
            phase("produce", Some(2), 720_000_000, 3000),
        ];
        fill(&mut phases);
        let c = &phases[1].compare;
        assert!((c.pct_of_disk.expect("pct") - 90.0).abs() < 0.01);
        assert!((c.p99_vs_disk.expect("p99") - 1.5).abs() < 0.01);
        assert!((c.vs_first_shards.expect("first") - 1.0).abs() < 1e-9);
        assert!((phases[2].compare.vs_first_shards.expect("second") - 2.0).abs() < 1e-9);
        assert!(phases[0].compare.pct_of_disk.is_none());
    }
}
