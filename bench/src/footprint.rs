//! What a process holds, read from `/proc/<pid>`: resident memory
//! (`VmRSS` of `status`, and of it `RssAnon`, the heap and stacks, apart
//! from mapped files such as the binary's own code) and open descriptors
//! (the entries of `fd/`).

use std::path::PathBuf;

/// One reading of a process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Resident memory, bytes (`VmRSS`, which the kernel counts in KiB).
    pub rss_bytes: u64,
    /// The anonymous part of it (`RssAnon`): what the allocator holds.
    pub anon_bytes: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// Reads process `pid` now.
pub fn read(pid: u32) -> Result<Footprint, String> {
    let dir = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(dir.join("status"))
        .map_err(|e| format!("cannot read /proc/{pid}/status (is the broker running?): {e}"))?;
    let field =
        |name| kib_field(&status, name).ok_or_else(|| format!("/proc/{pid}/status has no {name} line"));
    let rss_bytes = field("VmRSS:")?;
    let anon_bytes = field("RssAnon:")?;
    let fds = std::fs::read_dir(dir.join("fd"))
        .map_err(|e| format!("cannot list /proc/{pid}/fd (another user's process?): {e}"))?
        .count() as u64;
    Ok(Footprint {
        rss_bytes,
        anon_bytes,
        fds,
    })
}

/// A `name   12345 kB` line of a `status` file (`name` with its colon),
/// in bytes.
fn kib_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let mut words = line[name.len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(kib * 1024),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_in_bytes() {
        let status = "Name:\tes-broker\nVmPeak:\t  99 kB\nVmRSS:\t   30720 kB\nRssAnon:\t 1 kB\n";
        assert_eq!(kib_field(status, "VmRSS:"), Some(30720 * 1024));
        assert_eq!(kib_field(status, "RssAnon:"), Some(1024));
        assert_eq!(kib_field("Name:\tx\n", "VmRSS:"), None);
        assert_eq!(kib_field("VmRSS:\t12 MB\n", "VmRSS:"), None);
    }

    #[test]
    fn reads_this_process() {
        let f = read(std::process::id()).expect("read /proc/self");
        assert!(f.rss_bytes > 0 && f.fds > 0, "{f:?}");
    }
}
