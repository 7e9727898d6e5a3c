//! A binary connection over its key's quota (docs/security.md, "Quotas"):
//! until when it is not read, and the read loop's wait for that moment.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::FutureExt;

use super::end::{End, Interrupt};
use super::handler::Incoming;
use crate::auth::grants::{Operation, Resource};
use crate::auth::quota::Direction;
use crate::auth::Principal;
use crate::listen::watchdog::Activity;
use crate::shard::Shard;

/// A request as the read loop hands it to its task: the request, its id,
/// whether its frame was gzipped, and until when its answer waits (the
/// throttle its arrival charged).
pub struct Dispatched(pub Incoming, pub u64, pub bool, pub Option<Instant>);

/// Charges a whole produce batch to its key's produce quota as it
/// arrives, before it is appended (a request the key may not make is not
/// charged: it is refused), and mutes the connection for the throttle;
/// until when, if throttled.
pub fn charge_arrival(
    shard: &Shard,
    principal: &Principal,
    incoming: &Incoming,
    muted: &Muted,
) -> Option<Instant> {
    let (topic, bytes) = incoming.batch_bytes()?;
    if !principal.allows(Operation::Write, Resource::Topic, topic) {
        return None;
    }
    let throttle = shard.config.quotas().charge(principal, Direction::Produce, bytes);
    muted.extend(throttle)
}

/// Until when the connection is not read: its key went over a quota
/// (docs/security.md, "Quotas"). Set by the read loop and by request
/// tasks; on the connection's shard only.
#[derive(Default)]
pub struct Muted {
    until: Cell<Option<Instant>>,
}

impl Muted {
    /// Mutes the connection for `throttle` more from now, unless it
    /// already is for longer; until when, if `throttle` is not zero.
    pub fn extend(&self, throttle: Duration) -> Option<Instant> {
        if throttle.is_zero() {
            return None;
        }
        let until = Instant::now() + throttle;
        if self.until.get().is_none_or(|u| u < until) {
            self.until.set(Some(until));
        }
        Some(until)
    }
}

/// Waits until the connection is no longer muted, busy meanwhile (its
/// throttle is the broker's doing, not an idle client); or why the
/// connection ends first.
pub async fn wait_unmuted(
    muted: &Muted,
    shard: &Shard,
    activity: &Rc<Activity>,
    interrupt: &Interrupt,
) -> Result<(), End> {
    let Some(until) = muted.until.get() else {
        return Ok(());
    };
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        muted.until.set(None);
        return Ok(());
    }
    let _busy = activity.busy();
    let timer = glommio::timer::sleep(left).fuse();
    let stop = shard.shutdown.wait_for(1).fuse();
    let interrupted = interrupt.wait().fuse();
    futures::pin_mut!(timer, stop, interrupted);
    futures::select! {
        _ = timer => Ok(()),
        _ = stop => Err(End::Shutdown),
        end = interrupted => Err(end),
    }
}
