//! Kafka's classic consumer group protocol (client-side assignment), on
//! the group's coordinator shard, beside es's own groups (docs/kafka.md,
//! "Consumer groups"). A group is Empty, PreparingRebalance (members
//! rejoin; the join phase ends once every member has, or at the largest
//! rebalance timeout, dropping those that did not), CompletingRebalance
//! (the leader computes the assignment; followers' SyncGroups wait for
//! it) or Stable. Members expire after their session timeout. Commits go
//! to the same groups log as es's (coordinator.rs `commit`), so es's
//! describe, lag and reset see them; a group's protocol kind is fixed by
//! its first member: an es join of a group with Kafka members, or the
//! reverse, is refused with `inconsistent_protocol`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::groups::assignor::TopicPartition;
use crate::limits::{MEMBERS_MAX, SESSION_TIMEOUT_MS_MAX, SESSION_TIMEOUT_MS_MIN};
use crate::shard::Shard;

/// A Kafka group operation, run on the group's shard.
#[derive(Debug)]
pub enum ClassicOp {
    Join(JoinArgs),
    Sync {
        member_id: String,
        generation: i32,
        /// The leader's assignment: member id and its opaque bytes.
        assignments: Vec<(String, Bytes)>,
    },
    Heartbeat {
        member_id: String,
        generation: i32,
    },
    Leave {
        member_ids: Vec<String>,
    },
    /// Commits offsets, once the generation and member check out.
    Commit {
        member_id: String,
        generation: i32,
        offsets: Vec<(TopicPartition, u64)>,
    },
    Describe,
}

#[derive(Debug)]
pub struct JoinArgs {
    pub member_id: String,
    /// Whether the client speaks JoinGroup v4+, where a first join gets
    /// MEMBER_ID_REQUIRED with its id.
    pub requires_known_id: bool,
    pub client_id: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
}

/// What a Kafka group operation answers.
#[derive(Debug, Clone, Default)]
pub struct ClassicReply {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub leader: String,
    pub member_id: String,
    /// JoinGroup: every member and its metadata (the leader's answer
    /// only). DescribeGroups: every member and its assignment.
    pub members: Vec<(String, Bytes, Bytes)>,
    /// SyncGroup: this member's assignment.
    pub assignment: Bytes,
    /// DescribeGroups: the state's name.
    pub state: String,
}

/// Kafka error codes the group protocol answers itself.
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

struct Member {
    client_id: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_seen: Instant,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// Its JoinGroup waiting for the join phase to end.
    joining: Option<oneshot::Sender<ClassicReply>>,
    /// Its SyncGroup waiting for the leader's assignment.
    syncing: Option<oneshot::Sender<ClassicReply>>,
}

/// One Kafka group's membership.
pub struct ClassicGroup {
    state: State,
    generation: i32,
    protocol_type: String,
    protocol: String,
    leader: String,
    members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pending: HashSet<String>,
    /// Bumped on every new join phase: a timer of an earlier phase does nothing.
    phase: u64,
}

/// The Kafka groups a shard coordinates.
#[derive(Default)]
pub struct ClassicGroups {
    groups: RefCell<HashMap<String, ClassicGroup>>,
}

impl ClassicGroups {
    /// Whether `group` has Kafka members: an es join is then refused.
    pub fn has_members(&self, group: &str) -> bool {
        self.groups
            .borrow()
            .get(group)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// The names of the groups with Kafka members.
    pub fn names(&self) -> Vec<(String, usize, i32)> {
        self.groups
            .borrow()
            .iter()
            .filter(|(_, g)| !g.members.is_empty())
            .map(|(n, g)| (n.clone(), g.members.len(), g.generation))
            .collect()
    }
}

/// The error an es join gets on a group with Kafka members, and a Kafka
/// join on a group with es members.
pub fn inconsistent_protocol(group: &str, has: &str) -> ApiError {
    ApiError::new(
        ErrorCode::InconsistentProtocol,
        format!("group {group:?} has {has} members: a group's protocol is fixed by its first member; use another group"),
    )
}

fn reply(error: i16) -> ClassicReply {
    ClassicReply {
        error,
        ..ClassicReply::default()
    }
}

/// Runs a Kafka group operation on the group's shard.
pub async fn run(
    shard: &Rc<Shard>,
    name: &str,
    op: ClassicOp,
    caller: &Principal,
) -> Result<ClassicReply, ApiError> {
    crate::groups::cluster::check(shard)?;
    let groups = &shard.classic_groups;
    match op {
        ClassicOp::Join(args) => {
            if shard
                .groups
                .groups()
                .get(name)
                .is_some_and(|g| !g.members.is_empty())
            {
                return Err(inconsistent_protocol(name, "es"));
            }
            let waiting = {
                let mut all = groups.groups.borrow_mut();
                let g = all.entry(name.to_string()).or_insert_with(|| ClassicGroup {
                    state: State::Empty,
                    generation: 0,
                    protocol_type: String::new(),
                    protocol: String::new(),
                    leader: String::new(),
                    members: BTreeMap::new(),
                    pending: HashSet::new(),
                    phase: 0,
                });
                match join(shard, g, args) {
                    Err(r) => return Ok(*r),
                    Ok(rx) => rx,
                }
            };
            arm_phase_timer(shard, name);
            complete_join_if_ready(shard, name);
            Ok(waiting.await.unwrap_or_else(|_| reply(REBALANCE_IN_PROGRESS)))
        }
        ClassicOp::Sync {
            member_id,
            generation,
            assignments,
        } => {
            let rx = {
                let mut all = groups.groups.borrow_mut();
                let Some(g) = all.get_mut(name) else {
                    return Ok(reply(UNKNOWN_MEMBER_ID));
                };
                if let Err(code) = g.check(&member_id, generation) {
                    return Ok(reply(code));
                }
                match g.state {
                    State::PreparingRebalance | State::Empty => return Ok(reply(REBALANCE_IN_PROGRESS)),
                    State::Stable => return Ok(g.sync_reply(&member_id)),
                    State::CompletingRebalance => {}
                }
                let (tx, rx) = oneshot::channel();
                if let Some(m) = g.members.get_mut(&member_id) {
                    m.last_seen = Instant::now();
                    m.syncing = Some(tx);
                }
                if member_id == g.leader {
                    let given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for (id, m) in g.members.iter_mut() {
                        m.assignment = given.get(id).cloned().unwrap_or_default();
                    }
                    g.state = State::Stable;
                    let ids: Vec<String> = g.members.keys().cloned().collect();
                    for id in ids {
                        let r = g.sync_reply(&id);
                        if let Some(tx) = g.members.get_mut(&id).and_then(|m| m.syncing.take()) {
                            let _ = tx.send(r);
                        }
                    }
                }
                rx
            };
            Ok(rx.await.unwrap_or_else(|_| reply(REBALANCE_IN_PROGRESS)))
        }
        ClassicOp::Heartbeat {
            member_id,
            generation,
        } => {
            let mut all = groups.groups.borrow_mut();
            let Some(g) = all.get_mut(name) else {
                return Ok(reply(UNKNOWN_MEMBER_ID));
            };
            if let Err(code) = g.check(&member_id, generation) {
                return Ok(reply(code));
            }
            if let Some(m) = g.members.get_mut(&member_id) {
                m.last_seen = Instant::now();
            }
            Ok(reply(match g.state {
                State::PreparingRebalance => REBALANCE_IN_PROGRESS,
                _ => 0,
            }))
        }
        ClassicOp::Leave { member_ids } => {
            let mut codes = Vec::with_capacity(member_ids.len());
            {
                let mut all = groups.groups.borrow_mut();
                let Some(g) = all.get_mut(name) else {
                    return Ok(reply(UNKNOWN_MEMBER_ID));
                };
                for id in &member_ids {
                    codes.push(if g.members.remove(id).is_some() {
                        0
                    } else {
                        UNKNOWN_MEMBER_ID
                    });
                }
                if codes.contains(&0) {
                    g.rebalance(shard.id);
                }
            }
            if codes.contains(&0) {
                arm_phase_timer(shard, name);
                complete_join_if_ready(shard, name);
            }
            let mut r = reply(0);
            r.members = member_ids
                .into_iter()
                .zip(&codes)
                .map(|(id, c)| (id, Bytes::copy_from_slice(&c.to_be_bytes()), Bytes::new()))
                .collect();
            Ok(r)
        }
        ClassicOp::Commit {
            member_id,
            generation,
            offsets,
        } => {
            let code = {
                let all = groups.groups.borrow();
                let g = all.get(name);
                match g {
                    // A commit from outside the group (no member, generation -1)
                    // only while it has no members: es's rule too.
                    _ if member_id.is_empty() && generation < 0 => {
                        if g.is_some_and(|g| !g.members.is_empty()) {
                            ILLEGAL_GENERATION
                        } else {
                            0
                        }
                    }
                    None => UNKNOWN_MEMBER_ID,
                    Some(g) => match g.check(&member_id, generation) {
                        Err(c) => c,
                        Ok(()) if g.state == State::PreparingRebalance => REBALANCE_IN_PROGRESS,
                        Ok(()) => 0,
                    },
                }
            };
            if code != 0 {
                return Ok(reply(code));
            }
            crate::groups::coordinator::commit(shard, name, None, offsets, caller).await?;
            Ok(reply(0))
        }
        ClassicOp::Describe => {
            let all = groups.groups.borrow();
            let Some(g) = all.get(name).filter(|g| !g.members.is_empty()) else {
                return Ok(ClassicReply {
                    state: "Empty".into(),
                    ..reply(0)
                });
            };
            Ok(ClassicReply {
                state: g.state.name().into(),
                generation: g.generation,
                protocol_type: g.protocol_type.clone(),
                protocol: g.protocol.clone(),
                leader: g.leader.clone(),
                members: g
                    .members
                    .iter()
                    .map(|(id, m)| {
                        let meta = m
                            .protocols
                            .iter()
                            .find(|(n, _)| *n == g.protocol)
                            .map(|(_, b)| b.clone())
                            .unwrap_or_default();
                        (format!("{id}\0{}", m.client_id), meta, m.assignment.clone())
                    })
                    .collect(),
                ..reply(0)
            })
        }
    }
}

/// Adds or refreshes a joining member and starts a join phase: the
/// answer's receiver, or the answer at once (an error, or
/// MEMBER_ID_REQUIRED).
fn join(
    shard: &Shard,
    g: &mut ClassicGroup,
    a: JoinArgs,
) -> Result<oneshot::Receiver<ClassicReply>, Box<ClassicReply>> {
    let session = a.session_timeout_ms as u64;
    if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&session) || a.session_timeout_ms < 0 {
        return Err(Box::new(reply(INVALID_SESSION_TIMEOUT)));
    }
    if !g.members.is_empty()
        && (a.protocol_type != g.protocol_type
            || !a.protocols.iter().any(|(n, _)| {
                g.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == n))
            }))
    {
        return Err(Box::new(reply(INCONSISTENT_GROUP_PROTOCOL)));
    }
    let mut member_id = a.member_id;
    if member_id.is_empty() {
        member_id = format!(
            "{}-{}",
            a.client_id,
            crate::groups::coordinator::new_member_id(shard)
        );
        if a.requires_known_id {
            if g.pending.len() >= MEMBERS_MAX {
                g.pending.clear();
            }
            g.pending.insert(member_id.clone());
            return Err(Box::new(ClassicReply {
                member_id,
                ..reply(MEMBER_ID_REQUIRED)
            }));
        }
    } else if !g.members.contains_key(&member_id) && !g.pending.remove(&member_id) {
        return Err(Box::new(ClassicReply {
            member_id,
            ..reply(UNKNOWN_MEMBER_ID)
        }));
    }
    if !g.members.contains_key(&member_id) && g.members.len() >= MEMBERS_MAX {
        return Err(Box::new(reply(GROUP_MAX_SIZE_REACHED)));
    }
    if g.members.is_empty() {
        g.protocol_type = a.protocol_type;
    }
    let (tx, rx) = oneshot::channel();
    let member = g.members.entry(member_id).or_insert_with(|| Member {
        client_id: a.client_id.clone(),
        session_timeout: Duration::ZERO,
        rebalance_timeout: Duration::ZERO,
        last_seen: Instant::now(),
        protocols: Vec::new(),
        assignment: Bytes::new(),
        joining: None,
        syncing: None,
    });
    member.session_timeout = Duration::from_millis(session);
    member.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(a.session_timeout_ms) as u64);
    member.last_seen = Instant::now();
    member.protocols = a.protocols;
    member.joining = Some(tx);
    if g.state != State::PreparingRebalance {
        g.rebalance(shard.id);
    }
    Ok(rx)
}

impl ClassicGroup {
    /// Whether `member_id` of `generation` may act.
    fn check(&self, member_id: &str, generation: i32) -> Result<(), i16> {
        if !self.members.contains_key(member_id) {
            return Err(UNKNOWN_MEMBER_ID);
        }
        if generation != self.generation {
            return Err(ILLEGAL_GENERATION);
        }
        Ok(())
    }

    /// Starts a join phase (or empties the group): syncs waiting get
    /// REBALANCE_IN_PROGRESS.
    fn rebalance(&mut self, _shard: usize) {
        for m in self.members.values_mut() {
            if let Some(tx) = m.syncing.take() {
                let _ = tx.send(reply(REBALANCE_IN_PROGRESS));
            }
        }
        self.phase += 1;
        self.state = if self.members.is_empty() {
            self.generation += 1;
            self.leader.clear();
            State::Empty
        } else {
            State::PreparingRebalance
        };
    }

    fn sync_reply(&self, member_id: &str) -> ClassicReply {
        ClassicReply {
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
            ..reply(0)
        }
    }

    /// Ends the join phase: a new generation, a leader, a protocol every
    /// member speaks; each waiting join answered.
    fn complete_join(&mut self) {
        self.generation += 1;
        if !self.members.contains_key(&self.leader) {
            self.leader = self.members.keys().next().cloned().unwrap_or_default();
        }
        let leader_protocols: Vec<String> = self
            .members
            .get(&self.leader)
            .map(|m| m.protocols.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        self.protocol = leader_protocols
            .into_iter()
            .find(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == n))
            })
            .unwrap_or_default();
        self.state = State::CompletingRebalance;
        let now = Instant::now();
        for m in self.members.values_mut() {
            m.last_seen = now;
        }
        let members: Vec<(String, Bytes, Bytes)> = self
            .members
            .iter()
            .map(|(id, m)| {
                let meta = m
                    .protocols
                    .iter()
                    .find(|(n, _)| *n == self.protocol)
                    .map(|(_, b)| b.clone());
                (id.clone(), meta.unwrap_or_default(), Bytes::new())
            })
            .collect();
        let base = ClassicReply {
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            ..reply(0)
        };
        for (id, m) in self.members.iter_mut() {
            if let Some(tx) = m.joining.take() {
                let mut r = base.clone();
                r.member_id = id.clone();
                if *id == self.leader {
                    r.members = members.clone();
                }
                let _ = tx.send(r);
            }
        }
    }
}

/// Ends the join phase of `name` if every member has rejoined.
fn complete_join_if_ready(shard: &Shard, name: &str) {
    let mut all = shard.classic_groups.groups.borrow_mut();
    let Some(g) = all.get_mut(name) else { return };
    if g.state == State::PreparingRebalance && g.members.values().all(|m| m.joining.is_some()) {
        g.complete_join();
    }
}

/// At the end of a join phase's longest rebalance timeout, members that
/// did not rejoin are dropped and the phase ends with those that did.
fn arm_phase_timer(shard: &Rc<Shard>, name: &str) {
    let (phase, wait) = {
        let all = shard.classic_groups.groups.borrow();
        let Some(g) = all.get(name).filter(|g| g.state == State::PreparingRebalance) else {
            return;
        };
        let wait = g
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        (g.phase, wait)
    };
    let (shard, name) = (shard.clone(), name.to_string());
    glommio::spawn_local(async move {
        glommio::timer::sleep(wait).await;
        let mut all = shard.classic_groups.groups.borrow_mut();
        let Some(g) = all
            .get_mut(&name)
            .filter(|g| g.phase == phase && g.state == State::PreparingRebalance)
        else {
            return;
        };
        g.members.retain(|_, m| m.joining.is_some());
        if g.members.is_empty() {
            g.rebalance(shard.id);
        } else {
            g.complete_join();
        }
    })
    .detach();
}

/// Drops members whose session timed out, on every Kafka group of this
/// shard; their groups rebalance (called by the coordinator's expiry loop).
pub fn expire(shard: &Rc<Shard>, now: Instant) {
    let mut rebalanced = Vec::new();
    {
        let mut all = shard.classic_groups.groups.borrow_mut();
        for (name, g) in all.iter_mut() {
            let before = g.members.len();
            // A member waiting in a join is alive: its session restarts
            // when the phase ends.
            g.members.retain(|_, m| {
                m.joining.is_some() || now.saturating_duration_since(m.last_seen) < m.session_timeout
            });
            if g.members.len() != before {
                tracing::info!(group = %name, dropped = before - g.members.len(), "Kafka group members expired; rebalancing");
                g.rebalance(shard.id);
                rebalanced.push(name.clone());
            }
        }
        all.retain(|_, g| !g.members.is_empty() || !g.pending.is_empty());
    }
    for name in rebalanced {
        arm_phase_timer(shard, &name);
        complete_join_if_ready(shard, &name);
    }
}
