//! Following the controller's applied state on shard 0: what the
//! reconciler (`reconciler.rs`) and the groups' offset hand-out
//! (`groups/cluster.rs`) wait on between two passes over it.

use std::time::Duration;

use es_raft::controller::watch;
use es_raft::controller::AppliedState;
use futures::FutureExt;

use crate::shard::Shard;

/// Waits until the next pass over the controller's state is due: the next
/// applied run of entries, or `retry` after a pass that left something
/// undone (`done` false). `false` when the broker stops or the controller
/// is gone: the follower ends.
pub async fn next_pass(
    shard: &Shard,
    rx: &mut watch::Receiver<AppliedState>,
    done: bool,
    retry: Duration,
) -> bool {
    let changed = rx.changed().fuse();
    let stopping = shard.shutdown.wait_for(1).fuse();
    let retry = async {
        if done {
            futures::future::pending::<()>().await
        } else {
            glommio::timer::sleep(retry).await
        }
    }
    .fuse();
    futures::pin_mut!(changed, stopping, retry);
    futures::select! {
        r = changed => r.is_ok(),
        _ = stopping => false,
        _ = retry => true,
    }
}
