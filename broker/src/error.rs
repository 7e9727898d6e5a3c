//! The broker's one error shape: a status, a stable snake_case code and a
//! message that says what to do. Rendered as
//! `{"error":{"code":"...","message":"..."}}`.

use hyper::StatusCode;

/// What an error out of file descriptors adds: it passes, and what to raise.
const OUT_OF_DESCRIPTORS: &str = "the broker is out of file descriptors for now; retry \
     (an operator raises `ulimit -n` or lowers --connections-max / --open-segments-max: docs/operations.md)";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn bad_json(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_json", message)
    }

    pub fn topic_not_found(topic: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "topic_not_found",
            format!("topic {topic:?} does not exist"),
        )
    }

    pub fn partition_not_found(topic: &str, partition: u64, partitions: u32) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "partition_not_found",
            format!("topic {topic:?} has partitions 0..{partitions}, not {partition}"),
        )
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// A failed file operation `what` (`writing <path>`): no room, or no
    /// file descriptor free, is `unavailable` (it passes: retry), anything
    /// else internal.
    pub fn io(what: impl std::fmt::Display, e: &std::io::Error) -> ApiError {
        if es_storage::out_of_descriptors(e) {
            metrics::counter!("es_descriptors_exhausted_total", "op" => "file").increment(1);
            ApiError::unavailable(format!("{what}: {e}: {OUT_OF_DESCRIPTORS}"))
        } else if es_storage::is_no_space(e) {
            ApiError::unavailable(format!(
                "{what}: {e}: the disk is full; retry once space is freed"
            ))
        } else {
            ApiError::internal(format!("{what}: {e}"))
        }
    }

    /// Maps a storage error: a poisoned or closed partition, a write
    /// refused (for want of room or of a descriptor), and any I/O that found
    /// no room or no descriptor are unavailable (retry elsewhere or later);
    /// damaged data on disk is `corrupt_data`; anything else is internal.
    pub fn storage(e: es_storage::StorageError) -> ApiError {
        use es_storage::StorageError as E;
        match e {
            E::Poisoned { .. } | E::Closed { .. } | E::Refused { .. } => ApiError::unavailable(e.to_string()),
            E::Io { .. } if e.is_no_space() => {
                ApiError::unavailable(format!("{e}: the disk is full; retry once space is freed"))
            }
            ref io if es_storage::storage_out_of_descriptors(io) => {
                ApiError::unavailable(format!("{e}: {OUT_OF_DESCRIPTORS}"))
            }
            E::Invalid(m) => ApiError::invalid(m),
            E::Corrupt { .. } | E::DataLoss { .. } => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt_data", e.to_string())
            }
            other => ApiError::internal(other.to_string()),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.status.as_u16(), self.message)
    }
}
