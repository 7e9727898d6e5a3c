//! openraft's storage conformance suite (`openraft::testing::Suite`), run
//! on a glommio executor against the in-memory store: the reference the
//! partition-log store is held to. Each case is a test of its own (the
//! suite's `test_all` builds a tokio runtime, which glommio code cannot
//! use), so a failure names its case. No case is excluded.

mod common;

use es_raft::mem_store::{MemLog, MemSm};
use es_raft::openraft::testing::{StoreBuilder, Suite};
use es_raft::{EsRaft, StorageResult};

struct Mem;

impl StoreBuilder<EsRaft, MemLog, MemSm, ()> for Mem {
    async fn build(&self) -> StorageResult<((), MemLog, MemSm)> {
        Ok(((), MemLog::default(), MemSm::default()))
    }
}

type S = Suite<EsRaft, MemLog, MemSm, Mem, ()>;

macro_rules! cases {
    ($($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            common::run_with_tokio_timer(async {
                let ((), log, sm) = Mem.build().await.unwrap();
                S::$case(log, sm).await.unwrap();
            });
        }
    )*};
}

cases!(
    last_membership_in_log_initial,
    last_membership_in_log,
    last_membership_in_log_multi_step,
    get_membership_initial,
    get_membership_from_log_and_empty_sm,
    get_membership_from_empty_log_and_sm,
    get_membership_from_log_le_sm_last_applied,
    get_membership_from_log_gt_sm_last_applied_1,
    get_membership_from_log_gt_sm_last_applied_2,
    get_initial_state_without_init,
    get_initial_state_membership_from_log_and_sm,
    get_initial_state_with_state,
    get_initial_state_last_log_gt_sm,
    get_initial_state_last_log_lt_sm,
    get_initial_state_log_ids,
    get_initial_state_re_apply_committed,
    save_vote,
    get_log_entries,
    limited_get_log_entries,
    try_get_log_entry,
    initial_logs,
    get_log_state,
    get_log_id,
    last_id_in_log,
    last_applied_state,
    purge_logs_upto_0,
    purge_logs_upto_5,
    purge_logs_upto_20,
    delete_logs_since_11,
    delete_logs_since_0,
    append_to_log,
    snapshot_meta,
    apply_single,
    apply_multiple,
);

#[test]
fn transfer_snapshot() {
    common::run_with_tokio_timer(async {
        S::transfer_snapshot(&Mem).await.unwrap();
    });
}
