//! What es-bench's tests share: running es-bench and reading its `--json`
//! answer.

use std::process::Command;

use serde_json::Value;

/// Runs `cmd` (an es-bench command line with `--json`), asserts that it
/// succeeded and returns its JSON; `what` names it in failures, with
/// es-bench's stderr or stdout.
pub fn json_of(cmd: &mut Command, what: &str) -> Value {
    let out = cmd.output().expect("run es-bench");
    assert!(
        out.status.success(),
        "es-bench {what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "es-bench {what}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
