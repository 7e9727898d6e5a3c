//! The metrics storage emits through the `metrics` facade, each with its
//! kind, labels and help text: the broker describes them to its exporter
//! (so every one has a `# HELP` line) and docs/api.md lists them.

use metrics::{KeyName, SharedString, Unit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    /// The Prometheus `# TYPE` word.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One metric: what a dashboard needs to know of it.
#[derive(Debug, Clone, Copy)]
pub struct MetricHelp {
    pub name: &'static str,
    pub kind: MetricKind,
    pub unit: Option<Unit>,
    pub labels: &'static [&'static str],
    /// The values of its one label when they are a fixed set: each series
    /// is registered at start, so it reads 0 rather than missing.
    pub label_values: &'static [&'static str],
    pub help: &'static str,
}

impl MetricHelp {
    /// Gives the installed recorder this metric's help text and unit.
    pub fn describe(&self) {
        let (name, help) = (
            KeyName::from_const_str(self.name),
            SharedString::const_str(self.help),
        );
        metrics::with_recorder(|r| match self.kind {
            MetricKind::Counter => r.describe_counter(name, self.unit, help),
            MetricKind::Gauge => r.describe_gauge(name, self.unit, help),
            MetricKind::Histogram => r.describe_histogram(name, self.unit, help),
        });
    }

    /// Registers its series that exist from the start: the one series of an
    /// unlabelled metric, one per value of a fixed-valued label.
    pub fn register(&self) {
        let register = |labels: Vec<(&'static str, &'static str)>| {
            let labels: Vec<metrics::Label> = labels
                .into_iter()
                .map(|(k, v)| metrics::Label::new(k, v))
                .collect();
            let key = metrics::Key::from_parts(self.name, labels);
            let meta = metrics::Metadata::new(module_path!(), metrics::Level::INFO, None);
            metrics::with_recorder(|r| match self.kind {
                MetricKind::Counter => drop(r.register_counter(&key, &meta)),
                MetricKind::Gauge => drop(r.register_gauge(&key, &meta)),
                MetricKind::Histogram => drop(r.register_histogram(&key, &meta)),
            });
        };
        match (self.labels, self.label_values) {
            ([], _) => register(Vec::new()),
            ([label], values) => values.iter().for_each(|v| register(vec![(*label, *v)])),
            _ => {}
        }
    }
}

/// Every metric storage emits.
pub const STORAGE_METRICS: &[MetricHelp] = &[
    MetricHelp {
        name: "es_executor_kicks_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &[],
        label_values: &[],
        help: "Shard executors woken with a signal because they left their nudges unanswered (a lost wake-up; docs/design/lost-wakeup.md).",
    },
    MetricHelp {
        name: "es_fsync_rounds_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &[],
        label_values: &[],
        help: "Group-commit fsyncs run, one per partition sync.",
    },
    MetricHelp {
        name: "es_fsync_duration_seconds",
        kind: MetricKind::Histogram,
        unit: Some(Unit::Seconds),
        labels: &[],
        label_values: &[],
        help: "Wall time of one partition sync (fdatasync), in seconds.",
    },
    MetricHelp {
        name: "es_fsync_appends_per_round",
        kind: MetricKind::Histogram,
        unit: Some(Unit::Count),
        labels: &[],
        label_values: &[],
        help: "Appends one partition sync made durable.",
    },
    MetricHelp {
        name: "es_segment_write_duration_seconds",
        kind: MetricKind::Histogram,
        unit: Some(Unit::Seconds),
        labels: &[],
        label_values: &[],
        help: "Wall time of one segment write before its fsync, in seconds (for a batch written early, including the wait for its early writes).",
    },
    MetricHelp {
        name: "es_disk_thread_wait_seconds",
        kind: MetricKind::Histogram,
        unit: Some(Unit::Seconds),
        labels: &[],
        label_values: &[],
        help: "Time a disk-thread job (a segment write, an fsync, or both) waited for a thread to start it, in seconds.",
    },
    MetricHelp {
        name: "es_early_writes_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &["outcome"],
        label_values: &["placed", "void"],
        help: "Early writes of large batches: placed (written while arriving, not written again) or void (written whole, or not at all).",
    },
    MetricHelp {
        name: "es_descriptors_exhausted_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &["op"],
        label_values: &["append", "read", "accept", "file"],
        help: "Operations that found no file descriptor free (EMFILE/ENFILE) and failed with 503 (append, read), waited (accept), or failed (file: a broker file such as meta.json), changing nothing.",
    },
    MetricHelp {
        name: "es_paged_batch_writes_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &["outcome"],
        label_values: &["in_place", "copied"],
        help: "Large batches received into page-aligned memory: written in_place from it, or copied into a write buffer.",
    },
    MetricHelp {
        name: "es_log_write_errors_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &["kind"],
        label_values: &crate::log::write_failure::WriteFailure::LABELS,
        help: "Failed writes and fsyncs of partition logs, by kind: no_space and quota (the write is refused, the log goes back to its last complete write, writes go on) or fsync and io (the partition refuses writes until restart).",
    },
    MetricHelp {
        name: "es_storage_corruptions_total",
        kind: MetricKind::Counter,
        unit: None,
        labels: &["found"],
        label_values: &["recovery", "read"],
        help: "Corrupt data found on disk: at recovery (a bad batch with intact ones after it or in a sealed segment, a missing segment: quarantined with --accept-data-loss, else the start is refused), or by a read (answered corrupt_data; each place counted once).",
    },
];
