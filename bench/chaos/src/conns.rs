//! A workload thread's connections, one HTTP and one binary per node,
//! opened when first used.

use std::collections::HashMap;

use crate::binary::BinConn;
use crate::http::HttpConn;
use crate::workload::Ctx;

pub struct Conns {
    client_id: String,
    http: HashMap<u32, HttpConn>,
    bin: HashMap<u32, BinConn>,
}

impl Conns {
    pub fn new(client_id: &str) -> Conns {
        Conns {
            client_id: client_id.to_string(),
            http: HashMap::new(),
            bin: HashMap::new(),
        }
    }

    /// The HTTP connection to `node` (which must be one of `ctx.nodes`).
    pub fn http(&mut self, ctx: &Ctx, node: u32) -> &mut HttpConn {
        self.http
            .entry(node)
            .or_insert_with(|| HttpConn::new(&ctx.node(node).http))
    }

    /// The binary connection to `node`.
    pub fn bin(&mut self, ctx: &Ctx, node: u32) -> &mut BinConn {
        let id = self.client_id.clone();
        self.bin
            .entry(node)
            .or_insert_with(|| BinConn::new(&ctx.node(node).binary, &id))
    }
}
