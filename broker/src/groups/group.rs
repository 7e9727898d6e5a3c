//! A consumer group's state on its coordinator shard: members with session
//! timeouts, the generation (bumped on every rebalance), the sticky
//! assignment, and committed offsets. Pure: the clock and the partition
//! list come in as arguments, so every rule is unit-tested.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::error::{ApiError, ErrorCode};
use crate::groups::assignor::{self, TopicPartition};
use crate::groups::committed::Committed;
use crate::limits::MEMBERS_MAX;

#[derive(Debug, Clone)]
pub struct Member {
    pub session_timeout: Duration,
    pub last_seen: Instant,
    pub assignment: BTreeSet<TopicPartition>,
}

/// Lives on its coordinator shard. Kept while it has members or committed
/// offsets; one with neither is forgotten (it has nothing on disk).
#[derive(Debug)]
pub struct Group {
    /// Shared with the key of the shard's map of groups.
    pub name: Rc<str>,
    /// The topics the members consume (all members share them).
    pub topics: Vec<String>,
    pub generation: u64,
    pub members: BTreeMap<String, Member>,
    pub committed: Committed,
    pub rebalances: u64,
    /// When the group last committed or last had members, in ms since the
    /// Unix epoch: its offsets expire `--group-offsets-retention-ms` after
    /// this while it has no members.
    pub idle_since_ms: i64,
    /// The API key that owns the group (docs/security.md): set by the key
    /// that created it (or, for a group made while auth was disabled, the
    /// first key that writes to it); durable with its commits.
    pub owner: Option<Rc<str>>,
    /// Whether the groups log holds `owner` (a join sets it in memory; the
    /// first commit writes it).
    pub owner_durable: bool,
    /// Cluster mode: the controller log index of the offsets held (the
    /// newest applied here from the controller group, `offset_store::adopt`).
    pub controller_index: u64,
}

impl Group {
    pub fn new(name: &str) -> Group {
        Group {
            name: name.into(),
            topics: Vec::new(),
            generation: 0,
            members: BTreeMap::new(),
            committed: Committed::default(),
            rebalances: 0,
            idle_since_ms: 0,
            owner: None,
            owner_durable: false,
            controller_index: 0,
        }
    }

    /// Whether the group's offsets have expired at `now_ms`: it has no
    /// members, and has been idle (no commit, no member) for longer than
    /// `retention_ms`.
    pub fn offsets_expired(&self, now_ms: i64, retention_ms: u64) -> bool {
        let retention = i64::try_from(retention_ms).unwrap_or(i64::MAX);
        self.members.is_empty() && now_ms.saturating_sub(self.idle_since_ms) > retention
    }

    /// Whether the group holds nothing worth keeping: no member, no offset.
    pub fn is_vacant(&self) -> bool {
        self.members.is_empty() && self.committed.is_empty()
    }

    /// Adds a member and rebalances. `partitions` lists the partitions of
    /// `topics` (which must exist).
    pub fn join(
        &mut self,
        member_id: String,
        topics: Vec<String>,
        session_timeout: Duration,
        partitions: &BTreeSet<TopicPartition>,
        now: Instant,
    ) -> Result<(), ApiError> {
        let mut sorted = topics;
        sorted.sort();
        sorted.dedup();
        if sorted.is_empty() {
            return Err(ApiError::invalid("topics must name at least one topic"));
        }
        if !self.members.is_empty() && sorted != self.topics {
            return Err(ApiError::new(
                ErrorCode::InconsistentTopics,
                format!(
                    "group {:?} consumes {:?}; every member must join with the same topics",
                    self.name, self.topics
                ),
            ));
        }
        if self.members.len() >= MEMBERS_MAX {
            return Err(ApiError::new(
                ErrorCode::GroupFull,
                format!("group {:?} has {MEMBERS_MAX} members", self.name),
            ));
        }
        self.topics = sorted;
        self.members.insert(
            member_id,
            Member {
                session_timeout,
                last_seen: now,
                assignment: BTreeSet::new(),
            },
        );
        self.rebalance(partitions);
        Ok(())
    }

    pub fn member(&self, member_id: &str) -> Result<&Member, ApiError> {
        self.members
            .get(member_id)
            .ok_or_else(|| unknown_member(&self.name, member_id))
    }

    /// A heartbeat: the member is alive.
    pub fn heartbeat(&mut self, member_id: &str, now: Instant) -> Result<(), ApiError> {
        let name = self.name.clone();
        let m = self
            .members
            .get_mut(member_id)
            .ok_or_else(|| unknown_member(&name, member_id))?;
        m.last_seen = now;
        Ok(())
    }

    pub fn leave(&mut self, member_id: &str, partitions: &BTreeSet<TopicPartition>) -> Result<(), ApiError> {
        if self.members.remove(member_id).is_none() {
            return Err(unknown_member(&self.name, member_id));
        }
        self.rebalance(partitions);
        Ok(())
    }

    /// Removes members whose session timed out; true if any did.
    pub fn expire(&mut self, now: Instant, partitions: &BTreeSet<TopicPartition>) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| now.duration_since(m.last_seen) > m.session_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        if !expired.is_empty() {
            for id in &expired {
                self.members.remove(id);
            }
            self.rebalance(partitions);
        }
        expired
    }

    /// A new generation with a sticky assignment over `partitions`.
    pub fn rebalance(&mut self, partitions: &BTreeSet<TopicPartition>) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        let current = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.assignment.clone()))
            .collect();
        let next = assignor::assign(&ids, partitions, &current);
        for (id, assignment) in next {
            if let Some(m) = self.members.get_mut(&id) {
                m.assignment = assignment;
            }
        }
        if self.members.is_empty() {
            self.topics.clear();
        }
        self.generation += 1;
        self.rebalances += 1;
    }

    /// Checks that a commit may be applied: by a current member of the
    /// current generation for partitions it holds, or, with no member given,
    /// only while the group has no members (tools, resets).
    pub fn check_commit(
        &self,
        member: Option<(&str, u64)>,
        offsets: &[(TopicPartition, u64)],
    ) -> Result<(), ApiError> {
        match member {
            None if !self.members.is_empty() => Err(ApiError::new(ErrorCode::GroupNotEmpty,
                format!(
                    "group {:?} has members: commit as a member (member_id and generation), or wait until it is empty",
                    self.name
                ),
            )),
            None => Ok(()),
            Some((id, generation)) => {
                let m = self.member(id)?;
                if generation != self.generation {
                    return Err(ApiError::new(ErrorCode::StaleGeneration,
                        format!(
                            "generation {generation} is stale: group {:?} is at generation {}; heartbeat to get the new assignment",
                            self.name, self.generation
                        ),
                    ));
                }
                if let Some(((t, p), _)) = offsets.iter().find(|(tp, _)| !m.assignment.contains(tp)) {
                    return Err(ApiError::new(ErrorCode::NotAssigned,
                        format!("member {id} does not hold {t}/{p} in generation {}", self.generation),
                    ));
                }
                Ok(())
            }
        }
    }
}

fn unknown_member(group: &str, member: &str) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownMember,
        format!("member {member:?} is not in group {group:?} (session expired or left): join again"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(n: u32) -> BTreeSet<TopicPartition> {
        (0..n).map(|p| ("t".to_string(), p)).collect()
    }

    #[test]
    fn join_expire_commit_rules() {
        let p = parts(4);
        let t0 = Instant::now();
        let mut g = Group::new("g");
        let timeout = Duration::from_millis(100);
        g.join("a".into(), vec!["t".into()], timeout, &p, t0).unwrap();
        assert_eq!(g.generation, 1);
        g.join("b".into(), vec!["t".into()], timeout, &p, t0).unwrap();
        assert_eq!(g.generation, 2);
        assert_eq!(g.members["a"].assignment.len(), 2);
        assert_eq!(g.members["b"].assignment.len(), 2);
        assert_eq!(
            g.join("c".into(), vec!["other".into()], timeout, &p, t0)
                .unwrap_err()
                .code,
            "inconsistent_topics"
        );
        let a_part = g.members["a"].assignment.iter().next().unwrap().clone();
        let b_part = g.members["b"].assignment.iter().next().unwrap().clone();
        assert!(g.check_commit(Some(("a", 2)), &[(a_part.clone(), 5)]).is_ok());
        assert_eq!(
            g.check_commit(Some(("a", 1)), &[(a_part.clone(), 5)])
                .unwrap_err()
                .code,
            "stale_generation"
        );
        assert_eq!(
            g.check_commit(Some(("a", 2)), &[(b_part, 5)]).unwrap_err().code,
            "not_assigned"
        );
        assert_eq!(
            g.check_commit(None, &[(a_part.clone(), 5)]).unwrap_err().code,
            "group_not_empty"
        );
        assert_eq!(
            g.check_commit(Some(("zz", 2)), &[]).unwrap_err().code,
            "unknown_member"
        );
        // b stops heartbeating; a keeps going and takes over b's partitions.
        let later = t0 + Duration::from_millis(150);
        g.heartbeat("a", later).unwrap();
        let a_before = g.members["a"].assignment.clone();
        assert_eq!(g.expire(later, &p), vec!["b".to_string()]);
        assert_eq!(g.generation, 3);
        assert_eq!(g.members["a"].assignment.len(), 4);
        assert!(a_before.is_subset(&g.members["a"].assignment), "a keeps its own");
        g.leave("a", &p).unwrap();
        assert!(g.members.is_empty());
        assert!(g.check_commit(None, &[(a_part, 1)]).is_ok());
    }

    /// Offsets expire only without members, and only once the group has
    /// been idle for longer than the retention (the clock is an argument).
    #[test]
    fn offsets_expire_after_the_retention_without_members() {
        const DAY_MS: u64 = 24 * 60 * 60 * 1000;
        let retention = 7 * DAY_MS;
        let mut g = Group::new("g");
        g.committed.set("t", 0, 5);
        g.idle_since_ms = 1_000;
        let at = |ms: u64| 1_000 + ms as i64;
        assert!(
            !g.offsets_expired(at(retention), retention),
            "exactly the retention: kept"
        );
        assert!(g.offsets_expired(at(retention + 1), retention));
        assert!(!g.offsets_expired(at(DAY_MS), retention), "a day idle of seven");
        // A member keeps them, however long it has been.
        g.join(
            "a".into(),
            vec!["t".into()],
            Duration::from_secs(10),
            &parts(1),
            Instant::now(),
        )
        .unwrap();
        assert!(!g.offsets_expired(at(100 * DAY_MS), retention));
        // A clock behind the last commit never expires anything.
        g.members.clear();
        assert!(!g.offsets_expired(0, 1));
        assert!(!g.offsets_expired(i64::MIN, 0));
        assert!(
            !g.offsets_expired(at(retention), u64::MAX),
            "a retention past i64 never expires"
        );
    }
}
