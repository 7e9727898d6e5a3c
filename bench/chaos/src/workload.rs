//! The workload: the topics it writes, what its threads share, and their
//! start and stop. Threads: plain producers over HTTP (`w0`, `w1`) and the
//! binary protocol (`w2`), idempotent producers over the binary protocol
//! (`w3`, `w4`), two members of one consumer group committing every second
//! (`c0`, `c1`), and assign-mode readers tailing every partition (`r<i>`,
//! one per partition up to six).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use crate::checker::Part;
use crate::history::Recorder;
use crate::http::HttpConn;
use crate::observed::Observed;
use crate::outcome::Outcome;
use crate::producer::Via;
use crate::{consumer, producer, reader};

/// The topics, each with `--partitions` partitions: `chaos` keeps the
/// default segment size; `chaos-roll` rolls a segment every 16 KiB, so
/// recovery meets many segments.
pub const TOPICS: [(&str, Option<u64>); 2] = [("chaos", None), ("chaos-roll", Some(16384))];
/// Most assign-mode reader threads; past this, each tails several
/// partitions.
const READERS_MAX: usize = 6;
/// The consumer group of `c0` and `c1`.
pub const GROUP: &str = "chaos-group";

/// The addresses of the node the workload talks to.
#[derive(Clone, Debug)]
pub struct Target {
    pub node: u32,
    pub http: String,
    pub binary: String,
}

/// What every workload thread shares.
pub struct Ctx {
    pub rec: Arc<Recorder>,
    pub observed: Arc<Observed>,
    pub stop: AtomicBool,
    pub target: Target,
    pub parts: Vec<Part>,
    pub seed: u64,
}

impl Ctx {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn topics(&self) -> Vec<String> {
        TOPICS.iter().map(|(t, _)| t.to_string()).collect()
    }

    /// Sleeps `ms`, in short steps so a stop is seen soon.
    pub fn nap(&self, ms: u64) {
        let mut left = ms;
        while left > 0 && !self.stopped() {
            let step = left.min(50);
            std::thread::sleep(Duration::from_millis(step));
            left -= step;
        }
    }
}

/// Every partition of [`TOPICS`], `per_topic` each.
pub fn partitions(per_topic: u32) -> Vec<Part> {
    TOPICS
        .iter()
        .flat_map(|(t, _)| (0..per_topic).map(move |p| (t.to_string(), p)))
        .collect()
}

/// Creates [`TOPICS`] with `partitions` partitions each on the broker at
/// `http`.
pub fn create_topics(http: &str, partitions: u32) -> Result<(), String> {
    let mut conn = HttpConn::new(http);
    for (name, segment_bytes) in TOPICS {
        let mut body = json!({"name": name, "partitions": partitions});
        if let Some(bytes) = segment_bytes {
            body["config"] = json!({"segment_bytes": bytes});
        }
        match conn.call("POST", "/v1/topics", Some(&body), Duration::from_secs(30)) {
            Ok(_) | Err(Outcome::Refused(_)) if topic_exists(&mut conn, name) => {}
            Ok(_) => {}
            Err(e) => return Err(format!("create topic {name}: {}", e.why())),
        }
    }
    Ok(())
}

fn topic_exists(conn: &mut HttpConn, name: &str) -> bool {
    conn.call(
        "GET",
        &format!("/v1/topics/{name}"),
        None,
        Duration::from_secs(30),
    )
    .is_ok()
}

pub struct Workload {
    ctx: Arc<Ctx>,
    threads: Vec<JoinHandle<()>>,
}

impl Workload {
    pub fn start(ctx: Arc<Ctx>) -> Result<Workload, String> {
        let mut threads = Vec::new();
        let mut spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<(), String> {
            let h = std::thread::Builder::new()
                .name(name.clone())
                .spawn(f)
                .map_err(|e| format!("thread {name}: {e}"))?;
            threads.push(h);
            Ok(())
        };
        for (i, via) in [
            Via::Http,
            Via::Http,
            Via::Binary,
            Via::Idempotent,
            Via::Idempotent,
        ]
        .into_iter()
        .enumerate()
        {
            let c = ctx.clone();
            spawn(
                format!("w{i}"),
                Box::new(move || producer::run(&c, i as u32, via)),
            )?;
        }
        for i in 0..2 {
            let c = ctx.clone();
            spawn(format!("c{i}"), Box::new(move || consumer::run(&c, i)))?;
        }
        let readers = ctx.parts.len().min(READERS_MAX);
        for i in 0..readers {
            let c = ctx.clone();
            let parts: Vec<Part> = ctx.parts.iter().skip(i).step_by(readers).cloned().collect();
            spawn(
                format!("r{i}"),
                Box::new(move || reader::run(&c, i as u32, &parts)),
            )?;
        }
        Ok(Workload { ctx, threads })
    }

    /// Stops every thread once its operation in flight has ended.
    pub fn stop(self) {
        self.ctx.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}
