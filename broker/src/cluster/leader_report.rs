//! `LeaderReport`: what a partition's leader tells the other nodes of its
//! group (the spec's §4.6): term, offsets, whether a quorum hears it, and
//! each replica's progress. Many travel in one LeaderReport frame (0x4a)
//! from a shard to the same shard of each peer (cluster/reports.rs); the
//! sender is the leader, so a report does not name it.
//!
//! ```text
//! 0x4a LeaderReport    u32 n, n × report
//!      report  u64 group, u64 term, u64 high watermark, u64 log start,
//!              u64 log end, u8 flags (bit 0: available), u8 r,
//!              r × (u64 node, u8 in sync (0|1), u64 lag in entries)
//! 0xca LeaderReportOk  empty
//! ```
//!
//! The decoder takes any bytes: counts are checked against the bytes that
//! remain and against the limits before anything is allocated, and the
//! payload must be used to its last byte; it never panics (proptests
//! below).

use es_raft::{GroupId, NodeId};

use crate::limits::{CLUSTER_NODES_MAX, LEADER_REPORTS_PER_FRAME_MAX};

/// A report's fixed part: group, term, three offsets, flags, count.
const REPORT_HEAD_BYTES: usize = 8 * 5 + 2;
/// A replica's progress: node, in sync, lag.
const REPLICA_BYTES: usize = 8 + 1 + 8;
/// Flags bit 0: the leader heard from a quorum recently.
const AVAILABLE: u8 = 1;

/// One group's state as its leader knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderReport {
    pub group: GroupId,
    pub term: u64,
    pub high_watermark: u64,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    /// The leader heard from a quorum within twice the election timeout:
    /// it takes produces (else it may have been deposed without knowing).
    pub available: bool,
    /// Every voter, the leader included.
    pub replicas: Vec<ReplicaProgress>,
}

/// A voter's progress, as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaProgress {
    pub node_id: NodeId,
    /// Matched the leader's last entry within `--replica-lag-ms`, and
    /// connected to the leader now.
    pub in_sync: bool,
    /// Raft entries behind the leader's last one.
    pub lag: u64,
}

/// The payloads of LeaderReport frames carrying `reports`, at most
/// [`LEADER_REPORTS_PER_FRAME_MAX`] each (none for no report).
pub fn encode(reports: &[LeaderReport]) -> Vec<Vec<u8>> {
    reports
        .chunks(LEADER_REPORTS_PER_FRAME_MAX)
        .map(|chunk| {
            let mut out = Vec::with_capacity(4 + chunk.len() * (REPORT_HEAD_BYTES + 3 * REPLICA_BYTES));
            out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
            for r in chunk {
                for v in [
                    r.group,
                    r.term,
                    r.high_watermark,
                    r.log_start_offset,
                    r.log_end_offset,
                ] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                out.push(if r.available { AVAILABLE } else { 0 });
                // At most CLUSTER_NODES_MAX voters: the cluster's nodes.
                let replicas = &r.replicas[..r.replicas.len().min(CLUSTER_NODES_MAX)];
                out.push(replicas.len() as u8);
                for p in replicas {
                    out.extend_from_slice(&p.node_id.to_be_bytes());
                    out.push(u8::from(p.in_sync));
                    out.extend_from_slice(&p.lag.to_be_bytes());
                }
            }
            out
        })
        .collect()
}

/// The reports of a LeaderReport payload, or why it is malformed.
pub fn decode(payload: &[u8]) -> Result<Vec<LeaderReport>, String> {
    let mut cur = Cur(payload);
    let n = cur.u32()? as usize;
    if n > LEADER_REPORTS_PER_FRAME_MAX {
        return Err(format!(
            "{n} reports: at most {LEADER_REPORTS_PER_FRAME_MAX} a frame"
        ));
    }
    if n > cur.0.len() / REPORT_HEAD_BYTES {
        return Err(format!("{n} reports in {} bytes", cur.0.len()));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let group = cur.u64()?;
        let term = cur.u64()?;
        let high_watermark = cur.u64()?;
        let log_start_offset = cur.u64()?;
        let log_end_offset = cur.u64()?;
        let flags = cur.u8()?;
        if flags & !AVAILABLE != 0 {
            return Err(format!("unknown report flags {flags:#04x}"));
        }
        let r = cur.u8()? as usize;
        if r > CLUSTER_NODES_MAX {
            return Err(format!(
                "{r} replicas: a cluster has at most {CLUSTER_NODES_MAX} nodes"
            ));
        }
        let mut replicas = Vec::with_capacity(r);
        for _ in 0..r {
            let node_id = cur.u64()?;
            let in_sync = match cur.u8()? {
                0 => false,
                1 => true,
                b => return Err(format!("in sync is 0 or 1, not {b}")),
            };
            let lag = cur.u64()?;
            replicas.push(ReplicaProgress {
                node_id,
                in_sync,
                lag,
            });
        }
        out.push(LeaderReport {
            group,
            term,
            high_watermark,
            log_start_offset,
            log_end_offset,
            available: flags & AVAILABLE != 0,
            replicas,
        });
    }
    if !cur.0.is_empty() {
        return Err(format!("{} bytes after the last report", cur.0.len()));
    }
    Ok(out)
}

/// A reading cursor over a payload; every read checks what remains.
struct Cur<'a>(&'a [u8]);

impl Cur<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let Some((head, rest)) = self.0.split_first_chunk::<N>() else {
            return Err(format!("the payload ends {} bytes short", N - self.0.len()));
        };
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_be_bytes(self.take()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report(group: u64, replicas: usize) -> LeaderReport {
        LeaderReport {
            group,
            term: 7,
            high_watermark: 1042,
            log_start_offset: 3,
            log_end_offset: 1050,
            available: group % 2 == 0,
            replicas: (1..=replicas as u64)
                .map(|n| ReplicaProgress {
                    node_id: n,
                    in_sync: n != 2,
                    lag: n * 10,
                })
                .collect(),
        }
    }

    #[test]
    fn reports_round_trip_in_bounded_frames() {
        let reports: Vec<_> = (0..LEADER_REPORTS_PER_FRAME_MAX as u64 + 3)
            .map(|g| report(g, (g % 4) as usize))
            .collect();
        let frames = encode(&reports);
        assert_eq!(frames.len(), 2);
        let back: Vec<_> = frames.iter().flat_map(|f| decode(f).unwrap()).collect();
        assert_eq!(back, reports);
        assert!(encode(&[]).is_empty());
        assert_eq!(decode(&0u32.to_be_bytes()).unwrap(), vec![]);
    }

    #[test]
    fn hostile_payloads_are_refused() {
        let good = encode(&[report(1, 3)]).remove(0);
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        let mut flags = good.clone();
        flags[4 + 40] = 0x80;
        assert!(decode(&flags).is_err());
        let mut many = good.clone();
        many[4 + 41] = (CLUSTER_NODES_MAX + 1) as u8;
        assert!(decode(&many).is_err());
        let mut in_sync = good.clone();
        in_sync[4 + 42 + 8] = 2;
        assert!(decode(&in_sync).is_err());
        let huge = u32::MAX.to_be_bytes();
        assert!(decode(&huge).is_err(), "a count the bytes cannot hold");
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panic(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(reports) = decode(&b).map(|r| (!r.is_empty()).then_some(r)) {
                let Some(reports) = reports else { return Ok(()) };
                let again = encode(&reports);
                let flat: Vec<u8> = again.concat();
                prop_assert_eq!(flat, b);
            }
        }

        #[test]
        fn any_report_round_trips(
            group in any::<u64>(), term in any::<u64>(), hw in any::<u64>(),
            start in any::<u64>(), end in any::<u64>(), available in any::<bool>(),
            replicas in proptest::collection::vec((any::<u64>(), any::<bool>(), any::<u64>()), 0..=CLUSTER_NODES_MAX),
        ) {
            let r = LeaderReport {
                group, term, high_watermark: hw, log_start_offset: start, log_end_offset: end, available,
                replicas: replicas.into_iter().map(|(node_id, in_sync, lag)| ReplicaProgress { node_id, in_sync, lag }).collect(),
            };
            let frames = encode(std::slice::from_ref(&r));
            prop_assert_eq!(frames.len(), 1);
            prop_assert_eq!(decode(&frames[0]).unwrap(), vec![r]);
        }
    }
}
