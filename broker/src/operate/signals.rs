//! The signal thread: SIGTERM or SIGINT starts a graceful shutdown (a
//! second one exits at once); SIGHUP runs the reload steps, in order, each
//! logging what it loaded or why it kept what it had. A step reads files
//! and may block: it runs here, never on a shard.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::shard::state::BrokerState;

/// One thing SIGHUP reloads (the TLS certificate; API keys join later):
/// `run` says what it loaded, or why it failed and what stays in use.
pub struct Reload {
    pub what: &'static str,
    pub run: Box<dyn Fn() -> Result<String, String> + Send>,
}

/// Starts the signal thread.
pub fn spawn(state: Arc<BrokerState>, reloads: Vec<Reload>) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("installing signal handlers: {e}"))?;
    std::thread::Builder::new()
        .name("es-signals".into())
        .spawn(move || {
            let mut stops = 0;
            for sig in signals.forever() {
                if sig == SIGHUP {
                    reload(&reloads);
                    continue;
                }
                stops += 1;
                if stops == 1 {
                    tracing::info!(signal = sig, "shutting down: finishing in-flight requests");
                    state.shutting_down.store(true, Ordering::Release);
                } else {
                    // An operator who will not wait: stop now. Whatever was
                    // acknowledged is on disk; the next start recovers the
                    // partitions that were not closed.
                    eprintln!(
                        "es-broker: signal {sig} again: exiting now without closing partitions; the next start recovers them"
                    );
                    std::process::exit(1);
                }
            }
        })
        .map_err(|e| format!("starting the signal thread: {e}"))?;
    Ok(())
}

/// SIGHUP: every step, each whatever the others did.
fn reload(reloads: &[Reload]) {
    if reloads.is_empty() {
        tracing::info!("SIGHUP: nothing to reload (no --tls-cert)");
    }
    for step in reloads {
        match (step.run)() {
            Ok(loaded) => tracing::info!(reload = step.what, "SIGHUP: {loaded}"),
            Err(e) => tracing::warn!(reload = step.what, "SIGHUP: reload failed: {e}"),
        }
    }
}
