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
    // Cluster mode (docs/cluster.md): where a request must go instead.
    NotLeader,
    LeaderNotAvailable,
    OutcomeUnknown,
    // Cluster mode's consumer groups (groups/cluster.rs): the coordinator
    // of every group is the controller group's leader node.
    NotCoordinator,
    CoordinatorNotAvailable,
    // Refused by cluster mode's topic creation (topics/controller.rs).
    ReplicationFactorTooLarge,
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
            // 421 Misdirected Request: this node does not lead the
            // partition; Kafka's NOT_LEADER_OR_FOLLOWER makes its clients
            // refresh metadata and retry at the leader.
            C::NotLeader => ("not_leader", 421, 6),
            C::LeaderNotAvailable => ("leader_not_available", 503, 5),
            // Proposed, result unknown: Kafka's clients treat
            // REQUEST_TIMED_OUT the same way (retry only if idempotent).
            C::OutcomeUnknown => ("outcome_unknown", 503, 7),
            // Group requests go to the controller leader's node: Kafka's
            // NOT_COORDINATOR makes its clients find the coordinator again,
            // COORDINATOR_NOT_AVAILABLE wait and ask again.
            C::NotCoordinator => ("not_coordinator", 421, 16),
            C::CoordinatorNotAvailable => ("coordinator_not_available", 503, 15),
            C::ReplicationFactorTooLarge => ("replication_factor_too_large", 400, 38),
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

/// Where a partition's leader answers clients: `error.leader` of a
/// `not_leader` error (docs/api.md), and the node entries of
/// `GET /v1/cluster`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaderInfo {
    pub node_id: u64,
    pub http_addr: String,
    pub binary_addr: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Fields rendered inside `error` beside code and message (an object,
    /// or none): `leader` / `leaders` of a `not_leader`. The binary
    /// protocol carries them as the Error frame's `details` (version 2).
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// 421 `not_leader`: this node does not lead (or does not host) the
    /// partition. `error.leader` is where it is led, or null while no
    /// leader is known (the client retries after a backoff, or asks
    /// another broker). The message names the leader too, for clients of
    /// binary protocol version 1, which carry no details.
    pub fn not_leader(leader: Option<LeaderInfo>) -> ApiError {
        let message = match &leader {
            Some(l) => format!(
                "this broker does not lead the partition; node {} leads it \
                 (http {}, binary {}): send the request there",
                l.node_id, l.http_addr, l.binary_addr
            ),
            None => "this broker does not lead the partition and knows no leader yet; \
                     retry after a backoff or at another broker"
                .to_string(),
        };
        let mut details = serde_json::Map::new();
        details.insert("leader".into(), leader_json(leader.as_ref()));
        ApiError {
            code: ErrorCode::NotLeader,
            message,
            details: Some(details),
        }
    }

    /// 421 `not_leader` for a produce spanning partitions led by different
    /// nodes (or by another node than this one): refused whole before
    /// anything was written; `error.leaders` maps each partition (as a
    /// string key) to its leader or null. The client sends each
    /// partition's records to its leader.
    pub fn not_leader_of(leaders: std::collections::BTreeMap<u32, Option<LeaderInfo>>) -> ApiError {
        let named: Vec<String> = leaders
            .iter()
            .map(|(p, l)| match l {
                Some(l) => format!("partition {p} is led by node {} at {}", l.node_id, l.http_addr),
                None => format!("partition {p} has no known leader"),
            })
            .collect();
        let message = format!(
            "this broker does not lead every partition of the request, nothing was written \
             ({}); send each partition's records to its leader",
            named.join(", ")
        );
        let map: serde_json::Map<String, serde_json::Value> = leaders
            .iter()
            .map(|(p, l)| (p.to_string(), leader_json(l.as_ref())))
            .collect();
        let mut details = serde_json::Map::new();
        details.insert("leaders".into(), serde_json::Value::Object(map));
        ApiError {
            code: ErrorCode::NotLeader,
            message,
            details: Some(details),
        }
    }

    /// 421 `not_coordinator`: group requests go to the coordinator, the
    /// controller group's leader node, named in `error.coordinator` (its
    /// addresses, or null while not registered). The message names it too.
    pub fn not_coordinator(coordinator: Option<LeaderInfo>) -> ApiError {
        let message = match &coordinator {
            Some(l) => format!(
                "this broker does not coordinate consumer groups; node {} does \
                 (http {}, binary {}): send the request there",
                l.node_id, l.http_addr, l.binary_addr
            ),
            None => "this broker does not coordinate consumer groups, and the coordinator's \
                     addresses are not known yet; retry after a backoff or at another broker"
                .to_string(),
        };
        let mut details = serde_json::Map::new();
        details.insert("coordinator".into(), leader_json(coordinator.as_ref()));
        ApiError {
            code: ErrorCode::NotCoordinator,
            message,
            details: Some(details),
        }
    }

    /// 503 `coordinator_not_available`: the controller group has no leader
    /// now (an election, or too few nodes up); nothing was done. Retry
    /// after a backoff.
    pub fn coordinator_not_available() -> ApiError {
        ApiError::new(
            ErrorCode::CoordinatorNotAvailable,
            "the cluster has no group coordinator now (the controller group is electing a leader, \
             or too few nodes are up); retry after a backoff",
        )
    }

    /// 503 `leader_not_available`: an election is in progress, or this
    /// leader has lost its quorum; nothing was written. Retry after a
    /// backoff.
    pub fn leader_not_available(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::LeaderNotAvailable, message)
    }

    /// 503 `outcome_unknown`: the records were proposed but whether they
    /// were committed is not known (leadership changed, or the commit was
    /// not seen in time). An idempotent producer retries with the same
    /// sequence; any other may write them twice if it retries.
    pub fn outcome_unknown(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::OutcomeUnknown, message)
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

    /// The HTTP body: `{"error":{"code","message", ...details}}`.
    pub fn body(&self) -> serde_json::Value {
        let mut error = serde_json::Map::new();
        error.insert("code".into(), self.code.as_str().into());
        error.insert("message".into(), self.message.clone().into());
        for (k, v) in self.details.iter().flatten() {
            if k != "code" && k != "message" {
                error.insert(k.clone(), v.clone());
            }
        }
        serde_json::json!({ "error": error })
    }
}

/// A leader as `error.leader` shows it: its addresses, or null.
fn leader_json(leader: Option<&LeaderInfo>) -> serde_json::Value {
    leader
        .and_then(|l| serde_json::to_value(l).ok())
        .unwrap_or(serde_json::Value::Null)
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
        C::NotLeader,
        C::LeaderNotAvailable,
        C::OutcomeUnknown,
        C::NotCoordinator,
        C::CoordinatorNotAvailable,
        C::ReplicationFactorTooLarge,
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

    fn leader(id: u64) -> super::LeaderInfo {
        super::LeaderInfo {
            node_id: id,
            http_addr: format!("127.0.0.1:810{id}"),
            binary_addr: format!("127.0.0.1:910{id}"),
        }
    }

    #[test]
    fn not_leader_names_its_leader_in_the_body_and_the_message() {
        let e = super::ApiError::not_leader(Some(leader(2)));
        assert_eq!(e.code.http_status(), 421);
        assert_eq!(e.code.kafka(), 6, "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(
            e.body(),
            serde_json::json!({"error": {
                "code": "not_leader",
                "message": e.message,
                "leader": {"node_id": 2, "http_addr": "127.0.0.1:8102", "binary_addr": "127.0.0.1:9102"},
            }})
        );
        // A binary v1 client, which gets no details, still learns where.
        assert!(
            e.message.contains("node 2") && e.message.contains("127.0.0.1:9102"),
            "{}",
            e.message
        );
        let none = super::ApiError::not_leader(None);
        assert_eq!(none.body()["error"]["leader"], serde_json::Value::Null);
        assert!(none.body()["error"].as_object().unwrap().contains_key("leader"));
    }

    #[test]
    fn not_coordinator_names_the_coordinator_in_the_body_and_the_message() {
        let e = super::ApiError::not_coordinator(Some(leader(3)));
        assert_eq!(e.code.http_status(), 421);
        assert_eq!(e.code.kafka(), 16, "NOT_COORDINATOR");
        assert_eq!(
            e.body()["error"]["coordinator"],
            serde_json::json!({"node_id": 3, "http_addr": "127.0.0.1:8103", "binary_addr": "127.0.0.1:9103"})
        );
        assert!(e.message.contains("node 3") && e.message.contains("127.0.0.1:9103"));
        let none = super::ApiError::not_coordinator(None);
        assert_eq!(none.body()["error"]["coordinator"], serde_json::Value::Null);
        let unavailable = super::ApiError::coordinator_not_available();
        assert_eq!(unavailable.code.http_status(), 503);
        assert_eq!(unavailable.code.kafka(), 15, "COORDINATOR_NOT_AVAILABLE");
    }

    #[test]
    fn not_leader_of_maps_each_partition_to_its_leader() {
        let leaders = [(0, Some(leader(1))), (3, None), (12, Some(leader(3)))]
            .into_iter()
            .collect();
        let e = super::ApiError::not_leader_of(leaders);
        assert_eq!(e.code, "not_leader");
        let body = e.body();
        assert_eq!(body["error"]["leaders"]["0"]["node_id"], 1);
        assert_eq!(body["error"]["leaders"]["3"], serde_json::Value::Null);
        assert_eq!(body["error"]["leaders"]["12"]["binary_addr"], "127.0.0.1:9103");
        assert!(body["error"].get("leader").is_none());
        assert!(
            e.message.contains("partition 12 is led by node 3"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("partition 3 has no known leader"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_other_cluster_codes_are_plain() {
        let e = super::ApiError::leader_not_available("electing");
        assert_eq!(
            (e.code.as_str(), e.code.http_status(), e.code.kafka()),
            ("leader_not_available", 503, 5)
        );
        assert_eq!(
            e.body(),
            serde_json::json!({"error": {"code": "leader_not_available", "message": "electing"}})
        );
        let e = super::ApiError::outcome_unknown("proposed");
        assert_eq!(
            (e.code.as_str(), e.code.http_status(), e.code.kafka()),
            ("outcome_unknown", 503, 7)
        );
        assert_eq!(C::ReplicationFactorTooLarge.http_status(), 400);
        assert_eq!(
            C::ReplicationFactorTooLarge.kafka(),
            38,
            "INVALID_REPLICATION_FACTOR"
        );
    }
}
