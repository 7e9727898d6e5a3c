//! A check's result: its verdict, how often it was seen, and the first
//! witnesses (at most [`WITNESSES_MAX`]), and the `Tally` that collects them.

use serde::Serialize;
use serde_json::Value;

/// Witnesses kept per check.
pub(super) const WITNESSES_MAX: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Any occurrence makes the run invalid.
    Fail,
    /// Reported only.
    Info,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub verdict: Verdict,
    pub count: u64,
    /// The first occurrences.
    pub witnesses: Vec<Value>,
}

/// Collects one check's count and first witnesses.
pub(super) struct Tally {
    verdict: Verdict,
    count: u64,
    witnesses: Vec<Value>,
}

impl Tally {
    pub(super) fn new(verdict: Verdict) -> Tally {
        Tally {
            verdict,
            count: 0,
            witnesses: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, witness: impl FnOnce() -> Value) {
        self.count += 1;
        if self.witnesses.len() < WITNESSES_MAX {
            self.witnesses.push(witness());
        }
    }

    pub(super) fn done(self) -> Check {
        Check {
            verdict: self.verdict,
            count: self.count,
            witnesses: self.witnesses,
        }
    }
}
