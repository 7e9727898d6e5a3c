//! A connection to the broker, and the requests every command makes.

use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::{Client, ClientError, Options};
use es_protocol::Kind;
use serde_json::{json, Value};

use crate::args::Global;
use crate::error::{connect_error, request_error, Result};
use crate::topic_info::TopicInfo;

pub struct Session {
    pub client: Arc<Client>,
    /// The broker address, as the user gave it (for messages).
    pub addr: String,
    options: Options,
}

impl Session {
    /// Connects and shakes hands; `gzip` compresses every request frame.
    pub fn open(global: &Global, gzip: bool) -> Result<Session> {
        let options = Options {
            client_id: format!("es-cli/{}", env!("CARGO_PKG_VERSION")),
            api_key: global.api_key.clone().unwrap_or_default(),
            gzip,
            connect_timeout: Duration::from_secs(10),
        };
        let client =
            Client::connect(&global.broker, options.clone()).map_err(|e| connect_error(&global.broker, e))?;
        Ok(Session {
            client: Arc::new(client),
            addr: global.broker.clone(),
            options,
        })
    }

    /// A new connection with the same options (after the first one was lost).
    pub fn reconnect(&self) -> std::result::Result<Client, ClientError> {
        Client::connect(&self.addr, self.options.clone())
    }

    /// A topic request; `topic` names the topic in error messages.
    pub fn admin(&self, kind: Kind, body: Value, topic: &str) -> Result<Value> {
        self.client
            .admin(kind, body)
            .map_err(|e| request_error(&self.addr, topic, e))
    }

    /// The topic's partitions and config (fails when it does not exist).
    pub fn describe(&self, topic: &str) -> Result<(Value, TopicInfo)> {
        let doc = self.admin(Kind::DescribeTopic, json!({ "name": topic }), topic)?;
        let info = TopicInfo::parse(&doc)?;
        Ok((doc, info))
    }

    /// The largest frame the broker takes (from the handshake).
    pub fn frame_bytes_max(&self) -> usize {
        self.client.hello().frame_bytes_max as usize
    }
}
