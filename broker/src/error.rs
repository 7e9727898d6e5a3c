//! The broker's one error shape: a stable snake_case code ([`ErrorCode`])
//! and a message that says what to do. Transport-neutral: the HTTP
//! listener renders it as `{"error":{"code":"...","message":"..."}}` with
//! the code's status, the binary listener as an error frame with the same
//! code, the Kafka listener as the Kafka error code of the same row. [`ErrorCode::row`] is the one table of codes.

/// What an error out of file descriptors adds: it passes, and what to raise.
const OUT_OF_DESCRIPTORS: &str = "the broker is out of file descriptors for now; retry \
     (an operator raises `ulimit -n` or lowers --connections-max / --open-segments-max: docs/operations.md)";

/// Every code the broker answers a request with. docs/api.md lists them;
/// clients match on the strings, so a code's string and status never
/// change once released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidRequest,
    BadJson,
    InvalidTopicName,
    InvalidGroupName,
    TopicNotFound,
    PartitionNotFound,
    GroupNotFound,
    UnknownMember,
    UnknownProducerId,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    TopicExists,
    TopicDataExists,
    TooManyPartitions,
    TooManyGroups,
    GroupNotEmpty,
    GroupFull,
    InconsistentTopics,
    InconsistentProtocol,
    StaleGeneration,
    NotAssigned,
    ProducerFenced,
    DuplicateSequence,
    OutOfOrderSequence,
    PayloadTooLarge,
    OffsetOutOfRange,
    NotUtf8,
    Internal,
    CorruptData,
    Unavailable,
    Unauthenticated,
    Forbidden,
    NotOwner,
    KeyNotFound,
    LastAdmin,
    // The schema registry's (docs/registry.md): each has a Confluent
    // error_code too (`confluent_code`).
    SubjectNotFound,
    VersionNotFound,
    SchemaNotFound,
    SubjectSoftDeleted,
    SubjectNotSoftDeleted,
    VersionSoftDeleted,
    VersionNotSoftDeleted,
    SubjectConfigNotFound,
    IncompatibleSchema,
    InvalidSchema,
    InvalidVersion,
    InvalidCompatibilityLevel,
    InvalidMode,
    OperationNotPermitted,
    ReferenceExists,
    InvalidSubject,
    SchemaTooLarge,
}

/// One row of the table: what a code is on each transport.
pub struct Row {
    /// The snake_case code: HTTP's `error.code`, and the code of the binary
    /// protocol's error frame, which carries codes as these same strings
    /// (docs/protocol.md).
    pub code: &'static str,
    /// The HTTP status it is answered with.
    pub http_status: u16,
    /// The Kafka error code the Kafka listener answers it with
    /// (docs/kafka.md, "Errors"). `forbidden` is 29
    /// TOPIC_AUTHORIZATION_FAILED here; the listener answers 30 or 31 where
    /// the resource is a group or the cluster.
    pub kafka: i16,
}

impl ErrorCode {
    /// The table: each code's string and HTTP status, in one place.
    pub const fn row(self) -> Row {
        use ErrorCode as C;
        let (code, http_status, kafka) = match self {
            C::InvalidRequest => ("invalid_request", 400, 42),
            C::BadJson => ("bad_json", 400, 42),
            C::InvalidTopicName => ("invalid_topic_name", 400, 17),
            C::InvalidGroupName => ("invalid_group_name", 400, 24),
            C::TopicNotFound => ("topic_not_found", 404, 3),
            C::PartitionNotFound => ("partition_not_found", 404, 3),
            C::GroupNotFound => ("group_not_found", 404, 69),
            C::UnknownMember => ("unknown_member", 404, 25),
            C::UnknownProducerId => ("unknown_producer_id", 404, 59),
            C::NotFound => ("not_found", 404, 3),
            C::MethodNotAllowed => ("method_not_allowed", 405, 35),
            C::RequestTimeout => ("request_timeout", 408, 7),
            C::TopicExists => ("topic_exists", 409, 36),
            C::TopicDataExists => ("topic_data_exists", 409, 36),
            C::TooManyPartitions => ("too_many_partitions", 409, 37),
            C::TooManyGroups => ("too_many_groups", 409, 81),
            C::GroupNotEmpty => ("group_not_empty", 409, 68),
            C::GroupFull => ("group_full", 409, 81),
            C::InconsistentTopics => ("inconsistent_topics", 409, 23),
            C::InconsistentProtocol => ("inconsistent_protocol", 409, 23),
            C::StaleGeneration => ("stale_generation", 409, 22),
            C::NotAssigned => ("not_assigned", 409, 25),
            C::ProducerFenced => ("producer_fenced", 409, 47),
            C::DuplicateSequence => ("duplicate_sequence", 409, 46),
            C::OutOfOrderSequence => ("out_of_order_sequence", 409, 45),
            C::PayloadTooLarge => ("payload_too_large", 413, 10),
            C::OffsetOutOfRange => ("offset_out_of_range", 416, 1),
            C::NotUtf8 => ("not_utf8", 422, 42),
            C::Internal => ("internal", 500, -1),
            C::CorruptData => ("corrupt_data", 500, 2),
            C::Unavailable => ("unavailable", 503, 56),
            C::Unauthenticated => ("unauthenticated", 401, 58),
            C::Forbidden => ("forbidden", 403, 29),
            C::NotOwner => ("not_owner", 403, 30),
            C::KeyNotFound => ("key_not_found", 404, 3),
            C::LastAdmin => ("last_admin", 409, 42),
            // The schema registry's codes never reach a Kafka client: a
            // registry request is refused as an invalid request if one did.
            C::SubjectNotFound => ("subject_not_found", 404, 42),
            C::VersionNotFound => ("version_not_found", 404, 42),
            C::SchemaNotFound => ("schema_not_found", 404, 42),
            C::SubjectSoftDeleted => ("subject_soft_deleted", 404, 42),
            C::SubjectNotSoftDeleted => ("subject_not_soft_deleted", 404, 42),
            C::VersionSoftDeleted => ("version_soft_deleted", 404, 42),
            C::VersionNotSoftDeleted => ("version_not_soft_deleted", 404, 42),
            C::SubjectConfigNotFound => ("subject_config_not_found", 404, 42),
            C::IncompatibleSchema => ("incompatible_schema", 409, 42),
            C::InvalidSchema => ("invalid_schema", 422, 42),
            C::InvalidVersion => ("invalid_version", 422, 42),
            C::InvalidCompatibilityLevel => ("invalid_compatibility_level", 422, 42),
            C::InvalidMode => ("invalid_mode", 422, 42),
            C::OperationNotPermitted => ("operation_not_permitted", 422, 42),
            C::ReferenceExists => ("reference_exists", 422, 42),
            C::InvalidSubject => ("invalid_subject", 422, 42),
            C::SchemaTooLarge => ("schema_too_large", 422, 42),
        };
        Row {
            code,
            http_status,
            kafka,
        }
    }

    /// The snake_case code.
    pub const fn as_str(self) -> &'static str {
        self.row().code
    }

    /// The HTTP status this code is answered with.
    pub const fn http_status(self) -> u16 {
        self.row().http_status
    }

    /// The Kafka protocol's error code (listen/kafka/).
    pub const fn kafka(self) -> i16 {
        self.row().kafka
    }

    /// The code of the binary protocol's error frame.
    pub const fn wire(self) -> &'static str {
        self.row().code
    }

    /// The `error_code` the schema registry listener answers with
    /// (Confluent's `Errors.java`, docs/registry.md): its HTTP status is
    /// this code's leading three digits, which is `http_status()`.
    pub const fn confluent(self) -> u32 {
        use ErrorCode as C;
        match self {
            C::SubjectNotFound => 40401,
            C::VersionNotFound => 40402,
            C::SchemaNotFound => 40403,
            C::SubjectSoftDeleted => 40404,
            C::SubjectNotSoftDeleted => 40405,
            C::VersionSoftDeleted => 40406,
            C::VersionNotSoftDeleted => 40407,
            C::SubjectConfigNotFound => 40408,
            C::IncompatibleSchema => 40901,
            C::InvalidSchema => 42201,
            C::InvalidVersion => 42202,
            C::InvalidCompatibilityLevel => 42203,
            C::InvalidMode => 42204,
            C::OperationNotPermitted => 42205,
            C::ReferenceExists => 42206,
            C::InvalidSubject => 42208,
            C::SchemaTooLarge => 42209,
            C::Unauthenticated => 40101,
            C::Forbidden | C::NotOwner => 40301,
            C::Internal | C::CorruptData => 50001,
            // The rest keep their bare HTTP status, as Confluent's server
            // does for errors outside its table (a malformed body is 400;
            // `unavailable` is 503, which clients retry).
            other => other.http_status() as u32,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compares with the snake_case string (what clients and tests match on).
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidRequest, message)
    }

    pub fn bad_json(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::BadJson, message)
    }

    pub fn topic_not_found(topic: &str) -> ApiError {
        ApiError::new(
            ErrorCode::TopicNotFound,
            format!("topic {topic:?} does not exist"),
        )
    }

    pub fn partition_not_found(topic: &str, partition: u64, partitions: u32) -> ApiError {
        ApiError::new(
            ErrorCode::PartitionNotFound,
            format!("topic {topic:?} has partitions 0..{partitions}, not {partition}"),
        )
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Internal, message)
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
            E::Corrupt { .. } | E::DataLoss { .. } => ApiError::new(ErrorCode::CorruptData, e.to_string()),
            other => ApiError::internal(other.to_string()),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code.as_str(), "message": self.message}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.code.http_status(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode as C;

    const ALL: &[C] = &[
        C::InvalidRequest,
        C::BadJson,
        C::InvalidTopicName,
        C::InvalidGroupName,
        C::TopicNotFound,
        C::PartitionNotFound,
        C::GroupNotFound,
        C::UnknownMember,
        C::UnknownProducerId,
        C::NotFound,
        C::MethodNotAllowed,
        C::RequestTimeout,
        C::TopicExists,
        C::TopicDataExists,
        C::TooManyPartitions,
        C::TooManyGroups,
        C::GroupNotEmpty,
        C::GroupFull,
        C::InconsistentTopics,
        C::StaleGeneration,
        C::NotAssigned,
        C::ProducerFenced,
        C::DuplicateSequence,
        C::OutOfOrderSequence,
        C::PayloadTooLarge,
        C::OffsetOutOfRange,
        C::NotUtf8,
        C::Internal,
        C::CorruptData,
        C::Unavailable,
        C::Unauthenticated,
        C::Forbidden,
        C::NotOwner,
        C::KeyNotFound,
        C::LastAdmin,
        C::SubjectNotFound,
        C::VersionNotFound,
        C::SchemaNotFound,
        C::SubjectSoftDeleted,
        C::SubjectNotSoftDeleted,
        C::VersionSoftDeleted,
        C::VersionNotSoftDeleted,
        C::SubjectConfigNotFound,
        C::IncompatibleSchema,
        C::InvalidSchema,
        C::InvalidVersion,
        C::InvalidCompatibilityLevel,
        C::InvalidMode,
        C::OperationNotPermitted,
        C::ReferenceExists,
        C::InvalidSubject,
        C::SchemaTooLarge,
    ];

    #[test]
    fn every_code_is_distinct_snake_case_with_an_error_status() {
        let mut seen = std::collections::HashSet::new();
        for &c in ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "{s} twice");
            let snake = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
            assert!(s.bytes().all(snake), "{s}");
            assert_eq!(c.wire(), s, "the binary frame carries the same code");
            assert!((400..600).contains(&c.http_status()), "{s}");
            let confluent = c.confluent();
            let status = if confluent >= 10_000 {
                confluent / 100
            } else {
                confluent
            };
            assert_eq!(
                status,
                c.http_status() as u32,
                "{s}: Confluent's code leads with its status"
            );
        }
    }
}
