//! Per-key quotas (docs/security.md, "Quotas"): a GCRA bucket (a token
//! bucket with debt) per key and direction, one `AtomicU64` shared by every
//! shard. A charge never refuses: it answers how long the connection
//! should wait (its throttle), and the listener delays the answer and
//! stops reading meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;

use super::table::KeyEntry;
use super::Principal;
use crate::shard::Shard;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// A key's "theoretical arrival time" in nanoseconds of `CLOCK_MONOTONIC`:
/// the moment the bytes charged so far are paid for at the key's rate.
/// Shared by all shards; one compare-exchange per charged request.
#[derive(Debug, Default)]
pub struct Bucket {
    tat_ns: AtomicU64,
}

/// Which way bytes go: a key has a bucket for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Produce,
    Fetch,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Produce => "produce",
            Direction::Fetch => "fetch",
        }
    }
}

/// A rate and what is allowed past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Bytes per second, at least 1.
    pub rate: u64,
    /// Nanoseconds of traffic at `rate` admitted without delay.
    pub burst_ns: u64,
    /// The longest throttle one charge answers, in nanoseconds.
    pub throttle_max_ns: u64,
}

/// Nanoseconds that `bytes` take at `rate`, saturated to `u64`.
fn cost_ns(bytes: u64, rate: u64) -> u64 {
    let ns = bytes as u128 * NANOS_PER_SEC / rate.max(1) as u128;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

impl Bucket {
    /// Charges `bytes` at `now_ns`; the throttle the caller owes, in
    /// nanoseconds (0: within the burst).
    pub fn charge(&self, bytes: u64, now_ns: u64, limit: Limit) -> u64 {
        let cost = cost_ns(bytes, limit.rate);
        let mut old = self.tat_ns.load(Ordering::Acquire);
        let new = loop {
            let new = old.max(now_ns).saturating_add(cost);
            match self
                .tat_ns
                .compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break new,
                Err(seen) => old = seen,
            }
        };
        throttle(new, now_ns, limit)
    }

    /// What the key owes at `now_ns`, in nanoseconds, without charging:
    /// how long a fetch waits before it reads.
    pub fn debt(&self, now_ns: u64, limit: Limit) -> u64 {
        throttle(self.tat_ns.load(Ordering::Acquire), now_ns, limit)
    }
}

/// `clamp(tat − now − burst, 0, max)`.
fn throttle(tat_ns: u64, now_ns: u64, limit: Limit) -> u64 {
    tat_ns
        .saturating_sub(now_ns)
        .saturating_sub(limit.burst_ns)
        .min(limit.throttle_max_ns)
}

/// Nanoseconds of `CLOCK_MONOTONIC`: one clock for every shard.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "CLOCK_MONOTONIC is always readable");
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A key's quota state, shared by every copy of its table entry (a PATCH
/// or a revoke keeps it): per direction, its bucket and what /metrics
/// shows of it (`es_quota_bytes_total`, `es_quota_throttle_seconds_total`,
/// rendered from the key table at each scrape: operate/metrics_live.rs).
#[derive(Debug, Default)]
pub struct KeyRuntime {
    pub produce: Accounts,
    pub fetch: Accounts,
}

/// One direction of a key.
#[derive(Debug, Default)]
pub struct Accounts {
    pub bucket: Bucket,
    /// Bytes charged.
    pub bytes: AtomicU64,
    /// Nanoseconds of throttle answered.
    pub throttle_ns: AtomicU64,
}

impl KeyRuntime {
    pub fn accounts(&self, dir: Direction) -> &Accounts {
        match dir {
            Direction::Produce => &self.produce,
            Direction::Fetch => &self.fetch,
        }
    }
}

/// The broker's quota settings (the `--quota-*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub produce_default: Option<u64>,
    pub fetch_default: Option<u64>,
    pub burst_ms: u64,
    pub throttle_max_ms: u64,
}

impl Settings {
    /// The limit of `key` in `dir`: its own rate, else the default; `None`
    /// when unlimited.
    pub fn limit(&self, key: &KeyEntry, dir: Direction) -> Option<Limit> {
        let rate = match dir {
            Direction::Produce => key.quota.produce_bytes_per_sec.or(self.produce_default),
            Direction::Fetch => key.quota.fetch_bytes_per_sec.or(self.fetch_default),
        }?;
        Some(Limit {
            rate: rate.max(1),
            burst_ns: self.burst_ms.saturating_mul(1_000_000),
            throttle_max_ns: self.throttle_max_ms.saturating_mul(1_000_000),
        })
    }

    /// Charges `bytes` in `dir` to `p`'s key: the throttle to apply (zero
    /// for the anonymous principal, an unlimited key, or a key within its
    /// burst). Counted in the key's `Accounts`. Never blocks: one
    /// compare-exchange loop on the key's bucket.
    pub fn charge(&self, p: &Principal, dir: Direction, bytes: u64) -> Duration {
        let Some(key) = p.key() else {
            return Duration::ZERO;
        };
        let accounts = key.runtime.accounts(dir);
        accounts.bytes.fetch_add(bytes, Ordering::Relaxed);
        let Some(limit) = self.limit(key, dir) else {
            return Duration::ZERO;
        };
        let ns = accounts.bucket.charge(bytes, now_ns(), limit);
        // A fetch's throttle is paid, and counted, by `pay_debt` before
        // the key's next fetch.
        if dir == Direction::Produce {
            accounts.throttle_ns.fetch_add(ns, Ordering::Relaxed);
        }
        Duration::from_nanos(ns)
    }

    /// What `p`'s key owes in `dir` now, without charging.
    pub fn debt(&self, p: &Principal, dir: Direction) -> Duration {
        let Some(key) = p.key() else {
            return Duration::ZERO;
        };
        match self.limit(key, dir) {
            Some(limit) => Duration::from_nanos(key.runtime.accounts(dir).bucket.debt(now_ns(), limit)),
            None => Duration::ZERO,
        }
    }

    /// Waits until `p`'s key owes nothing in `dir` (a fetch, before it
    /// reads: no fetched data is held while waiting), or until `shard`
    /// starts shutting down; how long it waited.
    pub async fn pay_debt(&self, shard: &Shard, p: &Principal, dir: Direction) -> Duration {
        let mut waited = Duration::ZERO;
        loop {
            let debt = self.debt(p, dir);
            if debt.is_zero() {
                return waited;
            }
            if let Some(key) = p.key() {
                let ns = u64::try_from(debt.as_nanos()).unwrap_or(u64::MAX);
                key.runtime
                    .accounts(dir)
                    .throttle_ns
                    .fetch_add(ns, Ordering::Relaxed);
            }
            if !wait(shard, debt).await {
                return waited;
            }
            waited += debt;
        }
    }
}

/// Waits out a throttle `d`: `false` if `shard` started shutting down
/// first (a shutdown does not wait for quotas).
pub async fn wait(shard: &Shard, d: Duration) -> bool {
    let timer = glommio::timer::sleep(d).fuse();
    let stop = shard.shutdown.wait_for(1).fuse();
    futures::pin_mut!(timer, stop);
    futures::select! {
        _ = timer => true,
        _ = stop => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SEC: u64 = 1_000_000_000;

    fn limit(rate: u64) -> Limit {
        Limit {
            rate,
            burst_ns: SEC,
            throttle_max_ns: 30 * SEC,
        }
    }

    #[test]
    fn within_the_burst_there_is_no_throttle() {
        let b = Bucket::default();
        let l = limit(1000);
        assert_eq!(b.charge(1000, 10 * SEC, l), 0, "one second of traffic: the burst");
        assert_eq!(b.charge(500, 10 * SEC, l), SEC / 2, "half a second past it");
        assert_eq!(b.debt(10 * SEC, l), SEC / 2);
        assert_eq!(b.debt(10 * SEC + SEC / 2, l), 0, "paid");
    }

    #[test]
    fn an_idle_key_starts_again_from_now() {
        let b = Bucket::default();
        let l = limit(1000);
        b.charge(3000, SEC, l);
        assert_eq!(
            b.charge(1000, 100 * SEC, l),
            0,
            "old debt does not carry past now"
        );
    }

    #[test]
    fn the_throttle_is_clamped() {
        let b = Bucket::default();
        let l = limit(1);
        assert_eq!(b.charge(1_000_000, SEC, l), 30 * SEC);
    }

    #[test]
    fn extreme_rates_do_not_overflow() {
        let b = Bucket::default();
        let now = u64::MAX / 2;
        // R = 1: a largest batch is 2^30 seconds of debt, clamped.
        assert_eq!(b.charge(u32::MAX as u64, now, limit(1)), 30 * SEC);
        assert_eq!(b.charge(u64::MAX, now, limit(1)), 30 * SEC, "saturates");
        let b = Bucket::default();
        // R = 2^40: a byte costs less than a nanosecond.
        assert_eq!(b.charge(1, SEC, limit(1 << 40)), 0);
        assert_eq!(b.charge(1 << 40, SEC, limit(1 << 40)), 0, "one second: the burst");
        assert_eq!(b.charge(1 << 40, SEC, limit(1 << 40)), SEC);
    }

    proptest! {
        /// Requests arrive at their times, each waiting out the throttle
        /// its charge answered (a connection that is not read meanwhile):
        /// in any window of length L the bytes admitted stay within
        /// R·L + R·τ + one largest request.
        #[test]
        fn admitted_bytes_stay_within_the_bound(
            rate in 1u64..1_000_000,
            reqs in proptest::collection::vec((0u64..2_000_000u64, 0u64..200_000_000u64), 1..200),
        ) {
            let l = Limit { rate, burst_ns: SEC, throttle_max_ns: u64::MAX };
            let b = Bucket::default();
            let mut now = SEC;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            let max_req = reqs.iter().map(|r| r.0).max().unwrap_or(0);
            for (bytes, gap) in reqs {
                now += gap;
                admitted.push((now, bytes));
                now += b.charge(bytes, now, l);
            }
            for i in 0..admitted.len() {
                let mut sum: u128 = 0;
                for j in i..admitted.len() {
                    sum += admitted[j].1 as u128;
                    let window = (admitted[j].0 - admitted[i].0) as u128;
                    let bound = rate as u128 * window / NANOS_PER_SEC
                        + rate as u128 * l.burst_ns as u128 / NANOS_PER_SEC
                        + max_req as u128
                        + 1;
                    prop_assert!(sum <= bound, "{sum} > {bound} over {window} ns");
                }
            }
        }
    }
}
