//! SIGHUP reloads api_keys.json (for keys added to a stopped broker's file
//! offline): the table read is published as it is, or, if it does not
//! parse, the one in force stays and the log says why. Its own thread and
//! its own signal registration, beside whatever else SIGHUP reloads.

use std::path::PathBuf;
use std::sync::Arc;

use crate::shard::state::BrokerState;

/// Starts the thread that reloads the key file on each SIGHUP.
pub fn on_sighup(state: Arc<BrokerState>, data_dir: PathBuf) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
        .map_err(|e| format!("installing the SIGHUP handler: {e}"))?;
    std::thread::Builder::new()
        .name("es-key-reload".into())
        .spawn(move || {
            for _ in signals.forever() {
                reload(&state, &data_dir);
            }
        })
        .map_err(|e| format!("starting the key reload thread: {e}"))?;
    Ok(())
}

/// Reads the key file again and publishes it.
pub fn reload(state: &BrokerState, data_dir: &std::path::Path) {
    // blocking-ok: the signal thread
    let _held = super::store::FILE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    match super::store::read_file(data_dir) {
        Ok(Some(mut table)) => {
            table.generation = state.keys.table().generation + 1;
            let n = table.keys.len();
            state.keys.publish(table);
            tracing::info!(keys = n, "SIGHUP: api_keys.json reloaded");
        }
        Ok(None) => tracing::warn!("SIGHUP: no api_keys.json; the keys in force stay"),
        Err(e) => tracing::error!("SIGHUP: {e}; the keys in force stay"),
    }
}
