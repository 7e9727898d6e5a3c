//! The final drain: every record of every partition of a node, read after
//! the faults are healed, with its log start and high watermark.

use std::collections::BTreeMap;
use std::time::Duration;

use es_protocol::requests::fetch::Fetch;
use es_protocol::{Request, Response};

use crate::binary::BinConn;
use crate::checker::{part_name, FinalLog, Log, Part};
use crate::node::Node;

/// How long one drain fetch may take (a hang guard).
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts of a fetch that failed, a second apart.
const ATTEMPTS_MAX: u32 = 30;

pub fn drain(node: &Node, parts: &[Part]) -> Result<FinalLog, String> {
    let mut bin = BinConn::new(&node.binary, "es-chaos-drain");
    let mut partitions = BTreeMap::new();
    for part in parts {
        let mut log = Log::default();
        let mut at: Option<u64> = None;
        let mut failures = 0;
        loop {
            let fetch = Fetch {
                topic: part.0.clone(),
                partition: part.1,
                offset: at,
                max_records: 10_000,
                max_bytes: 4 << 20,
                wait_ms: 0,
            };
            match bin.call(&Request::Fetch(fetch), FETCH_TIMEOUT) {
                Ok(Response::FetchOk(ok)) => {
                    if at.is_none() {
                        log.start = ok.start_offset;
                    }
                    log.high_watermark = ok.high_watermark;
                    for r in ok.records() {
                        log.records
                            .insert(r.offset, String::from_utf8_lossy(r.value).into_owned());
                    }
                    at = Some(ok.next_offset);
                    if ok.next_offset >= ok.high_watermark {
                        break;
                    }
                }
                other => {
                    failures += 1;
                    if failures >= ATTEMPTS_MAX {
                        return Err(format!(
                            "drain {} from node {}: {other:?}",
                            part_name(part),
                            node.id
                        ));
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        }
        partitions.insert(part_name(part), log);
    }
    Ok(FinalLog {
        node: node.id,
        partitions,
    })
}
