//! Where the `es-broker` binary is, for the tests of other packages (the
//! CLI's and es-bench's include this file by path; the broker's own tests
//! use `env!("CARGO_BIN_EXE_es-broker")`).
//!
//! No test builds anything: `cargo test --workspace` (`make test`) builds
//! `es-broker` beside every test executable, in `target/<profile>/`, with
//! the features of the same build. `ES_BROKER_BIN` names another binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The variable that names another `es-broker` binary.
pub const BROKER_BIN_ENV: &str = "ES_BROKER_BIN";

/// `$ES_BROKER_BIN` if set, else `target/<profile>/es-broker` beside this
/// test executable (`target/<profile>/deps/<test>-<hash>`). Panics, saying
/// how to build it, when it is not there.
pub fn broker_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os(BROKER_BIN_ENV) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "{BROKER_BIN_ENV}={} is not a file", bin.display());
        return bin;
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} is not in target/<profile>/deps", exe.display()));
    let bin = profile_dir.join("es-broker");
    if !bin.is_file() {
        let release = if profile_dir.file_name().is_some_and(|n| n == "release") {
            " --release"
        } else {
            ""
        };
        panic!(
            "{} is missing: these tests run the es-broker binary that `cargo test --workspace` \
             builds beside them. Run them with `cargo test{release} --workspace`, or build it \
             first with `cargo build{release} -p es-broker` (or set {BROKER_BIN_ENV}).",
            bin.display()
        );
    }
    bin
}
