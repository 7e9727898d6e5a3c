//! How a command ends: clean (exit 0), with problems found and reported
//! (exit 1), or failed: a usage error, an I/O error, a lock held (exit 2).

use std::fmt::Display;
use std::path::Path;
use std::process::ExitCode;

/// What a command found, when it ran to the end.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing wrong: exit 0.
    Clean,
    /// Problems found and reported (corruption, a failed verify): exit 1.
    Problems,
}

impl Outcome {
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Clean => ExitCode::SUCCESS,
            Outcome::Problems => ExitCode::from(1),
        }
    }
}

/// A command that could not run to the end: exit 2 with this message.
#[derive(Debug)]
pub struct Fail(pub String);

impl Fail {
    /// An I/O error on `path`.
    pub fn io(path: &Path, e: impl Display) -> Fail {
        Fail(format!("{}: {e}", path.display()))
    }
}

impl From<std::io::Error> for Fail {
    fn from(e: std::io::Error) -> Fail {
        Fail(e.to_string())
    }
}

/// The exit code of a command that failed.
pub const FAIL_EXIT: u8 = 2;
