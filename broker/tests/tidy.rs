//! Tidy: the house rules that a compiler does not check, over every source
//! file of the workspace.
//!
//! - **No blocking on a shard**: in the crates whose code runs on a glommio
//!   executor (broker, storage, raft), no `std::fs`, `thread::sleep`,
//!   `block_on(` or std `Mutex`/`RwLock` outside tests, unless the line (or
//!   the comment line right above it) says why with `blocking-ok`: start-up
//!   before the executors run, a disk thread, a lock held for a few
//!   instructions. A blocking call stalls every partition on that core.
//! - **One sitting per file**: no source file over [`LINES_MAX`] lines,
//!   not counting its test module (a `#[cfg(test)] mod tests { .. }` at the
//!   end, or a test-only module in its own file) and not counting `tests/`.
//! - **Every `unsafe` says why**: each `unsafe` block, fn or impl has a
//!   `SAFETY:` comment (or a `# Safety` doc section) right above it or on
//!   its line.
//!
//! A vendored dependency (a `vendor/` directory: another project's code,
//! patched where es needs it) is not es's code and is left out.
//!
//! Each rule is a pure function over one file's text, so the unit tests at
//! the bottom plant a violation and see it reported.

use std::path::{Path, PathBuf};

/// Lines a source file may hold outside its tests.
const LINES_MAX: usize = 700;

/// Crates whose code runs on a shard.
const SHARD_CRATES: &[&str] = &["broker", "storage", "raft"];

/// Calls that block the thread that makes them.
const BLOCKING: &[&str] = &[
    "std::fs",
    "thread::sleep",
    "block_on(",
    "std::sync::Mutex",
    "std::sync::RwLock",
];

/// Where a blocking call says why it is allowed.
const BLOCKING_OK: &str = "blocking-ok";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("broker/ has a parent")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output, hidden dirs and
/// vendored dependencies.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && name != "vendor" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Whether `path` (relative to the workspace) is under a `tests/`,
/// `benches/` or `fuzz/` directory.
fn under_tests(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches" | "fuzz")))
}

/// Module files declared `#[cfg(test)] mod name;` by `path` (`text` is its
/// content): `name.rs` and `name/mod.rs` where the declaring file's modules live.
fn declared_test_modules(path: &Path, text: &str) -> Vec<PathBuf> {
    let dir = match path.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => path.parent().map(Path::to_path_buf),
        _ => path.with_extension("").into(),
    };
    let Some(dir) = dir else { return Vec::new() };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut out = Vec::new();
    for pair in lines.windows(2) {
        if pair[0] == "#[cfg(test)]" {
            let decl = pair[1]
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                out.push(dir.join(format!("{name}.rs")));
                out.push(dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// The file's lines before its inline test module (`#[cfg(test)]` then
/// `mod ... {`), which by convention ends the file.
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    for (i, pair) in lines.windows(2).enumerate() {
        let next = pair[1].trim();
        if pair[0].trim() == "#[cfg(test)]" && next.starts_with("mod ") && next.ends_with('{') {
            return lines[..i].to_vec();
        }
    }
    lines
}

/// The code of a line, without a trailing `//` comment.
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("//") || t.starts_with("#[") || t.starts_with("#![")
}

/// Blocking calls without a `blocking-ok` reason: `(line number, line)`.
fn blocking_calls(text: &str) -> Vec<(usize, String)> {
    let lines = code_lines(text);
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = code_of(line);
        let std_lock = code.contains("std::sync::{") && (code.contains("Mutex") || code.contains("RwLock"));
        if !std_lock && !BLOCKING.iter().any(|b| code.contains(b)) {
            continue;
        }
        let above = if i > 0 { lines[i - 1] } else { "" };
        let marked = line.contains(BLOCKING_OK) || (is_comment(above) && above.contains(BLOCKING_OK));
        if !marked {
            out.push((i + 1, line.trim().to_string()));
        }
    }
    out
}

/// Whether the code of `line` uses the `unsafe` keyword.
fn uses_unsafe(line: &str) -> bool {
    let code = code_of(line);
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find("unsafe") {
        let start = from + at;
        let end = start + "unsafe".len();
        let word = |i: usize| bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_';
        let before_ok = start == 0 || !word(start - 1);
        let after_ok = end == bytes.len() || !word(end);
        let quotes = code[..start]
            .match_indices('"')
            .filter(|(i, _)| *i == 0 || bytes[i - 1] != b'\\')
            .count();
        let in_string = quotes % 2 == 1;
        if before_ok && after_ok && !in_string {
            return true;
        }
        from = end;
    }
    false
}

/// `unsafe` blocks, fns and impls without a `SAFETY:` comment or `# Safety`
/// doc section on their line or in the comments and attributes right above.
fn unsafe_without_reason(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let says_why = |l: &str| l.contains("SAFETY:") || l.contains("# Safety");
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !uses_unsafe(line) || says_why(line) {
            continue;
        }
        let mut j = i;
        let mut found = false;
        while j > 0 && is_comment(lines[j - 1]) {
            j -= 1;
            if says_why(lines[j]) {
                found = true;
                break;
            }
        }
        if !found {
            out.push((i + 1, line.trim().to_string()));
        }
    }
    out
}

/// Every violation in the workspace, one line each.
fn violations(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for krate in ["broker", "storage", "protocol", "cli", "bench", "raft", "tools"] {
        rust_files(&root.join(krate), &mut files);
    }
    files.sort();
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .collect();
    let test_modules: Vec<PathBuf> = texts
        .iter()
        .flat_map(|(p, t)| declared_test_modules(p, t))
        .collect();
    let mut out = Vec::new();
    for (path, text) in &texts {
        let relative = path.strip_prefix(root).unwrap_or(path);
        let shown = relative.display().to_string();
        for (n, line) in unsafe_without_reason(text) {
            out.push(format!("{shown}:{n}: `unsafe` without a SAFETY: comment: {line}"));
        }
        if under_tests(relative) || test_modules.contains(path) {
            continue;
        }
        let lines = code_lines(text).len();
        if lines > LINES_MAX {
            out.push(format!(
                "{shown}: {lines} lines outside tests (at most {LINES_MAX}: split it by what it holds)"
            ));
        }
        let on_shard = SHARD_CRATES
            .iter()
            .any(|c| shown.starts_with(&format!("{c}/src/")));
        if on_shard {
            for (n, line) in blocking_calls(text) {
                out.push(format!(
                    "{shown}:{n}: blocking call on shard code without `// {BLOCKING_OK}: why`: {line}"
                ));
            }
        }
    }
    out
}

#[test]
fn the_workspace_is_tidy() {
    let found = violations(&workspace());
    assert!(
        found.is_empty(),
        "tidy found {} violation(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn a_blocking_call_needs_a_reason() {
    let bare = "fn f() {\n    std::thread::sleep(d);\n}\n";
    assert_eq!(
        blocking_calls(bare),
        vec![(2, "std::thread::sleep(d);".to_string())]
    );
    let marked_inline = "fn f() {\n    let x = std::fs::read(p); // blocking-ok: start-up\n}\n";
    assert!(blocking_calls(marked_inline).is_empty());
    let marked_above =
        "fn f() {\n    // blocking-ok: before the executors run\n    let m = std::sync::Mutex::new(0);\n}\n";
    assert!(blocking_calls(marked_above).is_empty());
    let grouped = "use std::sync::{Arc, Mutex};\n";
    assert_eq!(blocking_calls(grouped).len(), 1);
    let in_comment = "// std::fs is not used here\nfn f() {}\n";
    assert!(blocking_calls(in_comment).is_empty());
    let in_tests = "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { std::fs::read(p); }\n}\n";
    assert!(blocking_calls(in_tests).is_empty());
}

#[test]
fn a_long_file_is_measured_without_its_tests() {
    let long: String = "fn f() {}\n".repeat(LINES_MAX + 1);
    assert_eq!(code_lines(&long).len(), LINES_MAX + 1);
    let tests = format!(
        "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        "fn f() {}\n".repeat(10),
        "fn g() {}\n".repeat(LINES_MAX)
    );
    assert_eq!(code_lines(&tests).len(), 10);
    let decl = "#[cfg(test)]\nmod test_executor;\n";
    let found = declared_test_modules(Path::new("broker/src/main.rs"), decl);
    assert!(found.contains(&PathBuf::from("broker/src/test_executor.rs")));
    let found = declared_test_modules(Path::new("cli/src/idempotent.rs"), "#[cfg(test)]\nmod tests;\n");
    assert!(found.contains(&PathBuf::from("cli/src/idempotent/tests.rs")));
}

#[test]
fn an_unsafe_needs_a_safety_comment() {
    let bare = "fn f() {\n    let n = unsafe { g() };\n}\n";
    assert_eq!(unsafe_without_reason(bare).len(), 1);
    let said = "fn f() {\n    // SAFETY: g has no preconditions.\n    let n = unsafe { g() };\n}\n";
    assert!(unsafe_without_reason(said).is_empty());
    let doc =
        "/// Reads.\n///\n/// # Safety\n/// `p` is valid.\n#[inline]\npub unsafe fn f(p: *const u8) {}\n";
    assert!(unsafe_without_reason(doc).is_empty());
    let impl_bare = "struct S;\nunsafe impl Send for S {}\n";
    assert_eq!(unsafe_without_reason(impl_bare).len(), 1);
    let far = "// SAFETY: too far away\nfn f() {}\nunsafe impl Send for S {}\n";
    assert_eq!(unsafe_without_reason(far).len(), 1);
    let words = "fn f() { let unsafe_count = 1; let s = \"unsafe\"; } // unsafe\n";
    assert!(unsafe_without_reason(words).is_empty());
}
