//! Build script: the commit the broker is built from, for `es_build_info`.
//!
//! `ES_BUILD_COMMIT` (`cargo:rustc-env`) is, in order: the `ES_BUILD_COMMIT`
//! environment variable when set and not empty (a build from a source
//! tarball, or CI that knows better; letters, digits and `._-+` kept); `git rev-parse --short=12 HEAD` when
//! the source is a git checkout and git runs; else `unknown`. A build
//! without git, or outside a checkout, still succeeds.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=ES_BUILD_COMMIT");
    // A label value: only characters that need no escaping, and not many.
    let given = std::env::var("ES_BUILD_COMMIT").unwrap_or_default();
    let given: String = given
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._-+".contains(*c))
        .take(64)
        .collect();
    let commit = match given {
        c if !c.is_empty() => c,
        _ => git_commit().unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=ES_BUILD_COMMIT={commit}");
}

/// The short hash of HEAD, watching the files that change when HEAD moves.
fn git_commit() -> Option<String> {
    let git_dir = PathBuf::from(git(&["rev-parse", "--git-dir"])?);
    let common_dir = git(&["rev-parse", "--git-common-dir"])
        .map(PathBuf::from)
        .unwrap_or_else(|| git_dir.clone());
    watch_head(&git_dir, &common_dir);
    let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
    hash.chars().all(|c| c.is_ascii_hexdigit()).then_some(hash)
}

/// `rerun-if-changed` on HEAD, and on the branch it names: its loose ref
/// when there is one, and `packed-refs`. A branch with no loose ref yet
/// gets one on its next commit, so its directory is watched then (cargo
/// scans a watched directory for changes; a missing file would rerun this
/// script on every build).
fn watch_head(git_dir: &Path, common_dir: &Path) {
    let head = git_dir.join("HEAD");
    println!("cargo:rerun-if-changed={}", head.display());
    let Ok(text) = std::fs::read_to_string(&head) else {
        return;
    };
    let Some(reference) = text.trim().strip_prefix("ref: ") else {
        return; // a detached HEAD holds the hash itself
    };
    let loose = common_dir.join(reference);
    if loose.is_file() {
        println!("cargo:rerun-if-changed={}", loose.display());
    } else if let Some(dir) = loose.parent().filter(|d| d.is_dir()) {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let packed = common_dir.join("packed-refs");
    if packed.is_file() {
        println!("cargo:rerun-if-changed={}", packed.display());
    }
}

/// One line of git's output, run in this crate's directory; `None` when git
/// is missing, fails, or this is not a checkout.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git").args(args).current_dir(&dir).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let line = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if line.is_empty() {
        return None;
    }
    // --git-dir and --git-common-dir may be relative to where git ran.
    let path = Path::new(&line);
    if path.is_relative() && args.iter().any(|a| a.starts_with("--git")) {
        return Some(Path::new(&dir).join(path).display().to_string());
    }
    Some(line)
}
