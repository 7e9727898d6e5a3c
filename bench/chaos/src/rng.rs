//! A seeded pseudo-random generator (SplitMix64). Every choice of a run
//! (the fault schedule, each worker's partitions and pauses) draws from a
//! generator forked from the run's seed, so a seed replays the same plan.

pub struct Rng(u64);

impl Rng {
    /// The generator of one part of a run (`stream` names the part), so
    /// that one part's draws do not shift another's.
    pub fn fork(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// One of `items` (which must not be empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let i = self.range(0, items.len().saturating_sub(1) as u64) as usize;
        &items[i]
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 99) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_and_streams_differ() {
        let a: Vec<u64> = (0..5).map(|_| Rng::fork(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = Rng::fork(7, 1);
        let mut y = Rng::fork(7, 2);
        assert_ne!(x.next_u64(), y.next_u64());
        let mut r = Rng::fork(3, 0);
        for _ in 0..1000 {
            let v = r.range(5, 9);
            assert!((5..=9).contains(&v));
        }
        assert_eq!(r.range(4, 4), 4);
    }
}
