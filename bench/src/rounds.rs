//! A load and its baseline measured in alternating rounds: the disk, then
//! the broker, then the disk again, and so on, each slice a share of
//! `--duration`, their figures added up. On a disk whose speed wanders
//! (a cloud volume's burst credits, the VM's neighbours: by a factor of
//! two within seconds on the development VM,
//! bench/results/2026-12-01-scenarios.md), two long phases one after the
//! other compare the broker with whatever the disk did at another time;
//! slices taken in turn see the same disk. The first slice of each side
//! runs after the full warm-up, later ones after a short lead-in
//! (connections made, moved to their shard, past the first requests)
//! that is not measured either.

use std::time::Duration;

use crate::counters::Totals;
use crate::latency::Latency;
use crate::phase::Phase;

/// Most seconds of unmeasured lead-in before each slice after the first
/// (at most `--warmup`): long enough for new producer connections to move
/// to their partition's shard (8 requests) and settle, short enough that
/// five rounds add seconds, not minutes.
pub const LEAD_IN_SECS_MAX: f64 = 1.0;

/// What one slice (or several added up) measured.
pub struct Measured {
    pub totals: Totals,
    pub seconds: f64,
    pub latency: Latency,
    pub target_rate: Option<f64>,
}

impl Measured {
    /// Adds `other`'s counts, measured time and latencies to these.
    pub fn absorb(&mut self, other: Measured) {
        self.totals.records += other.totals.records;
        self.totals.bytes += other.totals.bytes;
        self.totals.requests += other.totals.requests;
        self.seconds += other.seconds;
        self.latency.merge(&other.latency);
        self.target_rate = self.target_rate.or(other.target_rate);
    }

    /// The figures as the phase `name`.
    pub fn phase(&self, name: &str, shards: Option<usize>) -> Phase {
        let mut phase = Phase::new(name, shards, self.totals, self.seconds, &self.latency);
        phase.target_rate = self.target_rate;
        phase
    }
}

/// How a run of alternating rounds is laid out.
#[derive(Copy, Clone, Debug)]
pub struct Rounds {
    pub count: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

impl Rounds {
    /// Measured time of each slice.
    pub fn slice(&self) -> Duration {
        self.duration.div_f64(self.count.max(1) as f64)
    }

    /// Unmeasured time before slice `round` (0-based) of either side.
    pub fn lead_in(&self, round: usize) -> Duration {
        if round == 0 {
            self.warmup
        } else {
            self.warmup.min(Duration::from_secs_f64(LEAD_IN_SECS_MAX))
        }
    }

    /// Runs `first` and `second` in turn, `count` slices each, `first`
    /// leading every round; each is called with (round, lead-in, slice)
    /// and the figures of each side are added up.
    pub fn alternate<A, B>(&self, mut first: A, mut second: B) -> Result<(Measured, Measured), String>
    where
        A: FnMut(usize, Duration, Duration) -> Result<Measured, String>,
        B: FnMut(usize, Duration, Duration) -> Result<Measured, String>,
    {
        let slice = self.slice();
        let mut a = first(0, self.lead_in(0), slice)?;
        let mut b = second(0, self.lead_in(0), slice)?;
        for round in 1..self.count {
            if crate::interrupt::requested() {
                break;
            }
            a.absorb(first(round, self.lead_in(round), slice)?);
            b.absorb(second(round, self.lead_in(round), slice)?);
        }
        Ok((a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(bytes: u64, seconds: f64, us: u64) -> Measured {
        let mut latency = Latency::new();
        latency.record_us(us);
        Measured {
            totals: Totals {
                records: bytes / 100,
                bytes,
                requests: 1,
            },
            seconds,
            latency,
            target_rate: None,
        }
    }

    #[test]
    fn slices_alternate_and_add_up() {
        let rounds = Rounds {
            count: 3,
            warmup: Duration::from_secs(5),
            duration: Duration::from_secs(9),
        };
        let mut calls = Vec::new();
        let calls_cell = std::cell::RefCell::new(&mut calls);
        let (a, b) = rounds
            .alternate(
                |round, lead, slice| {
                    calls_cell.borrow_mut().push(("a", round, lead, slice));
                    Ok(measured(1000, 3.0, 10 + round as u64))
                },
                |round, lead, slice| {
                    calls_cell.borrow_mut().push(("b", round, lead, slice));
                    Ok(measured(500, 3.0, 100))
                },
            )
            .unwrap();
        let s = Duration::from_secs(3);
        let one = Duration::from_secs(1);
        let five = Duration::from_secs(5);
        assert_eq!(
            calls,
            vec![
                ("a", 0, five, s),
                ("b", 0, five, s),
                ("a", 1, one, s),
                ("b", 1, one, s),
                ("a", 2, one, s),
                ("b", 2, one, s),
            ]
        );
        assert_eq!(a.totals.bytes, 3000);
        assert_eq!(a.totals.requests, 3);
        assert!((a.seconds - 9.0).abs() < 1e-9);
        assert_eq!(a.latency.percentiles().unwrap().count, 3);
        assert_eq!(a.latency.percentiles().unwrap().max_us, 12);
        let p = b.phase("produce", Some(2));
        assert!((p.mb_per_s() - 1500.0 / 9.0 / 1e6).abs() < 1e-12);
    }

    #[test]
    fn one_round_is_one_slice_each_after_the_warmup() {
        let rounds = Rounds {
            count: 1,
            warmup: Duration::from_millis(300),
            duration: Duration::from_secs(4),
        };
        assert_eq!(rounds.slice(), Duration::from_secs(4));
        assert_eq!(rounds.lead_in(0), Duration::from_millis(300));
        // A warm-up shorter than the lead-in cap bounds later lead-ins too.
        assert_eq!(rounds.lead_in(1), Duration::from_millis(300));
    }

    #[test]
    fn an_error_in_a_slice_ends_the_rounds() {
        let rounds = Rounds {
            count: 4,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(4),
        };
        let mut seconds_run = 0;
        let r = rounds.alternate(
            |round, _, _| {
                seconds_run += 1;
                if round == 1 {
                    Err("disk full".into())
                } else {
                    Ok(measured(1, 1.0, 1))
                }
            },
            |_, _, _| Ok(measured(1, 1.0, 1)),
        );
        assert_eq!(r.err().as_deref(), Some("disk full"));
        assert_eq!(seconds_run, 2);
    }
}
