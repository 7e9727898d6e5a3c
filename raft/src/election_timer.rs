//! `ElectionTimer`: a shard's election timeouts, one [`Clock`] per group,
//! in place of openraft's own (turned off: openraft 0.9 campaigns without
//! asking first, `crate::pre_vote` says why that deposes healthy leaders).
//!
//! One ticker task per shard scans the shard's clocks (a shard holds up to
//! ~1000 groups: one task, not one timer per group). A clock expires when
//! its replica has neither heard from a leader nor started a round for a
//! timeout drawn at random between the election timeout and twice that
//! (`config::election_draw`); the ticker then starts a pre-vote round for the
//! group (`pre_vote::campaign`), at most one at a time per group.
//!
//! A replica hears from a leader when it accepts an AppendEntries or a
//! heartbeat of the group, grants a vote, or takes a piece of a snapshot
//! transfer (the server records it: `GroupRegistry::heard_from_leader`),
//! and all the while it leads. Opening counts too: a replica just opened
//! waits one timeout before it campaigns or grants a pre-vote, so a
//! restarted node gives a healthy leader the time to reach it first.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use futures::future::LocalBoxFuture;
use openraft::storage::RaftLogStorage;
use openraft::{AsyncRuntime, Raft, ServerState};
use rand::Rng;

use crate::group::MetricsWatch;
use crate::limits::{ELECTION_TICK_MAX, ELECTION_TICK_MIN};
use crate::runtime::GlommioRuntime;
use crate::transport::ShardNetwork;
use crate::types::{EsRaft, GroupId, LogId};

/// Reads a replica's last log id (its log store's).
pub(crate) type LastLog = Rc<dyn Fn() -> LocalBoxFuture<'static, Result<Option<LogId>, String>>>;

/// The [`LastLog`] of a log store.
pub(crate) fn last_log_of<S: RaftLogStorage<EsRaft> + Clone + 'static>(store: S) -> LastLog {
    Rc::new(move || {
        let mut s = store.clone();
        Box::pin(async move {
            s.get_log_state()
                .await
                .map(|st| st.last_log_id)
                .map_err(|e| e.to_string())
        })
    })
}

/// One group's election clock on this shard.
pub(crate) struct Clock {
    pub(crate) group: GroupId,
    pub(crate) raft: Raft<EsRaft>,
    pub(crate) metrics: MetricsWatch,
    pub(crate) last_log: LastLog,
    pub(crate) network: ShardNetwork,
    /// The shortest election timeout: a pre-vote round's deadline.
    pub(crate) min: Duration,
    max: Duration,
    /// openraft's leader lease: a replica that heard from a leader within
    /// this refuses pre-votes, as its openraft refuses votes.
    lease: Duration,
    /// When this replica last heard from a leader (or led, or opened).
    heard: Cell<Instant>,
    /// When the current wait began (the last round, or opening).
    since: Cell<Instant>,
    /// The current wait's timeout, drawn in `[min, max]`.
    timeout: Cell<Duration>,
    /// A pre-vote round of this group is running.
    pub(crate) campaigning: Cell<bool>,
    /// The group left the shard: a round in flight stops.
    pub(crate) removed: Cell<bool>,
}

/// An election timeout drawn as a clock of a group with `config` draws
/// one: between the election timeout and twice that.
pub(crate) fn draw_timeout(config: &crate::group::GroupConfig) -> Duration {
    let (min, max) = crate::config::election_bounds(config.election_timeout_ms);
    draw(min, max)
}

fn draw(min: Duration, max: Duration) -> Duration {
    if max <= min {
        return min;
    }
    rand::thread_rng().gen_range(min..=max)
}

impl Clock {
    /// Notes that this replica heard from a leader of the group now.
    pub(crate) fn heard_from_leader(&self) {
        self.heard.set(Instant::now());
    }

    /// When this replica last heard from a leader.
    pub(crate) fn heard(&self) -> Instant {
        self.heard.get()
    }

    /// Whether this replica leads, or heard from a leader within the lease.
    pub(crate) fn leader_is_recent(&self) -> bool {
        self.metrics.borrow().state == ServerState::Leader || self.heard.get().elapsed() <= self.lease
    }

    /// Whether a round should start now; if so, starts the next wait.
    fn due(&self, now: Instant) -> bool {
        let (leads, voter, sole, candidate) = {
            let m = self.metrics.borrow();
            let me = m.id;
            let membership = m.membership_config.membership();
            let voter = membership.voter_ids().any(|id| id == me);
            let sole = voter && membership.voter_ids().all(|id| id == me);
            (
                m.state == ServerState::Leader,
                voter,
                sole,
                m.state == ServerState::Candidate,
            )
        };
        // A leader, and a learner (which never campaigns), keep the clock
        // reset: the wait starts over if either stops being so.
        if leads || !voter {
            self.heard.set(now);
            return false;
        }
        if self.campaigning.get() {
            return false;
        }
        let expired = now >= self.heard.get().max(self.since.get()) + self.timeout.get();
        // The only voter elects at once (no one to ask, no one to depose);
        // again only after a timeout if an election of its own is running.
        if !(expired || (sole && !candidate)) {
            return false;
        }
        self.since.set(now);
        self.timeout.set(draw(self.min, self.max));
        true
    }
}

/// What the shard's pre-vote rounds did (all groups together).
#[derive(Debug, Default)]
pub struct PreVoteStats {
    /// Rounds started (a clock expired).
    pub rounds: Cell<u64>,
    /// Rounds that won a majority: elections started.
    pub elections: Cell<u64>,
    /// Pre-votes this shard granted to other nodes.
    pub granted: Cell<u64>,
    /// Pre-votes this shard refused.
    pub refused: Cell<u64>,
}

impl PreVoteStats {
    pub(crate) fn bump(c: &Cell<u64>) {
        c.set(c.get() + 1);
    }
}

#[derive(Default)]
struct Inner {
    clocks: RefCell<HashMap<GroupId, Rc<Clock>>>,
    ticking: Cell<bool>,
    tick: Cell<Option<Duration>>,
    stats: Rc<PreVoteStats>,
}

/// A shard's election clocks and their ticker; clones share them. The
/// shard's [`GroupRegistry`](crate::transport::GroupRegistry) holds it.
#[derive(Clone, Default)]
pub struct ElectionTimer(Rc<Inner>);

impl ElectionTimer {
    /// Turns openraft's election timer of `group` off and runs the group's
    /// elections from here, with its config's election timeouts: on the
    /// shard's executor (starts the ticker if it is not running).
    pub(crate) fn register(
        &self,
        group: GroupId,
        raft: Raft<EsRaft>,
        last_log: LastLog,
        network: ShardNetwork,
    ) {
        raft.runtime_config().elect(false);
        let (min, max) = crate::config::election_draw(raft.config());
        let lease = crate::config::leader_lease(raft.config());
        let now = Instant::now();
        let clock = Rc::new(Clock {
            group,
            metrics: raft.metrics(),
            raft,
            last_log,
            network,
            min,
            max,
            lease,
            heard: Cell::new(now),
            since: Cell::new(now),
            timeout: Cell::new(draw(min, max)),
            campaigning: Cell::new(false),
            removed: Cell::new(false),
        });
        if let Some(old) = self.0.clocks.borrow_mut().insert(group, clock) {
            old.removed.set(true);
        }
        // A tenth of the shortest timeout: a clock expires at most that
        // late, which keeps the draw's spread.
        let tick = (min / 10).clamp(ELECTION_TICK_MIN, ELECTION_TICK_MAX);
        self.0
            .tick
            .set(Some(self.0.tick.get().map_or(tick, |t| t.min(tick))));
        if !self.0.ticking.replace(true) {
            GlommioRuntime::spawn(ticker(Rc::downgrade(&self.0)));
        }
    }

    /// Stops running `group`'s elections (it left the shard).
    pub(crate) fn remove(&self, group: GroupId) {
        if let Some(c) = self.0.clocks.borrow_mut().remove(&group) {
            c.removed.set(true);
        }
    }

    /// `group`'s clock, if its elections run here.
    pub(crate) fn clock(&self, group: GroupId) -> Option<Rc<Clock>> {
        self.0.clocks.borrow().get(&group).cloned()
    }

    /// Whether `group`'s replica has heard from no leader for longer than
    /// its longest election timeout (false where openraft runs the
    /// group's elections). openraft keeps the last leader it followed
    /// until an election, and a replica cut off never starts one now:
    /// past this, that leader is not known any more.
    pub fn leader_lost(&self, group: GroupId) -> bool {
        self.clock(group).is_some_and(|c| c.heard.get().elapsed() > c.max)
    }

    /// The shard's pre-vote counters.
    pub fn stats(&self) -> &Rc<PreVoteStats> {
        &self.0.stats
    }
}

/// Scans the clocks every tick and starts a round for each that is due;
/// ends when the timer is dropped or has no clock left.
async fn ticker(timer: Weak<Inner>) {
    loop {
        let Some(tick) = timer.upgrade().and_then(|t| t.tick.get()) else {
            return;
        };
        GlommioRuntime::sleep(tick).await;
        let Some(inner) = timer.upgrade() else {
            return;
        };
        if inner.clocks.borrow().is_empty() {
            inner.ticking.set(false);
            return;
        }
        let now = Instant::now();
        let due: Vec<Rc<Clock>> = inner
            .clocks
            .borrow()
            .values()
            .filter(|c| c.due(now))
            .cloned()
            .collect();
        for clock in due {
            PreVoteStats::bump(&inner.stats.rounds);
            GlommioRuntime::spawn(crate::pre_vote::campaign(clock, inner.stats.clone(), now));
        }
    }
}
