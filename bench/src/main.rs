//! es-bench: the benchmark harness. `produce`, `consume` and `e2e` load a
//! broker over the binary protocol (one it starts itself with
//! `--start-broker`, or a running one); `disk` runs the same write pattern
//! straight to files with fdatasync, the limit the broker is compared with;
//! `soak` repeats ordinary requests and reads the broker's memory per
//! operation (soak.rs).
//! docs/benchmarks.md says how to run it and what each figure means.

mod args;
mod batch;
mod broker;
mod compare;
mod connect;
mod consume;
mod consumer;
mod counters;
mod disk;
mod e2e;
mod fetcher;
mod footprint;
mod http;
mod interrupt;
mod latency;
mod payload;
mod phase;
mod pipeline;
mod plan;
mod process;
mod produce;
mod producer;
mod progress;
mod report;
mod rounds;
mod scratch;
mod soak;
mod soak_report;
mod topic;
mod trend;
mod window;
mod workload;

use clap::Parser;

fn main() {
    es_protocol::client::keep_large_buffers();
    let cli = args::Cli::parse();
    if let Some(key) = cli.api_key {
        connect::set_api_key(key);
    }
    let (mode, opts) = match cli.command {
        args::Command::Soak(soak) => std::process::exit(soak::main(&soak)),
        other => other.split(),
    };
    if let Err(e) = opts.validate(mode) {
        eprintln!("es-bench: {e}");
        std::process::exit(2);
    }
    interrupt::install();
    let phases = match plan::execute(mode, &opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("es-bench: {e}");
            std::process::exit(1);
        }
    };
    if opts.json {
        println!("{}", report::json(mode, &opts, &phases));
    } else {
        print!("{}", report::table(mode, &opts, &phases));
    }
    if interrupt::requested() {
        eprintln!("es-bench: interrupted; the figures cover what ran");
        std::process::exit(130);
    }
}
