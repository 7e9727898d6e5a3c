//! Logging: `ES_LOG` picks what is logged, `--log-format` how; lines go to
//! stderr from a writer thread, so a shard that logs never blocks on the
//! terminal or a slow log collector.

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::limits::LOG_LINES_BUFFERED_MAX;
use crate::operate::config::LogFormat;

/// The default when `ES_LOG` is unset or empty.
const DEFAULT_DIRECTIVES: &str = "info";

/// Targets whose log lines a directive can name: es's own crates and the
/// libraries under them that log.
const KNOWN_TARGETS: &[&str] = &[
    "es_broker",
    "es_storage",
    "es_protocol",
    "glommio",
    "hyper",
    "metrics_exporter_prometheus",
];

/// Level names a bare directive may be.
const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// Installs the global subscriber. `directives` is `ES_LOG`'s value. Returns
/// the guard that flushes buffered lines when dropped (hold it until exit)
/// and warnings to log once logging runs; `Err` when `ES_LOG` cannot be
/// parsed.
pub fn init(format: LogFormat, directives: Option<&str>) -> Result<(WorkerGuard, Vec<String>), String> {
    let directives = directives
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .unwrap_or(DEFAULT_DIRECTIVES);
    let filter = EnvFilter::try_new(directives).map_err(|e| format!("ES_LOG={directives}: {e}"))?;
    let warnings = unmatched(directives)
        .into_iter()
        .map(|target| {
            format!(
                "ES_LOG names `{target}`, which matches no log target (targets: {}; levels: {})",
                KNOWN_TARGETS.join(", "),
                LEVELS.join(", ")
            )
        })
        .collect();
    let (writer, guard) = NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_LINES_BUFFERED_MAX)
        .lossy(true)
        .thread_name("es-log")
        .finish(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_ansi(false)
            .init(),
    }
    Ok((guard, warnings))
}

/// Writes one line at `level` to stderr in `format`, whatever `ES_LOG`
/// lets through: a warning about `ES_LOG` itself, or the error that stops
/// the broker (which must be seen even with `ES_LOG=off`). Main thread only.
pub fn unfiltered(format: LogFormat, level: tracing::Level, message: &str) {
    match format {
        LogFormat::Text => eprintln!("{level} es_broker: {message}"),
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": humantime_now(),
                "level": level.as_str(),
                "target": "es_broker",
                "message": message,
            })
        ),
    }
}

/// The current UTC time as RFC 3339 with microseconds, like the JSON
/// formatter's `timestamp`.
fn humantime_now() -> String {
    use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
    let mut out = String::new();
    let _ = SystemTime.format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut out));
    out
}

/// Targets named by `directives` that match none of `KNOWN_TARGETS` (a
/// typo such as `ES_LOG=debu` parses as a target and silently logs
/// nothing).
fn unmatched(directives: &str) -> Vec<String> {
    directives
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter_map(|directive| {
            let target = directive.split(['=', '[']).next().unwrap_or("").trim();
            let bare = !directive.contains(['=', '[']);
            if target.is_empty() || (bare && LEVELS.contains(&target.to_ascii_lowercase().as_str())) {
                return None;
            }
            let root = target.split("::").next().unwrap_or(target);
            (!KNOWN_TARGETS.contains(&root)).then(|| target.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_found_and_real_targets_are_not() {
        assert!(unmatched("info").is_empty());
        assert!(unmatched("DEBUG").is_empty());
        assert!(unmatched("es_storage=debug,info").is_empty());
        assert!(unmatched("es_broker::binary=trace").is_empty());
        assert!(unmatched("glommio=warn, hyper=off").is_empty());
        assert!(
            unmatched("[request]=debug").is_empty(),
            "a span filter names no target"
        );
        assert_eq!(unmatched("debu"), vec!["debu"]);
        assert_eq!(unmatched("info,es-storage=debug"), vec!["es-storage"]);
        assert_eq!(unmatched("storage=debug"), vec!["storage"]);
    }
}
