//! Compatibility levels and modes, as Confluent names them.

use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorCode};

/// A compatibility level (docs/registry.md, "Compatibility").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Level {
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
    None,
}

impl Level {
    pub const ALL: [Level; 7] = [
        Level::Backward,
        Level::BackwardTransitive,
        Level::Forward,
        Level::ForwardTransitive,
        Level::Full,
        Level::FullTransitive,
        Level::None,
    ];

    /// The level of a registry that was never configured.
    pub const DEFAULT: Level = Level::Backward;

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Backward => "BACKWARD",
            Level::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Level::Forward => "FORWARD",
            Level::ForwardTransitive => "FORWARD_TRANSITIVE",
            Level::Full => "FULL",
            Level::FullTransitive => "FULL_TRANSITIVE",
            Level::None => "NONE",
        }
    }

    /// Parses a level as a client writes it; 42203 names the levels.
    pub fn parse(s: &str) -> Result<Level, ApiError> {
        Level::ALL.into_iter().find(|l| l.as_str() == s).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidCompatibilityLevel,
                format!(
                    "invalid compatibility level {s:?}: one of {}",
                    Level::ALL.map(Level::as_str).join(", ")
                ),
            )
        })
    }

    /// Whether the new schema is checked against every live version, not
    /// only the latest.
    pub fn transitive(self) -> bool {
        matches!(
            self,
            Level::BackwardTransitive | Level::ForwardTransitive | Level::FullTransitive
        )
    }

    /// Whether the new schema must read data written with the old ones.
    pub fn backward(self) -> bool {
        matches!(
            self,
            Level::Backward | Level::BackwardTransitive | Level::Full | Level::FullTransitive
        )
    }

    /// Whether the old schemas must read data written with the new one.
    pub fn forward(self) -> bool {
        matches!(
            self,
            Level::Forward | Level::ForwardTransitive | Level::Full | Level::FullTransitive
        )
    }
}

/// The registry's mode: whether it takes writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Mode {
    /// Reads and writes (the default).
    Readwrite,
    /// Reads only: registrations, deletes and config changes are refused
    /// with 42205.
    #[serde(rename = "READONLY")]
    ReadOnly,
    /// Registrations keep the ids and versions they name (`"id"`,
    /// `"version"` in the body), unchecked for compatibility: for
    /// migrating from another registry, whose ids are inside every
    /// record already written.
    Import,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Readwrite => "READWRITE",
            Mode::ReadOnly => "READONLY",
            Mode::Import => "IMPORT",
        }
    }

    pub fn parse(s: &str) -> Result<Mode, ApiError> {
        match s {
            "READWRITE" => Ok(Mode::Readwrite),
            "READONLY" => Ok(Mode::ReadOnly),
            "IMPORT" => Ok(Mode::Import),
            other => Err(ApiError::new(
                ErrorCode::InvalidMode,
                format!("invalid mode {other:?}: READWRITE, READONLY or IMPORT"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_say_what_they_check() {
        for l in Level::ALL {
            assert_eq!(Level::parse(l.as_str()).unwrap(), l);
            let json = serde_json::to_string(&l).unwrap();
            assert_eq!(json, format!("\"{}\"", l.as_str()));
        }
        let e = Level::parse("backward").unwrap_err();
        assert_eq!(e.code.confluent(), 42203);
        assert!(Level::Full.backward() && Level::Full.forward() && !Level::Full.transitive());
        assert!(!Level::None.backward() && !Level::None.forward());
        assert!(Level::ForwardTransitive.transitive() && !Level::ForwardTransitive.backward());
        assert_eq!(Mode::parse("IMPORT").unwrap(), Mode::Import);
        assert_eq!(Mode::parse("import").unwrap_err().code.confluent(), 42204);
        assert_eq!(serde_json::to_string(&Mode::ReadOnly).unwrap(), "\"READONLY\"");
    }
}
