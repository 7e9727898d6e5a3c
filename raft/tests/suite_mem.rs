//! openraft's storage conformance suite (`openraft::testing::Suite`, every
//! case: common/suite.rs) against the in-memory store: the reference the
//! partition-log store is held to.

mod common;

use es_raft::mem_store::{MemLog, MemSm};
use es_raft::openraft::testing::StoreBuilder;
use es_raft::{EsRaft, StorageResult};

struct Mem;

impl StoreBuilder<EsRaft, MemLog, MemSm, ()> for Mem {
    async fn build(&self) -> StorageResult<((), MemLog, MemSm)> {
        Ok(((), MemLog::default(), MemSm::default()))
    }
}

storage_suite!(Mem: MemLog, MemSm, ());
