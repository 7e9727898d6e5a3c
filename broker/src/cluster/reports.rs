//! Leader reports (the spec's §4.6): every `--raft-heartbeat-ms`, each
//! shard of a cluster node tells the same shard of every peer the state of
//! the groups it leads (cluster/leader_report.rs, one LeaderReport frame
//! per peer and round, over the shard's raft connection), and keeps the
//! reports its peers send it (`Reports`). A group lives on the same shard
//! index on every node, so the shard that owns a partition holds what its
//! leader last said of it: describe on a follower, or on a node without a
//! replica, and the cluster's counts of partitions without a leader or
//! under-replicated (cluster/leaders.rs) read it without a round trip.
//!
//! A report is believed for twice the election timeout (longer than that
//! its leader may have been deposed), and one of a higher term replaces
//! one of a lower. Control frames this shard does not handle (the
//! controller's, on shard 0) go on to the handler set behind it.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_raft::transport::codec::ErrorBody;
use es_raft::transport::error::code;
use es_raft::transport::frame::RaftKind;
use es_raft::transport::ControlHandler;
use es_raft::{GroupId, NodeId, PartitionRaft};
use futures::future::{join_all, select, Either, LocalBoxFuture};

use crate::cluster::leader_report::{self, LeaderReport, ReplicaProgress};
use crate::limits::{LEADER_REPORTS_HELD_MAX, RAFT_ELECTION_TIMEOUT_MS_DEFAULT};
use crate::shard::Shard;

/// A peer's report, as held.
#[derive(Debug, Clone)]
pub struct Held {
    /// The node that sent it: the group's leader in `report.term`.
    pub leader: NodeId,
    pub report: LeaderReport,
    pub received: Instant,
}

/// The reports a shard's peers sent it, one per group (on that shard).
#[derive(Debug)]
pub struct Reports {
    held: RefCell<BTreeMap<GroupId, Held>>,
    /// How long a report is believed.
    fresh_for: Cell<Duration>,
}

impl Default for Reports {
    fn default() -> Reports {
        Reports {
            held: RefCell::new(BTreeMap::new()),
            fresh_for: Cell::new(Duration::from_millis(2 * RAFT_ELECTION_TIMEOUT_MS_DEFAULT)),
        }
    }
}

impl Reports {
    /// Keeps `reports` from `leader`: each replaces the group's report
    /// unless that one is fresh and of a higher term. At most
    /// [`LEADER_REPORTS_HELD_MAX`] groups: when full, expired reports go
    /// first, then a new group's report is dropped.
    pub fn take(&self, leader: NodeId, reports: Vec<LeaderReport>) {
        let now = Instant::now();
        let fresh_for = self.fresh_for.get();
        let mut held = self.held.borrow_mut();
        for report in reports {
            if let Some(h) = held.get(&report.group) {
                if h.report.term > report.term && now.duration_since(h.received) <= fresh_for {
                    continue;
                }
            } else if held.len() >= LEADER_REPORTS_HELD_MAX {
                held.retain(|_, h| now.duration_since(h.received) <= fresh_for);
                if held.len() >= LEADER_REPORTS_HELD_MAX {
                    continue;
                }
            }
            held.insert(
                report.group,
                Held {
                    leader,
                    report,
                    received: now,
                },
            );
        }
    }

    /// The group's report, while it is fresh.
    pub fn fresh(&self, group: GroupId) -> Option<Held> {
        let held = self.held.borrow();
        let h = held.get(&group)?;
        (h.received.elapsed() <= self.fresh_for.get()).then(|| h.clone())
    }
}

/// The shard's control handler: LeaderReport frames to its [`Reports`],
/// every other kind to the handler behind (the controller's on shard 0),
/// or `unsupported` while there is none.
#[derive(Default)]
pub struct NodeControl {
    pub reports: Rc<Reports>,
    behind: RefCell<Option<Rc<dyn ControlHandler>>>,
}

impl NodeControl {
    /// Sends the kinds this does not answer to `handler` from now on.
    pub fn set_behind(&self, handler: Rc<dyn ControlHandler>) {
        *self.behind.borrow_mut() = Some(handler);
    }
}

impl ControlHandler for NodeControl {
    fn handle(
        &self,
        from: NodeId,
        kind: RaftKind,
        payload: Bytes,
    ) -> LocalBoxFuture<'static, Result<Vec<u8>, ErrorBody>> {
        if kind != RaftKind::LeaderReport {
            if let Some(h) = self.behind.borrow().as_ref() {
                return h.handle(from, kind, payload);
            }
            return Box::pin(async move {
                Err(ErrorBody {
                    code: code::UNSUPPORTED.into(),
                    message: format!("{kind:?}: no handler on this shard"),
                })
            });
        }
        let answer = match leader_report::decode(&payload) {
            Ok(reports) => {
                self.reports.take(from, reports);
                Ok(Vec::new())
            }
            Err(why) => Err(ErrorBody {
                code: code::MALFORMED.into(),
                message: format!("LeaderReport: {why}"),
            }),
        };
        Box::pin(async move { answer })
    }
}

/// What `raft` reports, if it leads: the leader's own view, with a
/// follower counted in sync only while this shard's connection to it is
/// open (openraft 0.9 says what a follower matched, not when it last
/// answered: on a partition nobody writes, a stopped follower matched all
/// there is).
pub fn local_report(shard: &Shard, raft: &PartitionRaft) -> Option<LeaderReport> {
    if !raft.is_leader() {
        return None;
    }
    let t = shard.raft.as_ref()?;
    let me = shard.config.node_id;
    let limit_ms = 2 * shard.config.cluster.raft_election_timeout_ms;
    let (term, available) = {
        let m = raft.metrics();
        let m = m.borrow();
        // None: no quorum acknowledged this term yet (elected a moment ago).
        (
            m.current_term,
            m.millis_since_quorum_ack.is_none_or(|ms| ms <= limit_ms),
        )
    };
    let in_sync = raft.in_sync();
    let lag = raft.lag();
    let replicas = raft
        .replicas()
        .into_iter()
        .map(|id| ReplicaProgress {
            node_id: id,
            in_sync: in_sync.contains(&id) && (id == me || t.network.connected(id)),
            lag: lag.get(&id).copied().unwrap_or(0),
        })
        .collect();
    let log = raft.log();
    Some(LeaderReport {
        group: raft.group(),
        term,
        high_watermark: log.committed_offset().0,
        log_start_offset: log.log_start_offset().0,
        log_end_offset: log.next_offset().0,
        available,
        replicas,
    })
}

/// Starts the shard's report round (cluster mode; every shard).
pub fn start(shard: &Rc<Shard>) {
    let Some(t) = &shard.raft else { return };
    let c = &shard.config.cluster;
    t.control
        .reports
        .fresh_for
        .set(Duration::from_millis(2 * c.raft_election_timeout_ms));
    glommio::spawn_local(report_round(shard.clone())).detach();
}

/// Every heartbeat interval until shutdown: the groups this shard leads,
/// reported to every peer at once (a peer that does not answer within the
/// election timeout is left for the next round).
async fn report_round(shard: Rc<Shard>) {
    let Some(t) = shard.raft.clone() else { return };
    let c = &shard.config.cluster;
    let every = Duration::from_millis(c.raft_heartbeat_ms);
    let bound = Duration::from_millis(c.raft_election_timeout_ms);
    let me = shard.config.node_id;
    let peers: Vec<NodeId> = c.node_ids().into_iter().filter(|&n| n != me).collect();
    while !shard.is_shutting_down() {
        let led: Vec<PartitionRaft> = shard
            .partitions
            .borrow()
            .iter()
            .filter_map(|(_, _, owned)| owned.raft.clone())
            .collect();
        let reports: Vec<LeaderReport> = led.iter().filter_map(|r| local_report(&shard, r)).collect();
        let frames = leader_report::encode(&reports);
        if !frames.is_empty() {
            let sends = peers.iter().map(|&node| {
                let (net, frames) = (t.network.clone(), &frames);
                async move {
                    for f in frames {
                        let call = Box::pin(net.control_call(node, RaftKind::LeaderReport, f));
                        let late = Box::pin(glommio::timer::sleep(bound));
                        match select(call, late).await {
                            Either::Left((Ok(_), _)) => {}
                            Either::Left((Err(e), _)) => {
                                tracing::trace!(node, error = %e, "leader report not delivered");
                                return;
                            }
                            Either::Right(_) => return,
                        }
                    }
                }
            });
            join_all(sends).await;
        }
        glommio::timer::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(group: GroupId, term: u64) -> LeaderReport {
        LeaderReport {
            group,
            term,
            high_watermark: term * 10,
            log_start_offset: 0,
            log_end_offset: term * 10,
            available: true,
            replicas: vec![],
        }
    }

    #[test]
    fn a_higher_term_wins_while_fresh_and_old_reports_expire() {
        let r = Reports::default();
        r.take(2, vec![report(7, 5)]);
        r.take(3, vec![report(7, 4)]);
        let h = r.fresh(7).unwrap();
        assert_eq!((h.leader, h.report.term), (2, 5), "a lower term does not replace");
        r.take(3, vec![report(7, 6)]);
        assert_eq!(r.fresh(7).unwrap().leader, 3);
        r.take(3, vec![report(7, 6), report(8, 1)]);
        assert_eq!(r.held.borrow().len(), 2);
        r.fresh_for.set(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2)); // blocking-ok: a unit test off any shard
        assert!(r.fresh(7).is_none(), "expired");
        r.take(1, vec![report(7, 2)]);
        assert_eq!(
            r.held.borrow()[&7].leader,
            1,
            "an expired report is replaced by any term"
        );
    }
}
