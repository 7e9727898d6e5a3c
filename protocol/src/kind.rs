//! Frame kinds. A response's kind is its request's kind with the high bit
//! set; `Error` answers any request.

#[repr(u8)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Hello = 0x01,
    Produce = 0x02,
    Fetch = 0x03,
    CreateTopic = 0x10,
    ListTopics = 0x11,
    DescribeTopic = 0x12,
    DeleteTopic = 0x13,
    PatchTopicConfig = 0x14,
    HelloOk = 0x81,
    ProduceOk = 0x82,
    FetchOk = 0x83,
    /// The JSON answer to any topic request (0x10-0x1f).
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
            0x10 => CreateTopic,
            0x11 => ListTopics,
            0x12 => DescribeTopic,
            0x13 => DeleteTopic,
            0x14 => PatchTopicConfig,
            0x81 => HelloOk,
            0x82 => ProduceOk,
            0x83 => FetchOk,
            0x90 => AdminOk,
            0xff => Error,
            _ => return None,
        })
    }

    /// A request kind (sent by clients).
    pub fn is_request(self) -> bool {
        (self as u8) < 0x80
    }
}
