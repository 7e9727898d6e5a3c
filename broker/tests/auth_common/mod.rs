//! What the auth tests share: a broker with `--auth required` and its
//! bootstrap admin key, HTTP calls that carry a key, keys made through the
//! API, and binary connections that say a key in their Hello.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpStream;

use serde_json::{json, Value};

use crate::common::{self, Broker};

/// A broker with `--auth required` (and `args`), and its admin key read
/// from `<data-dir>/admin.key`.
pub fn start(args: &[&str]) -> (Broker, String) {
    let mut all = vec!["--auth", "required"];
    all.extend_from_slice(args);
    let b = Broker::start_with(&all);
    let key = admin_key(&b);
    (b, key)
}

pub fn admin_key(b: &Broker) -> String {
    std::fs::read_to_string(b.data_dir().join("admin.key"))
        .expect("admin.key")
        .trim()
        .to_string()
}

/// An HTTP answer: status, JSON body, the `WWW-Authenticate` header.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub challenge: Option<String>,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    pub fn pair(&self) -> (u16, Value) {
        (self.status, self.body.clone())
    }
}

/// One HTTP request with `Authorization` set to `auth` (as is) if given.
pub fn call_auth(b: &Broker, method: &str, path: &str, auth: Option<&str>, body: Option<&Value>) -> Answer {
    let agent = ureq::AgentBuilder::new()
        .timeout(std::time::Duration::from_secs(60))
        .build();
    let mut req = agent.request(method, &b.url(path));
    if let Some(a) = auth {
        req = req.set("Authorization", a);
    }
    let result = match body {
        Some(v) => req.send_json(v.clone()),
        None => req.call(),
    };
    let resp = match result {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {path}: {e}"),
    };
    let status = resp.status();
    let challenge = resp.header("www-authenticate").map(String::from);
    let text = resp.into_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        body,
        challenge,
    }
}

/// One HTTP request with `Authorization: Bearer key`.
pub fn call(b: &Broker, method: &str, path: &str, key: &str, body: Option<&Value>) -> Answer {
    call_auth(b, method, path, Some(&format!("Bearer {key}")), body)
}

/// Makes a key with `grants` (and `admin`); its id and key.
pub fn make_key(b: &Broker, admin_key: &str, name: &str, admin: bool, grants: Value) -> (String, String) {
    let a = call(
        b,
        "POST",
        "/v1/keys",
        admin_key,
        Some(&json!({"name": name, "admin": admin, "grants": grants})),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    (
        a.body["id"].as_str().unwrap().to_string(),
        a.body["key"].as_str().unwrap().to_string(),
    )
}

/// A grant.
pub fn grant(resource: &str, pattern: &str, name: &str, ops: &[&str]) -> Value {
    json!({"resource": resource, "pattern": pattern, "name": name, "operations": ops})
}

/// A well-formed key (right shape and checksum) from these bytes, made
/// here the way the broker makes keys (docs/security.md, "Key format").
pub fn key_from(id: [u8; 10], secret: [u8; 32]) -> String {
    let body = format!("esk_{}_{}", base32(&id), base32(&secret));
    let crc = crc32fast::hash(body.as_bytes()).to_be_bytes();
    format!("{body}_{}", base32(&crc))
}

/// A well-formed key with the id `id` (16 characters) and this secret.
pub fn key_with_id(id: &str, secret: [u8; 32]) -> String {
    let body = format!("esk_{id}_{}", base32(&secret));
    let crc = crc32fast::hash(body.as_bytes()).to_be_bytes();
    format!("{body}_{}", base32(&crc))
}

fn base32(bytes: &[u8]) -> String {
    const A: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let (mut out, mut acc, mut bits) = (String::new(), 0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(A[((acc >> bits) & 31) as usize] as char);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(A[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// A binary Hello with `key` on a new connection: the connection and the
/// first answer (HelloOk or an Error frame).
pub fn hello(b: &Broker, key: &str) -> (TcpStream, es_protocol::Response) {
    let mut s = TcpStream::connect(b.binary_addr()).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let h = es_protocol::Request::Hello(es_protocol::requests::hello::Hello {
        min_version: es_protocol::PROTOCOL_VERSION,
        max_version: es_protocol::PROTOCOL_VERSION,
        client_id: "auth-test".into(),
        api_key: key.into(),
    });
    s.write_all(&h.to_frame(7, false)).unwrap();
    let (id, resp) = es_protocol::client::read_response(&mut s)
        .expect("an answer")
        .expect("not closed before the answer");
    assert_eq!(id, 7, "the answer carries the Hello's request id");
    (s, resp)
}

/// The code of an error frame.
pub fn error_code(resp: &es_protocol::Response) -> String {
    match resp {
        es_protocol::Response::Error(e) => e.code.clone(),
        other => panic!("expected an error frame, got {:?}", other.kind()),
    }
}

/// Whether the broker closed `s` (a read finds the end of the stream).
pub fn closed(s: &mut TcpStream) -> bool {
    matches!(es_protocol::client::read_response(s), Ok(None) | Err(_))
}

/// A binary client with `key`.
pub fn client(b: &Broker, key: &str) -> es_protocol::client::Client {
    let options = es_protocol::client::Options {
        api_key: key.into(),
        ..Default::default()
    };
    es_protocol::client::Client::connect(&b.binary_addr(), options).expect("binary connect")
}

/// A raw keep-alive HTTP request on `s` with a bearer key.
pub fn raw_get(s: &mut TcpStream, path: &str, key: &str) -> common::RawResponse {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    common::read_response(s).expect("an HTTP answer")
}

/// Creates topic `name` with `key`; asserts 201.
pub fn create_topic(b: &Broker, key: &str, name: &str, partitions: u32) {
    let a = call(
        b,
        "POST",
        "/v1/topics",
        key,
        Some(&json!({"name": name, "partitions": partitions})),
    );
    assert_eq!(a.status, 201, "create topic {name}: {}", a.body);
}
