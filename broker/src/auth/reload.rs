//! SIGHUP reloads api_keys.json (for keys added to a stopped broker's file
//! offline): one of the reload steps of the signal thread
//! (operate/signals.rs). The table read is published as it is, or, if it
//! does not parse, the one in force stays and the log says why.

use crate::shard::state::BrokerState;

/// Reads the key file again and publishes it: what was loaded, or why the
/// keys in force stay.
pub fn reload(state: &BrokerState, data_dir: &std::path::Path) -> Result<String, String> {
    // blocking-ok: the signal thread
    let _held = super::store::FILE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    match super::store::read_file(data_dir) {
        Ok(Some(mut table)) => {
            table.generation = state.keys.table().generation + 1;
            let n = table.keys.len();
            state.keys.publish(table);
            Ok(format!("api_keys.json reloaded: {n} keys"))
        }
        Ok(None) => Err("no api_keys.json; the keys in force stay".to_string()),
        Err(e) => Err(format!("{e}; the keys in force stay")),
    }
}
