//! `es consume TOPIC --group G`: consumes as a member of consumer group G
//! (docs/groups.md).
//!
//! It joins the group, heartbeats from a thread (`heartbeat`) and with
//! every round, and reads
//! only the partitions assigned to it, in rounds like the plain consumer:
//! one fetch per partition, pipelined, printed in partition order. A
//! partition starts at the group's committed offset, or, when the group
//! never committed it, at the high watermark (the log start with
//! `--from-beginning`). After each round is printed, the position of every
//! partition that moved is committed (the offset after the last record
//! printed), and once more on exit.
//!
//! A commit refused because the group rebalanced (`stale_generation`,
//! `not_assigned`) makes it heartbeat for the new assignment and commit
//! again what it still holds; a member the group forgot (`unknown_member`,
//! `group_not_found`) joins again. Records printed but not committed
//! before a partition moved are printed again by its next owner:
//! at-least-once.
//!
//! Without `--follow` it stops once its partitions are caught up (or
//! `--max`); with it, it long-polls for 1 s at a time, so that it notices
//! rebalances and signals. SIGINT and SIGTERM finish the current round,
//! commit and leave the group (a second signal exits at once, code 1).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::ClientError;
use es_protocol::requests::fetch::Fetch;
use es_protocol::{Request, Response};

use crate::args::{ConsumeArgs, Global};
use crate::consume::{fetch_bytes, stuck, unexpected};
use crate::error::{code, group_error, CliError, Result};
use crate::heartbeat::{Heartbeats, News};
use crate::limits::{FETCH_RECORDS_MAX, GROUP_FOLLOW_WAIT_MS};
use crate::member::{is_lost, is_rebalanced, Assignment, Member};
use crate::output::note;
use crate::printer::Printer;
use crate::session::Session;

/// Where the group member stands in one of its partitions.
#[derive(Clone, Debug, PartialEq)]
struct Cursor {
    /// The next offset to print.
    offset: u64,
    /// What the group has committed for it, as far as this member knows.
    committed: Option<u64>,
    /// Read up to the high watermark (without `--follow`, done with it).
    caught_up: bool,
}

pub fn run(global: &Global, args: ConsumeArgs, group: String) -> Result<()> {
    let mut printer = Printer::new(global.json, args.print_key, args.max);
    if printer.done() {
        return Ok(());
    }
    let session = Session::open(global, false)?;
    session.describe(&args.topic)?;
    let stop = on_signals()?;
    // The member talks to the group coordinator (in a cluster the
    // controller leader's node).
    let (coordinator, _) = session
        .coordinator()
        .map_err(|(addr, e)| group_error(&addr, &group, &args.topic, e))?;
    let member = Member::new(coordinator, &group, &args.topic, args.session_timeout_ms);
    let first = member
        .join()
        .map_err(|e| group_error(&session.addr, &group, &args.topic, e))?;
    let every = Duration::from_millis((args.session_timeout_ms / 3).max(1));
    let heartbeats = Heartbeats::start(member.clone(), first.member_id.clone(), every)
        .map_err(|e| CliError::new(code::INTERNAL, format!("cannot start the heartbeat thread: {e}")))?;
    let mut consumer = GroupConsumer {
        session: &session,
        group: &group,
        topic: &args.topic,
        member,
        heartbeats,
        assignment: first.clone(),
        cursors: BTreeMap::new(),
        from_beginning: args.from_beginning,
        started_uncommitted: 0,
    };
    let result = consumer
        .apply(first, false)
        .and_then(|()| consumer.consume(&mut printer, &stop, args.follow));
    let finished = consumer.finish();
    result?;
    finished?;
    if printer.printed() == 0 && !args.follow {
        consumer.explain_nothing();
    }
    Ok(())
}

/// SIGINT and SIGTERM set the returned flag; a second one exits at once.
fn on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .map_err(|e| CliError::new(code::INTERNAL, format!("cannot handle signal {signal}: {e}")))?;
    }
    Ok(stop)
}

struct GroupConsumer<'a> {
    session: &'a Session,
    group: &'a str,
    topic: &'a str,
    member: Member,
    heartbeats: Heartbeats,
    assignment: Assignment,
    /// One per assigned partition.
    cursors: BTreeMap<u32, Cursor>,
    from_beginning: bool,
    /// Partitions that started where the group had no commit.
    started_uncommitted: usize,
}

impl GroupConsumer<'_> {
    fn error(&self, e: ClientError) -> CliError {
        group_error(&self.session.addr, self.group, self.topic, e)
    }

    /// Takes `a` as the assignment: partitions no longer held are dropped,
    /// new ones start at the group's commit (or the high watermark, or the
    /// log start). `fresh`: after joining again, every partition is new.
    fn apply(&mut self, a: Assignment, fresh: bool) -> Result<()> {
        if fresh {
            self.cursors.clear();
        }
        self.cursors.retain(|p, _| a.partitions.contains(p));
        let new: Vec<u32> = a
            .partitions
            .iter()
            .copied()
            .filter(|p| !self.cursors.contains_key(p))
            .collect();
        self.assignment = a;
        if new.is_empty() {
            return Ok(());
        }
        let committed = self.member.committed().map_err(|e| self.error(e))?;
        let info = if new.iter().all(|p| committed.contains_key(p)) {
            None
        } else {
            Some(self.session.describe(self.topic)?.1)
        };
        for p in new {
            let cursor = match (committed.get(&p), &info) {
                (Some(&c), _) => Cursor {
                    offset: c,
                    committed: Some(c),
                    caught_up: false,
                },
                (None, Some(info)) => {
                    let part = info.partition(p).ok_or_else(|| info.no_partition(p))?;
                    self.started_uncommitted += 1;
                    Cursor {
                        offset: if self.from_beginning {
                            part.log_start_offset
                        } else {
                            part.high_watermark
                        },
                        committed: None,
                        caught_up: false,
                    }
                }
                (None, None) => continue,
            };
            self.cursors.insert(p, cursor);
        }
        Ok(())
    }

    /// Joins again after the group forgot this member; its partitions
    /// start over from the group's commits.
    fn rejoin(&mut self) -> Result<()> {
        note(&format!(
            "es: group {:?} no longer knew this member (its session timed out, or the broker restarted); joining again",
            self.group
        ));
        let a = self.member.join().map_err(|e| self.error(e))?;
        self.heartbeats.set_member(&a.member_id);
        self.apply(a, true)
    }

    /// Acts on what the heartbeat thread learned.
    fn take_news(&mut self) -> Result<()> {
        match self.heartbeats.take() {
            None => Ok(()),
            Some(News::Assignment(a)) => {
                if a.member_id == self.assignment.member_id && a.generation > self.assignment.generation {
                    self.apply(a, false)?;
                }
                Ok(())
            }
            Some(News::Lost) => self.rejoin(),
            Some(News::Failed(e)) => Err(self.error(e)),
        }
    }

    /// Heartbeats now, for the current assignment. `may_rejoin`: join again
    /// if the group forgot this member (otherwise that is an error).
    fn refresh(&mut self, may_rejoin: bool) -> Result<()> {
        match self.member.heartbeat(&self.assignment.member_id) {
            Ok(a) => {
                if a.generation != self.assignment.generation || a.partitions != self.assignment.partitions {
                    self.apply(a, false)?;
                }
                Ok(())
            }
            Err(e) if is_lost(&e) && may_rejoin => self.rejoin(),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Rounds until caught up (or `--max`, or a signal); with `follow`
    /// until `--max` or a signal.
    fn consume(&mut self, printer: &mut Printer, stop: &AtomicBool, follow: bool) -> Result<()> {
        while !stop.load(Ordering::Relaxed) {
            self.take_news()?;
            if !self.round(printer, follow)? {
                break;
            }
        }
        Ok(())
    }

    /// One fetch per partition, printed in partition order, then a
    /// commit. False when there is nothing more to do.
    fn round(&mut self, printer: &mut Printer, follow: bool) -> Result<bool> {
        let targets: Vec<(u32, u64)> = self
            .cursors
            .iter()
            .filter(|(_, c)| follow || !c.caught_up)
            .map(|(p, c)| (*p, c.offset))
            .collect();
        if targets.is_empty() {
            if follow {
                // No partitions (more members than partitions): wait for a rebalance.
                std::thread::sleep(Duration::from_millis(u64::from(GROUP_FOLLOW_WAIT_MS)));
            }
            return Ok(follow);
        }
        // A heartbeat goes with every round, so that a rebalance is
        // noticed after one round (at most about a second with --follow),
        // not only by the heartbeat thread.
        let heartbeat = self
            .session
            .client
            .send(&self.member.heartbeat_request(&self.assignment.member_id))
            .map_err(|e| self.error(e))?;
        let max_records = printer.wanted(FETCH_RECORDS_MAX).clamp(1, FETCH_RECORDS_MAX) as u32;
        let max_bytes = fetch_bytes(targets.len());
        let mut pending = Vec::with_capacity(targets.len());
        for &(partition, offset) in &targets {
            let fetch = Fetch {
                topic: self.topic.to_string(),
                partition,
                offset: Some(offset),
                max_records,
                max_bytes,
                wait_ms: if follow { GROUP_FOLLOW_WAIT_MS } else { 0 },
            };
            let sent = self.session.client.send(&Request::Fetch(fetch));
            pending.push((partition, sent.map_err(|e| self.error(e))?));
        }
        for (partition, p) in pending {
            let ok = match p.wait() {
                Ok(Response::FetchOk(ok)) => ok,
                Ok(other) => return Err(unexpected(&other)),
                Err(e) if e.code() == Some("offset_out_of_range") => {
                    self.out_of_range(partition)?;
                    continue;
                }
                Err(e) => return Err(self.error(e)),
            };
            if !follow && ok.is_empty() && ok.next_offset < ok.high_watermark {
                return Err(stuck(partition, &ok));
            }
            let records: Vec<_> = ok.records().collect();
            let before = printer.printed();
            printer.print(partition, records.iter().copied())?;
            let printed = usize::try_from(printer.printed() - before).unwrap_or(usize::MAX);
            if let Some(c) = self.cursors.get_mut(&partition) {
                if printed >= records.len() {
                    c.offset = ok.next_offset;
                    c.caught_up = ok.next_offset >= ok.high_watermark;
                } else if let Some(last) = printed.checked_sub(1).and_then(|i| records.get(i)) {
                    c.offset = last.offset + 1;
                }
            }
            if printer.done() {
                break;
            }
        }
        match self.member.heartbeat_answer(heartbeat.wait()) {
            Ok(a) if a.generation > self.assignment.generation => self.apply(a, false)?,
            Ok(_) => {}
            Err(e) if is_lost(&e) => self.rejoin()?,
            Err(e) => return Err(self.error(e)),
        }
        self.commit(true)?;
        Ok(!printer.done())
    }

    /// The group's offset for `partition` is no longer in the log
    /// (retention removed it, or the topic was recreated): continue at the
    /// nearest end, and say so.
    fn out_of_range(&mut self, partition: u32) -> Result<()> {
        let (_, info) = self.session.describe(self.topic)?;
        let part = info
            .partition(partition)
            .ok_or_else(|| info.no_partition(partition))?;
        if let Some(c) = self.cursors.get_mut(&partition) {
            let to = c.offset.clamp(part.log_start_offset, part.high_watermark);
            note(&format!(
                "es: partition {partition}: offset {} is outside the log ({} to {}); continuing at {to}",
                c.offset, part.log_start_offset, part.high_watermark
            ));
            c.offset = to;
            c.caught_up = false;
        }
        Ok(())
    }

    /// Commits every partition whose position moved (or was never
    /// committed). A refusal because of a rebalance makes it learn the new
    /// assignment and commit again what it still holds.
    fn commit(&mut self, may_rejoin: bool) -> Result<()> {
        for attempt in 0..2 {
            let dirty: Vec<(u32, u64)> = self
                .cursors
                .iter()
                .filter(|(_, c)| c.committed != Some(c.offset))
                .map(|(p, c)| (*p, c.offset))
                .collect();
            if dirty.is_empty() {
                return Ok(());
            }
            match self.member.commit(&self.assignment, &dirty) {
                Ok(()) => {
                    for (p, offset) in dirty {
                        if let Some(c) = self.cursors.get_mut(&p) {
                            c.committed = Some(offset);
                        }
                    }
                    return Ok(());
                }
                Err(e) if is_rebalanced(&e) && attempt == 0 => self.refresh(may_rejoin)?,
                // Still moving: the next round commits.
                Err(e) if is_rebalanced(&e) => return Ok(()),
                Err(e) if is_lost(&e) && may_rejoin => return self.rejoin(),
                Err(e) if is_lost(&e) => {
                    note(&format!(
                        "es: group {:?} no longer knows this member, so its last positions were not committed; \
                         the group will read those records again",
                        self.group
                    ));
                    return Ok(());
                }
                Err(e) => return Err(self.error(e)),
            }
        }
        Ok(())
    }

    /// On exit: commits once more, stops heartbeating and leaves the
    /// group, so that its partitions go to the other members at once.
    fn finish(&mut self) -> Result<()> {
        let committed = self.commit(false);
        self.heartbeats.stop();
        let left = match self.member.leave(&self.assignment.member_id) {
            Err(e) if !is_lost(&e) => Err(self.error(e)),
            _ => Ok(()),
        };
        committed.and(left)
    }

    /// Nothing was printed: why.
    fn explain_nothing(&self) {
        let (group, topic) = (self.group, self.topic);
        if self.cursors.is_empty() {
            note(&format!(
                "group {group:?} assigned no partition of {topic} to this member: the other members hold them all \
                 (es group describe {group})."
            ));
        } else if self.started_uncommitted > 0 && !self.from_beginning {
            note(&format!(
                "no new records in {topic} for group {group:?}: partitions the group had not committed start at \
                 the high watermark. Add --from-beginning to read what is stored."
            ));
        } else {
            note(&format!(
                "group {group:?} has consumed everything in {topic} (es group describe {group})."
            ));
        }
    }
}
