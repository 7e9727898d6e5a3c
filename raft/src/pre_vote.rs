//! Pre-vote (Raft thesis §9.6), on openraft 0.9, which has none.
//!
//! Without it, a replica cut off by a partition campaigns alone, raising
//! its term at each timeout; when it is heard again, the leader sees the
//! higher term (in an AppendEntries reply) and steps down: an election
//! outside any fault. With it, a replica whose election clock expires
//! (`election_timer`) first asks every other voter whether it could win,
//! and campaigns (openraft's `trigger().elect()`) only with a majority of
//! grants, itself counted. A cut-off replica gets no grant, so its term
//! stays put and the leader keeps its place when the partition heals.
//!
//! A voter grants ([`grants`]) iff it has not heard from a leader within
//! openraft's leader lease (the election timeout: `config::openraft_timeouts`;
//! its openraft refuses the real vote within it) and does not lead, and the candidate's
//! last log id is at least its own (term, then index: openraft's
//! `LogId` order, the one its vote uses). Asking and answering change no
//! state: no term, no vote is written. The real vote still decides;
//! pre-vote only keeps hopeless or needless campaigns from starting.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use openraft::AsyncRuntime;

use crate::election_timer::{Clock, PreVoteStats};
use crate::runtime::GlommioRuntime;
use crate::transport::codec::{ErrorBody, PreVoteReply, PreVoteRequest};
use crate::transport::error::code;
use crate::types::{LogId, NodeId};

/// The grant rule: grant iff no leader was heard from within the leader
/// lease (`leader_is_recent` false) and the candidate's log is
/// at least as up to date as this replica's.
pub fn grants(leader_is_recent: bool, candidate_last: Option<LogId>, own_last: Option<LogId>) -> bool {
    !leader_is_recent && candidate_last >= own_last
}

/// Whether `granted` holds a majority of every config of `joint` (one
/// config, or the two of a joint membership).
pub fn is_quorum(joint: &[BTreeSet<NodeId>], granted: &BTreeSet<NodeId>) -> bool {
    !joint.is_empty()
        && joint
            .iter()
            .all(|c| c.iter().filter(|id| granted.contains(id)).count() * 2 > c.len())
}

/// The answer of this replica (its `clock`) to a pre-vote request.
pub(crate) async fn answer(clock: &Clock, req: &PreVoteRequest) -> Result<PreVoteReply, ErrorBody> {
    let recent = clock.leader_is_recent();
    let own = (clock.last_log)().await.map_err(|e| ErrorBody {
        code: code::NOT_READY.into(),
        message: format!("group {}: reading the last log id: {e}", clock.group),
    })?;
    let term = clock.metrics.borrow().current_term;
    let granted = grants(recent, req.last_log_id, own);
    tracing::debug!(
        group = clock.group,
        granted,
        recent,
        candidate_term = req.term,
        term,
        "pre-vote asked"
    );
    Ok(PreVoteReply { granted, term })
}

/// Clears a clock's round flag when the round ends, however it ends.
struct Round(Rc<Clock>);

impl Drop for Round {
    fn drop(&mut self) {
        self.0.campaigning.set(false);
    }
}

/// One pre-vote round of `clock`'s group, due since `due`: asks every
/// other voter (each answer awaited at most the minimum election
/// timeout) and, with a majority of grants, starts an election unless
/// since `due` a leader was heard from (or a vote granted) or the term
/// moved: another replica is campaigning or leads, and a term of this
/// one's would depose it. The only voter starts one at once.
pub(crate) async fn campaign(clock: Rc<Clock>, stats: Rc<PreVoteStats>, due: Instant) {
    clock.campaigning.set(true);
    let round = Round(clock);
    let clock = &round.0;
    // The scan's instant, not the task's start: a vote granted between
    // the two (a busy executor) must stop the round too.
    let started = due;
    let (me, term, joint) = {
        let m = clock.metrics.borrow();
        let joint = m.membership_config.membership().get_joint_config().clone();
        (m.id, m.current_term, joint)
    };
    let others: BTreeSet<NodeId> = joint.iter().flatten().copied().filter(|&id| id != me).collect();
    if !others.is_empty() {
        let last_log_id = match (clock.last_log)().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(group = clock.group, error = %e, "pre-vote: reading the last log id");
                return;
            }
        };
        let req = PreVoteRequest {
            group: clock.group,
            term: term + 1,
            last_log_id,
        };
        let mut granted = BTreeSet::from([me]);
        let mut asks: FuturesUnordered<_> = others
            .iter()
            .map(|&id| {
                let net = clock.network.clone();
                let within = clock.min;
                async move {
                    let r = GlommioRuntime::timeout(within, net.pre_vote(id, &req)).await;
                    (id, matches!(r, Ok(Ok(PreVoteReply { granted: true, .. }))))
                }
            })
            .collect();
        while let Some((id, yes)) = asks.next().await {
            if yes {
                granted.insert(id);
                if is_quorum(&joint, &granted) {
                    break;
                }
            }
        }
        drop(asks);
        if !is_quorum(&joint, &granted) {
            tracing::debug!(group = clock.group, ?granted, term = req.term, "pre-vote lost");
            return;
        }
        // A leader heard from meanwhile is alive, a vote granted or a
        // term seen meanwhile is another's campaign: no election.
        if clock.heard() > started || clock.metrics.borrow().current_term != term {
            tracing::debug!(
                group = clock.group,
                "pre-vote won, but another replica stood first"
            );
            return;
        }
    }
    if clock.removed.get() {
        return;
    }
    PreVoteStats::bump(&stats.elections);
    tracing::info!(group = clock.group, term = term + 1, "pre-vote won: campaigning");
    if let Err(e) = clock.raft.trigger().elect().await {
        tracing::debug!(group = clock.group, error = %e, "pre-vote: the group stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::log_id;
    use proptest::prelude::*;

    fn opt_log_id() -> impl Strategy<Value = Option<LogId>> {
        proptest::option::of((0u64..4, 0u64..6).prop_map(|(t, i)| log_id(t, i)))
    }

    #[test]
    fn a_recent_leader_or_a_shorter_log_refuses() {
        let (a, b) = (Some(log_id(2, 10)), Some(log_id(3, 4)));
        assert!(grants(false, b, a), "a later term wins over a longer log");
        assert!(!grants(false, a, b));
        assert!(grants(false, a, a), "an equal log is up to date");
        assert!(!grants(true, b, a), "a leader heard recently refuses all");
        assert!(grants(false, Some(log_id(0, 0)), None));
        assert!(!grants(false, None, Some(log_id(0, 0))));
        assert!(grants(false, None, None));
    }

    #[test]
    fn a_majority_of_each_config_is_needed() {
        let c = |ids: &[NodeId]| ids.iter().copied().collect::<BTreeSet<_>>();
        assert!(is_quorum(&[c(&[1])], &c(&[1])), "the only voter");
        assert!(!is_quorum(&[c(&[1, 2])], &c(&[1])), "half is not a majority");
        assert!(is_quorum(&[c(&[1, 2, 3])], &c(&[1, 3])));
        assert!(
            !is_quorum(&[c(&[1, 2, 3])], &c(&[1, 4, 5])),
            "grants of non-voters do not count"
        );
        let joint = [c(&[1, 2, 3]), c(&[3, 4, 5])];
        assert!(!is_quorum(&joint, &c(&[1, 2, 3])), "the new config too");
        assert!(is_quorum(&joint, &c(&[1, 3, 4])));
        assert!(!is_quorum(&[], &c(&[1])));
    }

    proptest! {
        #[test]
        fn the_grant_rule_is_term_then_index(
            recent in any::<bool>(),
            cand in opt_log_id(),
            own in opt_log_id(),
        ) {
            let key = |l: Option<LogId>| l.map(|l| (l.leader_id.term, l.index));
            let up_to_date = match (key(cand), key(own)) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some((ct, ci)), Some((ot, oi))) => ct > ot || (ct == ot && ci >= oi),
            };
            prop_assert_eq!(grants(recent, cand, own), !recent && up_to_date);
            // Of two candidates, at most one is refused by the other's log.
            prop_assert!(grants(false, cand, own) || grants(false, own, cand));
        }

        #[test]
        fn a_quorum_is_more_than_half_and_grows_with_grants(
            voters in proptest::collection::btree_set(1u64..8, 1..6),
            granted in proptest::collection::btree_set(1u64..10, 0..8),
            extra in 1u64..10,
        ) {
            let joint = [voters.clone()];
            let yes = voters.intersection(&granted).count();
            prop_assert_eq!(is_quorum(&joint, &granted), yes * 2 > voters.len());
            let mut more = granted.clone();
            more.insert(extra);
            prop_assert!(!is_quorum(&joint, &granted) || is_quorum(&joint, &more));
        }
    }
}
