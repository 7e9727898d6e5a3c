//! A segment's file names: `<base:020>.log` and `<base:020>.index`, the
//! base offset zero-padded to 20 ASCII digits. Only names of exactly that
//! shape count as segments; every other file in a partition directory is
//! ignored.

use crate::Offset;

/// `<base:020>.log` -> base.
pub fn parse_log_name(name: &str) -> Option<Offset> {
    parse_base(name.strip_suffix(".log")?)
}

/// `<base:020>.index` -> base.
pub fn parse_index_name(name: &str) -> Option<Offset> {
    parse_base(name.strip_suffix(".index")?)
}

/// The log file name of the segment at `base`.
pub fn log_name(base: Offset) -> String {
    format!("{:020}.log", base.0)
}

/// The index file name of the segment at `base`.
pub fn index_name(base: Offset) -> String {
    format!("{:020}.index", base.0)
}

fn parse_base(stem: &str) -> Option<Offset> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_segments() {
        assert_eq!(log_name(Offset(4096)), "00000000000000004096.log");
        assert_eq!(parse_log_name(&log_name(Offset(7))), Some(Offset(7)));
        assert_eq!(parse_index_name(&index_name(Offset(7))), Some(Offset(7)));
        for bad in [
            "0000000000000000004.log",
            "0000000000000000000a.log",
            "00000000000000000000.log.cleaned",
            "99999999999999999999.log",
        ] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
    }
}
