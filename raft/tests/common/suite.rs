//! openraft's storage conformance suite (`openraft::testing::Suite`) as
//! tests: the one list of its cases, for every store the crate has.

/// One `#[test]` per case of openraft's storage suite, plus
/// `transfer_snapshot`, against the store that `$builder` (a unit struct
/// implementing `StoreBuilder<EsRaft, $log, $sm, $guard>`) builds afresh
/// for each. Each case is a test of its own (the suite's `test_all` builds
/// a tokio runtime, which glommio code cannot use), so a failure names its
/// case; each runs on a glommio executor with tokio's timer at hand (the
/// suite sleeps with it). No case is excluded: the stores are held to the
/// same list.
#[macro_export]
macro_rules! storage_suite {
    ($builder:ident: $log:ty, $sm:ty, $guard:ty) => {
        type StorageSuite =
            es_raft::openraft::testing::Suite<es_raft::EsRaft, $log, $sm, $builder, $guard>;

        $crate::storage_suite!(@cases $builder;
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
            $crate::common::run_with_tokio_timer(async {
                StorageSuite::transfer_snapshot(&$builder).await.unwrap();
            });
        }
    };
    (@cases $builder:ident; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::common::run_with_tokio_timer(async {
                let (_guard, log, sm) =
                    es_raft::openraft::testing::StoreBuilder::build(&$builder).await.unwrap();
                StorageSuite::$case(log, sm).await.unwrap();
            });
        }
    )*};
}
