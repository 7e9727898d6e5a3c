//! Frame kinds. A response's kind is its request's kind with the high bit
//! set; `Error` answers any request.

#[repr(u8)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Hello = 0x01,
    Produce = 0x02,
    Fetch = 0x03,
    IdempotentProduce = 0x04,
    ProduceBatch = 0x05,
    CreateTopic = 0x10,
    ListTopics = 0x11,
    DescribeTopic = 0x12,
    DeleteTopic = 0x13,
    PatchTopicConfig = 0x14,
    /// The cluster's nodes, controller and partition totals: the JSON of
    /// HTTP's `GET /v1/cluster`; a standalone broker answers `not_found`.
    DescribeCluster = 0x15,
    InitProducer = 0x18,
    JoinGroup = 0x20,
    Heartbeat = 0x21,
    LeaveGroup = 0x22,
    CommitOffsets = 0x23,
    FetchCommits = 0x24,
    DescribeGroup = 0x25,
    ListGroups = 0x26,
    DeleteGroup = 0x27,
    ResetGroup = 0x28,
    /// An admin hands a group to another key: `{"group", "owner"}`.
    PatchGroup = 0x29,
    /// Key management (admin only) and the caller's own key: the same JSON
    /// bodies as HTTP's `/v1/keys` and `/v1/whoami`, with `"id"` where
    /// HTTP has it in the path.
    CreateKey = 0x2a,
    ListKeys = 0x2b,
    DescribeKey = 0x2c,
    PatchKey = 0x2d,
    RevokeKey = 0x2e,
    WhoAmI = 0x2f,
    HelloOk = 0x81,
    ProduceOk = 0x82,
    FetchOk = 0x83,
    ProduceBatchOk = 0x85,
    /// The JSON answer to any JSON request (0x10-0x2f).
    AdminOk = 0x90,
    Error = 0xff,
}

impl Kind {
    pub fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            0x01 => Hello,
            0x02 => Produce,
            0x03 => Fetch,
            0x04 => IdempotentProduce,
            0x05 => ProduceBatch,
            0x10 => CreateTopic,
            0x11 => ListTopics,
            0x12 => DescribeTopic,
            0x13 => DeleteTopic,
            0x14 => PatchTopicConfig,
            0x15 => DescribeCluster,
            0x18 => InitProducer,
            0x20 => JoinGroup,
            0x21 => Heartbeat,
            0x22 => LeaveGroup,
            0x23 => CommitOffsets,
            0x24 => FetchCommits,
            0x25 => DescribeGroup,
            0x26 => ListGroups,
            0x27 => DeleteGroup,
            0x28 => ResetGroup,
            0x29 => PatchGroup,
            0x2a => CreateKey,
            0x2b => ListKeys,
            0x2c => DescribeKey,
            0x2d => PatchKey,
            0x2e => RevokeKey,
            0x2f => WhoAmI,
            0x81 => HelloOk,
            0x82 => ProduceOk,
            0x83 => FetchOk,
            0x85 => ProduceBatchOk,
            0x90 => AdminOk,
            0xff => Error,
            _ => return None,
        })
    }

    /// A request kind (sent by clients).
    pub fn is_request(self) -> bool {
        (self as u8) < 0x80
    }

    /// A request whose payload is a JSON document answered by AdminOk.
    pub fn is_json_request(self) -> bool {
        (0x10..0x30).contains(&(self as u8))
    }
}
