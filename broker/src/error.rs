//! The broker's one error shape: a status, a stable snake_case code and a
//! message that says what to do. Rendered as
//! `{"error":{"code":"...","message":"..."}}`.

use hyper::StatusCode;

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

    /// Maps a storage error: a poisoned or closed partition, a write
    /// refused for want of room, and any I/O that found no room are
    /// unavailable (retry elsewhere or later); damaged data on disk is
    /// `corrupt_data`; anything else is internal.
    pub fn storage(e: es_storage::StorageError) -> ApiError {
        use es_storage::StorageError as E;
        match e {
            E::Poisoned { .. } | E::Closed { .. } | E::Refused { .. } => ApiError::unavailable(e.to_string()),
            E::Io { .. } if e.is_no_space() => {
                ApiError::unavailable(format!("{e}: the disk is full; retry once space is freed"))
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
