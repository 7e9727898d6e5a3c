//! What went wrong, said so that the user knows what to do next. Every
//! error ends the command with exit code 1 and one message on stderr
//! (`es: ...`, or with `--json` the broker's error shape
//! `{"error":{"code":...,"message":...}}`); clap's own usage errors exit 2.
//!
//! Every error has a code: the broker's where the broker refused a
//! request, else one of the `code` constants below (docs/cli.md lists them).

use std::fmt;
use std::io;

use es_protocol::client::ClientError;
use serde_json::{json, Value};

/// The codes of errors found by `es` itself (the broker's own codes pass
/// through unchanged).
pub mod code {
    /// A flag's value, read after parsing, is wrong (`--broker`, say).
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    /// A line of stdin cannot be produced as it is.
    pub const INVALID_INPUT: &str = "invalid_input";
    /// No connection to the broker could be made.
    pub const BROKER_UNREACHABLE: &str = "broker_unreachable";
    /// The connection was lost during a command.
    pub const CONNECTION_LOST: &str = "connection_lost";
    /// The other end did not speak es's protocol, or answered out of turn.
    pub const PROTOCOL_ERROR: &str = "protocol_error";
    /// Writing stdout or reading stdin failed.
    pub const IO_ERROR: &str = "io_error";
    /// es could not start a thread or handle a signal.
    pub const INTERNAL: &str = "internal";
    /// The TLS handshake with the broker failed.
    pub const TLS_ERROR: &str = "tls_error";
    /// clap's usage errors (exit code 2).
    pub const USAGE: &str = "usage";
    /// `es cluster status` asked a broker that runs alone (no --peers).
    pub const STANDALONE: &str = "standalone";
}

#[derive(Debug)]
pub struct CliError {
    code: String,
    message: String,
    /// Stop without a message and with exit code 0: whoever read our
    /// output closed the pipe (`es consume t | head -3`).
    quiet: bool,
}

pub type Result<T> = std::result::Result<T, CliError>;

impl CliError {
    pub fn new(code: &str, message: impl Into<String>) -> CliError {
        CliError {
            code: code.to_string(),
            message: message.into(),
            quiet: false,
        }
    }

    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    /// The same error with more said after its message.
    pub fn and(self, more: &str) -> CliError {
        CliError {
            message: format!("{}{more}", self.message),
            ..self
        }
    }

    /// The error as `--json` prints it (the broker's error shape).
    pub fn to_json(&self) -> Value {
        error_json(&self.code, &self.message)
    }
}

/// `{"error":{"code":...,"message":...}}`, the broker's error shape.
pub fn error_json(code: &str, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message } })
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What to do about a key the broker does not take.
pub const AUTH_HINT: &str = "Set --api-key or ES_API_KEY to a valid key (esk_...); an admin makes one with \
     `es key create NAME --grant ...`, and `es key whoami` shows which key a command runs with.";

/// What to do about a key that lacks a grant (the message names the key,
/// the operation and the resource).
pub const FORBIDDEN_HINT: &str = " Ask an admin to grant it: `es key describe ID` shows the key's grants; \
     a new key with the grant: `es key create NAME --grant RESOURCE:PATTERN:NAME:OPS`.";

/// What to do about a group or producer id of another key.
pub const NOT_OWNER_HINT: &str = " It belongs to another key: use that key, or an admin's.";

const BROKER_HINT: &str = "Is es-broker running? Set --broker or ES_BROKER.";

/// A failure to connect or shake hands with the broker at `addr`.
pub fn connect_error(addr: &str, e: ClientError) -> CliError {
    match e {
        ClientError::Io(e) => CliError::new(
            code::BROKER_UNREACHABLE,
            format!(
                "cannot reach the broker at {addr}: {}. {BROKER_HINT}",
                io_reason(&e)
            ),
        ),
        ClientError::Broker { code, message, .. } if code == "unauthenticated" => CliError::new(
            &code,
            format!(
                "the broker at {addr} refused the API key: {message} ({code}). {}",
                AUTH_HINT
            ),
        ),
        ClientError::Broker { code, message, .. } => CliError::new(
            &code,
            format!("the broker at {addr} refused the connection: {message} ({code})"),
        ),
        ClientError::Protocol(m) if m.contains("resolves to no address") => CliError::new(
            code::BROKER_UNREACHABLE,
            format!("cannot reach the broker at {addr}: {m}. {BROKER_HINT}"),
        ),
        ClientError::Protocol(_) | ClientError::Closed => CliError::new(
            code::PROTOCOL_ERROR,
            format!(
                "{addr} did not answer as an es broker ({e}). --broker takes the broker's binary protocol \
                 address (es-broker --binary-addr, default 127.0.0.1:9090), not its HTTP address. \
                 A broker started with --tls-cert speaks TLS only: add --tls-ca FILE (or --tls)."
            ),
        ),
        ClientError::Tls(m) => tls_error(addr, &m),
    }
}

/// A failed TLS handshake with the broker at `addr`: what failed
/// (`message`), and what to do about it.
fn tls_error(addr: &str, message: &str) -> CliError {
    let hint = if message.contains("unknown issuer") {
        "Give the CA that signed the broker's certificate with --tls-ca FILE (or ES_TLS_CA)."
    } else if message.contains("name mismatch") {
        "Set --broker to a name or address the broker's certificate carries (its subjectAltName)."
    } else if message.contains("expired") {
        "The broker needs a new certificate (es-broker reloads it on SIGHUP)."
    } else if message.contains("did not answer in TLS") {
        "Is the broker started with --tls-cert? For a plaintext broker, leave out --tls and --tls-ca."
    } else if message.contains("client certificate") {
        "The broker requires client certificates (es-broker --tls-client-ca), which es does not send yet."
    } else {
        ""
    };
    CliError::new(
        code::TLS_ERROR,
        format!("TLS with the broker at {addr} failed: {message}. {hint}")
            .trim_end()
            .to_string(),
    )
}

/// What to suggest when the topic a command names does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Create it (a command that reads, writes or describes the topic).
    Create,
    /// See the topics there are (deleting it, resetting a group on it).
    List,
}

/// A failure of a request about `topic`, after the connection was made.
pub fn request_error(addr: &str, topic: &str, e: ClientError) -> CliError {
    request_error_in(addr, topic, Missing::Create, e)
}

/// [`request_error`], with `missing` saying what to suggest for a topic
/// that does not exist.
pub fn request_error_in(addr: &str, topic: &str, missing: Missing, e: ClientError) -> CliError {
    let lost = |m: String| CliError::new(code::CONNECTION_LOST, m);
    let (code, message) = match e {
        ClientError::Broker { code, message, .. } => (code, message),
        ClientError::Io(e) => {
            return lost(format!(
                "lost the connection to the broker at {addr}: {}. Is es-broker still running?",
                io_reason(&e)
            ))
        }
        ClientError::Closed => {
            return lost(format!(
                "the broker at {addr} closed the connection. Is es-broker still running?"
            ))
        }
        ClientError::Protocol(m) if m.starts_with("connection lost") => {
            return lost(format!(
                "lost the connection to the broker at {addr} ({m}). Is es-broker still running?"
            ))
        }
        ClientError::Protocol(m) => {
            return CliError::new(
                code::PROTOCOL_ERROR,
                format!("protocol error with the broker at {addr}: {m}"),
            )
        }
        ClientError::Tls(m) => return tls_error(addr, &m),
    };
    let hint = match code.as_str() {
        "topic_not_found" => {
            let hint = match missing {
                Missing::Create => format!("Create it with: es topic create {topic} --partitions N"),
                Missing::List => "See the topics with: es topic list".to_string(),
            };
            return CliError::new(
                &code,
                format!("topic {topic:?} does not exist (topic_not_found). {hint}"),
            );
        }
        "topic_exists" => {
            return CliError::new(
                &code,
                format!("topic {topic:?} already exists (topic_exists). See it with: es topic describe {topic}"),
            )
        }
        "partition_not_found" => format!(" See the partitions with: es topic describe {topic}"),
        "offset_out_of_range" => format!(
            " Use --from-beginning, --last N, --from-time TIME, or an --offset between the log start offset \
             and the high watermark (es topic describe {topic})."
        ),
        "unavailable" => {
            " The broker is shutting down, or the partition refuses writes after a disk error until the broker \
             restarts; try again later."
                .to_string()
        }
        "unsupported_version" => " Use es and es-broker from the same release.".to_string(),
        "not_leader" => {
            " The cluster's leaders moved more often than es follows them (or its brokers disagree); \
             try again, or see es cluster status."
                .to_string()
        }
        "leader_not_available" => {
            " The partition has no leader now (an election, or too few brokers up); try again, \
             or see es cluster status."
                .to_string()
        }
        "outcome_unknown" => {
            " The records may or may not have been written; es produce resends them on its own only when \
             idempotent (the default), which writes them once."
                .to_string()
        }
        "unauthenticated" => format!(" {AUTH_HINT}"),
        "forbidden" => FORBIDDEN_HINT.to_string(),
        "not_owner" => NOT_OWNER_HINT.to_string(),
        "producer_fenced" => {
            " A newer instance of this idempotent producer (the same producer id, a newer epoch) took over; \
             this one stops."
                .to_string()
        }
        "out_of_order_sequence" | "duplicate_sequence" => {
            " The broker and this idempotent producer disagree on what was written (a bug; please report it). \
             --no-idempotence produces without sequences."
                .to_string()
        }
        _ => String::new(),
    };
    CliError::new(&code, format!("{message} ({code}).{hint}"))
}

/// A failure of a request about consumer group `group` (and `topic`,
/// where there is one).
pub fn group_error(addr: &str, group: &str, topic: &str, e: ClientError) -> CliError {
    group_error_in(addr, group, topic, Missing::Create, e)
}

/// [`group_error`], with `missing` saying what to suggest for a topic
/// that does not exist.
pub fn group_error_in(addr: &str, group: &str, topic: &str, missing: Missing, e: ClientError) -> CliError {
    let (code, message) = match &e {
        ClientError::Broker { code, message, .. } => (code.as_str(), message.as_str()),
        _ => return request_error_in(addr, topic, missing, e),
    };
    match code {
        "group_not_found" => CliError::new(
            code,
            format!("group {group:?} does not exist (group_not_found). See the groups with: es group list"),
        ),
        "group_not_empty" => CliError::new(
            code,
            format!(
                "group {group:?} has members, and only a group without members can be reset or deleted \
                 (group_not_empty). Stop its consumers first: es consume --group leaves the group when it exits, \
                 and a killed one is dropped after its session timeout. See the members with: es group describe {group}"
            ),
        ),
        "inconsistent_topics" => CliError::new(
            code,
            format!(
                "{message} (inconsistent_topics). Use another group for this topic, or wait until the group's \
                 members leave."
            ),
        ),
        _ => request_error_in(addr, topic, missing, e),
    }
}

/// Whether a request may succeed if sent again on a new connection: the
/// connection was lost, or the broker is shutting down (`unavailable`).
pub fn is_transient(e: &ClientError) -> bool {
    match e {
        ClientError::Io(_) | ClientError::Closed => true,
        ClientError::Protocol(m) => m.starts_with("connection lost"),
        // A cluster's: elsewhere or later, nothing written (not_leader,
        // leader_not_available); or written or not (outcome_unknown),
        // which an idempotent producer resends with the same sequence,
        // written once.
        ClientError::Broker { code, .. } => matches!(
            code.as_str(),
            "unavailable" | "not_leader" | "leader_not_available" | "outcome_unknown"
        ),
        ClientError::Tls(_) => false,
    }
}

/// Writing to stdout failed. A closed pipe (`es consume t | head`) just
/// ends the command, quietly.
pub fn output_error(e: io::Error) -> CliError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return CliError {
            code: code::IO_ERROR.to_string(),
            message: String::new(),
            quiet: true,
        };
    }
    CliError::new(code::IO_ERROR, format!("cannot write the output: {e}"))
}

/// A short, lower-case reason for an I/O error.
fn io_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::ConnectionReset => "connection reset".into(),
        io::ErrorKind::ConnectionAborted => "connection aborted".into(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "timed out".into(),
        io::ErrorKind::BrokenPipe => "connection closed".into(),
        io::ErrorKind::AddrNotAvailable => "address not available".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_says_what_to_do() {
        let e = connect_error(
            "127.0.0.1:9090",
            ClientError::Io(io::Error::from(io::ErrorKind::ConnectionRefused)),
        );
        assert_eq!(
            e.to_string(),
            "cannot reach the broker at 127.0.0.1:9090: connection refused. Is es-broker running? \
             Set --broker or ES_BROKER."
        );
    }

    #[test]
    fn topic_not_found_says_how_to_create() {
        let e = request_error(
            "b:1",
            "x",
            ClientError::Broker {
                code: "topic_not_found".into(),
                message: "topic \"x\" does not exist".into(),
                details: None,
            },
        );
        assert_eq!(
            e.to_string(),
            "topic \"x\" does not exist (topic_not_found). Create it with: es topic create x --partitions N"
        );
    }

    #[test]
    fn group_not_empty_says_to_stop_the_consumers() {
        let e = group_error(
            "b:1",
            "g",
            "t",
            ClientError::Broker {
                code: "group_not_empty".into(),
                message: "group \"g\" has members: commit as a member".into(),
                details: None,
            },
        );
        let text = e.to_string();
        assert!(text.starts_with("group \"g\" has members"), "{text}");
        assert!(
            text.contains("(group_not_empty)") && text.contains("es group describe g"),
            "{text}"
        );
    }

    #[test]
    fn transient_errors() {
        assert!(is_transient(&ClientError::Closed));
        assert!(is_transient(&ClientError::Io(io::Error::from(
            io::ErrorKind::ConnectionReset
        ))));
        assert!(is_transient(&ClientError::Protocol(
            "connection lost: closed by the broker".into()
        )));
        assert!(!is_transient(&ClientError::Protocol(
            "unexpected response".into()
        )));
        let broker = |code: &str| ClientError::Broker {
            code: code.into(),
            message: String::new(),
            details: None,
        };
        assert!(is_transient(&broker("unavailable")));
        assert!(!is_transient(&broker("producer_fenced")));
        assert!(!is_transient(&broker("out_of_order_sequence")));
    }

    #[test]
    fn other_codes_keep_the_broker_message() {
        let e = request_error(
            "b:1",
            "x",
            ClientError::Broker {
                code: "invalid_request".into(),
                message: "unknown config key \"retention_ms\"".into(),
                details: None,
            },
        );
        assert_eq!(
            e.to_string(),
            "unknown config key \"retention_ms\" (invalid_request)."
        );
    }
}
