//! Ratios between phases of one run: the broker against the disk (MB/s and
//! p99), and each shard count against the first.

use crate::phase::Phase;

/// Fills every phase's `compare` from the others.
pub fn fill(phases: &mut [Phase]) {
    // The disk phase a broker phase at `at` compares with: of those named
    // `name`, the last before it (the disk runs first, or in rounds just
    // before each broker's phases), else the first after it (the paced
    // disk runs after the paced broker).
    let disk_of = |name: &str, at: usize| {
        let named = |p: &&Phase| p.name == name;
        phases[..at]
            .iter()
            .rev()
            .find(named)
            .or_else(|| phases[at..].iter().find(named))
            .map(|d| (d.mb_per_s(), d.latency.map(|l| l.p99_us)))
    };
    let against: Vec<Option<(f64, Option<u64>)>> = (0..phases.len())
        .map(|i| match phases[i].name.as_str() {
            // A paced broker phase compares with the disk paced the same way.
            "produce half-rate" => disk_of("disk half-rate", i).or_else(|| disk_of("disk", i)),
            n if n.starts_with("produce") => disk_of("disk", i),
            _ => None,
        })
        .collect();
    let shard_counts: Vec<usize> = phases.iter().filter_map(|p| p.shards).collect();
    let several_shard_counts = shard_counts.windows(2).any(|w| w[0] != w[1]);
    let snapshot: Vec<(String, Option<usize>, f64)> = phases
        .iter()
        .map(|p| (p.name.clone(), p.shards, p.records_per_s()))
        .collect();
    for (p, against) in phases.iter_mut().zip(against) {
        if p.name.starts_with("produce") {
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

    #[test]
    fn each_broker_phase_compares_with_its_own_disk() {
        // Rounds with two shard counts: a disk phase before each broker's;
        // a paced broker phase with the paced disk after it.
        let mut phases = vec![
            phase("disk", None, 400_000_000, 2000),
            phase("produce", Some(1), 200_000_000, 3000),
            phase("produce half-rate", Some(1), 100_000_000, 4000),
            phase("disk half-rate", None, 100_000_000, 1000),
            phase("disk", None, 800_000_000, 2000),
            phase("produce", Some(2), 200_000_000, 3000),
        ];
        fill(&mut phases);
        assert!((phases[1].compare.pct_of_disk.expect("first") - 50.0).abs() < 0.01);
        assert!((phases[2].compare.p99_vs_disk.expect("paced") - 4.0).abs() < 0.01);
        assert!((phases[5].compare.pct_of_disk.expect("second") - 25.0).abs() < 0.01);
    }
}
