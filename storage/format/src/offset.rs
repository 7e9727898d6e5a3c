//! `Offset`: the position of a record in a partition, never reused.

use std::fmt;

/// The offset of a record in its partition. Offsets start at 0 and grow by
/// one per record; compaction may leave gaps, never reorder.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub u64);

impl Offset {
    /// The offset `n` records after this one.
    pub fn plus(self, n: u64) -> Offset {
        Offset(self.0 + n)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
