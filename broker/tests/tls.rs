//! TLS to clients (docs/security.md), against the real broker started
//! with `--tls-cert`/`--tls-key` on certificates made here (rcgen): a CA,
//! a server certificate for 127.0.0.1 and localhost, client certificates.
//!
//! - HTTPS works with curl (health, create, produce, fetch) and offers
//!   ALPN http/1.1; plain HTTP, garbage and an unknown CA fail their
//!   handshake and the broker goes on serving;
//! - SIGHUP: a new certificate reaches new connections while a keep-alive
//!   connection made before goes on with the old one; a key that does not
//!   match, or does not parse, keeps the old certificate and the log says
//!   which file and why;
//! - a client that connects and says nothing is closed (the verdict is
//!   "closed", never "closed within some time");
//! - the binary protocol over TLS (the es client library): produce, large
//!   batches, fetch; TLS connections never move between shards;
//! - `--tls-client-ca`: no client certificate, no connection;
//! - `--tls-cert` without `--tls-key` refuses to start, saying so.
//!
//! Every wait polls a condition, bounded only by the hang guard.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use common::{wait_for, Broker};
use es_protocol::client::tls::TlsOptions;
use es_protocol::client::{Client, ClientError, Options};
use es_protocol::requests::fetch::Fetch;
use es_protocol::requests::produce::ProduceRecord;
use es_protocol::Kind;
use rcgen::{CertificateParams, CertifiedIssuer, KeyPair, SerialNumber};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------

/// A CA and the files made with it, in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let ca = common::pki::ca(name);
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
        };
        std::fs::write(pki.ca_path(), pki.ca.pem()).unwrap();
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn ca_path(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// A server certificate for 127.0.0.1 and localhost with `serial`,
    /// written to `cert.pem` and `key.pem`; its DER.
    fn server(&self, serial: u64) -> Vec<u8> {
        let (cert, key) = self.leaf(serial, &["127.0.0.1", "localhost"]);
        std::fs::write(self.path("cert.pem"), cert.pem()).unwrap();
        std::fs::write(self.path("key.pem"), key.serialize_pem()).unwrap();
        cert.der().to_vec()
    }

    /// A client certificate, written to `client.pem` and `client-key.pem`.
    fn client(&self) {
        let (cert, key) = self.leaf(99, &["es-test-client"]);
        std::fs::write(self.path("client.pem"), cert.pem()).unwrap();
        std::fs::write(self.path("client-key.pem"), key.serialize_pem()).unwrap();
    }

    fn leaf(&self, serial: u64, names: &[&str]) -> (rcgen::Certificate, KeyPair) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.serial_number = Some(SerialNumber::from(serial));
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert, key)
    }

    fn flags(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.path("cert.pem").display().to_string(),
            "--tls-key".into(),
            self.path("key.pem").display().to_string(),
        ]
    }
}

// ---------------------------------------------------------------------------
// A TLS HTTP client (rustls), enough for these tests
// ---------------------------------------------------------------------------

fn client_config(ca: &Path, client_cert: Option<(&Path, &Path)>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let mut config = match client_cert {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            builder
                .with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key).unwrap())
                .unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// One TLS connection to the broker's HTTP listener, kept alive.
struct Https {
    tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl Https {
    /// Connects and finishes the handshake, or says why it failed.
    fn connect(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> Result<Https, String> {
        let sock = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        sock.set_read_timeout(Some(common::hang_guard())).unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, sock);
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .map_err(|e| format!("handshake: {e}"))?;
        }
        // TLS 1.3: a refused client certificate shows on the first read.
        Ok(Https { tls })
    }

    /// The certificate the broker presented (DER of its leaf).
    fn peer_leaf(&self) -> Vec<u8> {
        self.tls.conn.peer_certificates().unwrap()[0].to_vec()
    }

    fn alpn(&self) -> Option<Vec<u8>> {
        self.tls.conn.alpn_protocol().map(|p| p.to_vec())
    }

    /// One request on this connection: status and JSON body.
    fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.tls
            .write_all(req.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        self.tls.flush().map_err(|e| format!("flush: {e}"))?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match self.tls.read(&mut byte) {
                Ok(0) => return Err(format!("closed after {:?}", String::from_utf8_lossy(&head))),
                Ok(_) => head.push(byte[0]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status in {head:?}"))?;
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .ok_or_else(|| format!("no Content-Length in {head:?}"))?;
        let mut body = vec![0u8; len];
        self.tls
            .read_exact(&mut body)
            .map_err(|e| format!("read body: {e}"))?;
        let value =
            serde_json::from_slice(&body).unwrap_or(Value::String(String::from_utf8_lossy(&body).into()));
        Ok((status, value))
    }
}

// ---------------------------------------------------------------------------
// A TLS broker
// ---------------------------------------------------------------------------

/// Starts a broker with TLS (`pki`'s `cert.pem` and `key.pem`) and `extra`
/// flags, and waits until it answers `GET /ready` 200 over TLS.
fn start_tls(pki: &Pki, extra: &[&str]) -> Broker {
    let mut args = pki.flags();
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let b = Broker::start_unready(2, &args);
    let client = extra
        .contains(&"--tls-client-ca")
        .then(|| (pki.path("client.pem"), pki.path("client-key.pem")));
    let config = client_config(
        &pki.ca_path(),
        client.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
    );
    wait_for("the TLS broker to answer GET /ready 200", || {
        matches!(
            Https::connect(b.addr(), &config).and_then(|mut c| c.request("GET", "/ready", None)),
            Ok((200, _))
        )
    });
    b
}

fn https(b: &Broker, pki: &Pki) -> Https {
    Https::connect(b.addr(), &client_config(&pki.ca_path(), None)).expect("TLS connection")
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "600"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("curl runs")
}

/// A `/metrics` sample over TLS.
fn metric(b: &Broker, pki: &Pki, series: &str) -> Option<f64> {
    let out = curl(&[
        "--cacert",
        pki.ca_path().to_str().unwrap(),
        &format!("https://127.0.0.1:{}/metrics", b.addr().port()),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .filter_map(|l| l.strip_prefix(series))
        .find_map(|rest| rest.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Sends SIGHUP to the broker.
fn sighup(b: &Broker) {
    let sent = Command::new("kill")
        .args(["-HUP", &b.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn https_serves_the_api_and_refuses_what_is_not_tls_to_its_ca() {
    let pki = Pki::new("es test CA");
    let leaf = pki.server(1);
    let b = start_tls(&pki, &[]);
    let port = b.addr().port();
    let ca = pki.ca_path();
    let ca = ca.to_str().unwrap();
    let base = format!("https://127.0.0.1:{port}");

    // curl with the CA: health, create, produce, fetch.
    let out = curl(&["--cacert", ca, &format!("{base}/health")]);
    assert!(out.status.success(), "curl https: {out:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"],
        "ok"
    );
    let out = curl(&[
        "--cacert",
        ca,
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"name":"secure","partitions":2}"#,
        &format!("{base}/v1/topics"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = curl(&[
        "--cacert",
        ca,
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"records":[{"value":"over tls","partition":1}]}"#,
        &format!("{base}/v1/topics/secure/records"),
    ]);
    let produced: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(produced["offsets"][0]["offset"], 0, "{produced}");
    let out = curl(&[
        "--cacert",
        ca,
        &format!("{base}/v1/topics/secure/partitions/1/records?offset=0"),
    ]);
    let fetched: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fetched["records"][0]["value"], "over tls", "{fetched}");

    // The certificate made here, with ALPN http/1.1 (h2 was offered too).
    let c = https(&b, &pki);
    assert_eq!(c.peer_leaf(), leaf);
    assert_eq!(c.alpn().as_deref(), Some(&b"http/1.1"[..]));

    // Plain HTTP to the TLS port: an error, not an answer.
    let out = curl(&[&format!("http://127.0.0.1:{port}/health")]);
    assert!(!out.status.success(), "plain HTTP got an answer: {out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\"ok\""),
        "{out:?}"
    );
    // Garbage that looks like a ClientHello, then plain garbage.
    for junk in [
        &[0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0xff, 0xff, 0xff, 0xff][..],
        b"\x00\x01\x02 not tls at all \xff\xfe",
    ] {
        let mut s = TcpStream::connect(b.addr()).unwrap();
        s.set_read_timeout(Some(common::hang_guard())).unwrap();
        s.write_all(junk).unwrap();
        let mut sink = Vec::new();
        // Closed: an alert at most, then the end of the stream (or a reset).
        let _ = s.read_to_end(&mut sink);
        assert!(sink.len() < 64, "answered garbage with {sink:?}");
    }
    // An unknown CA: curl and rustls both refuse the broker's certificate.
    let other = Pki::new("another CA");
    let out = curl(&[
        "--cacert",
        other.ca_path().to_str().unwrap(),
        &format!("{base}/health"),
    ]);
    assert!(!out.status.success(), "{out:?}");
    let e = Https::connect(b.addr(), &client_config(&other.ca_path(), None))
        .err()
        .expect("a certificate of an unknown CA is refused");
    assert!(e.contains("UnknownIssuer"), "{e}");

    // Still serving, with the failures counted.
    let mut c = https(&b, &pki);
    assert_eq!(c.request("GET", "/health", None).unwrap().0, 200);
    let failures = metric(&b, &pki, r#"es_tls_handshake_failures_total{listener="http"}"#).unwrap();
    assert!(failures >= 3.0, "{failures}");
    let not_after = metric(&b, &pki, "es_tls_cert_not_after_seconds").unwrap();
    // rcgen's default notAfter: 4096-01-01.
    assert_eq!(not_after, 67_090_118_400.0);
    // Every TLS family docs/api.md lists is exported, with help.
    let out = curl(&["--cacert", ca, &format!("{base}/metrics")]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let doc = include_str!("../../docs/api.md");
    let documented: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `es_tls_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert_eq!(documented.len(), 4, "{documented:?}");
    for name in documented {
        assert!(
            text.contains(&format!("# HELP es_tls_{name} ")),
            "es_tls_{name} not exported:\n{text}"
        );
    }
}

#[test]
fn sighup_reloads_the_certificate_for_new_connections_only() {
    let pki = Pki::new("es test CA");
    let first = pki.server(1);
    let b = start_tls(&pki, &[]);
    let mut before = https(&b, &pki);
    assert_eq!(before.request("GET", "/health", None).unwrap().0, 200);
    assert_eq!(before.peer_leaf(), first);

    let second = pki.server(2);
    assert_ne!(first, second);
    sighup(&b);
    wait_for("a new connection to get the new certificate", || {
        https(&b, &pki).peer_leaf() == second
    });
    // The keep-alive connection made before goes on, with its certificate.
    assert_eq!(before.request("GET", "/health", None).unwrap().0, 200);
    assert_eq!(before.peer_leaf(), first);
    let mut after = https(&b, &pki);
    assert_eq!(after.request("GET", "/health", None).unwrap().0, 200);
    wait_for("the reload counted", || {
        metric(&b, &pki, r#"es_tls_cert_reloads_total{outcome="ok"}"#) == Some(1.0)
    });

    // A key that is not the certificate's: the log says so, naming the
    // file; the certificate in use stays.
    let key_path = pki.path("key.pem");
    let (third, _) = pki.leaf(3, &["127.0.0.1"]);
    std::fs::write(pki.path("cert.pem"), third.pem()).unwrap();
    sighup(&b);
    let said = "is not the private key of the certificate in --tls-cert";
    wait_for("the log to say the key does not match", || {
        b.stderr_text().contains(said)
    });
    let log = b.stderr_text();
    let line = log.lines().find(|l| l.contains(said)).unwrap();
    assert!(
        line.contains(key_path.to_str().unwrap()) && line.contains("WARN"),
        "{line}"
    );
    assert!(
        line.contains("still serving the certificate loaded before"),
        "{line}"
    );
    assert_eq!(https(&b, &pki).peer_leaf(), second);

    // A key file that does not parse: the same.
    pki.server(4);
    std::fs::write(
        &key_path,
        "-----BEGIN PRIVATE KEY-----\nnot base64!\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    sighup(&b);
    wait_for("two failed reloads counted", || {
        metric(&b, &pki, r#"es_tls_cert_reloads_total{outcome="failed"}"#) == Some(2.0)
    });
    let log = b.stderr_text();
    assert!(
        log.lines()
            .filter(|l| l.contains("reload failed") && l.contains(key_path.to_str().unwrap()))
            .count()
            == 2,
        "{log}"
    );
    assert_eq!(https(&b, &pki).peer_leaf(), second);
    assert_eq!(before.request("GET", "/health", None).unwrap().0, 200);
}

#[test]
fn a_client_that_says_nothing_is_closed_after_the_handshake_timeout() {
    let pki = Pki::new("es test CA");
    pki.server(1);
    let b = start_tls(&pki, &["--tls-handshake-timeout-ms", "500"]);
    let binary: SocketAddr = b.binary_addr().parse().unwrap();
    for addr in [b.addr(), binary] {
        let mut s = TcpStream::connect(addr).unwrap();
        // Only a guard against a hang: the verdict is the end of stream.
        s.set_read_timeout(Some(common::hang_guard())).unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("{addr}: expected the broker to close the silent connection, got {other:?}"),
        }
    }
    // Half a handshake is not more than none.
    let mut s = TcpStream::connect(b.addr()).unwrap();
    s.set_read_timeout(Some(common::hang_guard())).unwrap();
    s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    for listener in ["http", "binary"] {
        let series = format!("es_tls_handshake_timeouts_total{{listener=\"{listener}\"}}");
        assert!(metric(&b, &pki, &series).unwrap() >= 1.0, "{series}");
    }
    let mut c = https(&b, &pki);
    assert_eq!(c.request("GET", "/health", None).unwrap().0, 200);
}

fn tls_options(ca: &Path, name: Option<&str>) -> Options {
    let mut tls = TlsOptions::new(Some(ca)).expect("the CA file");
    tls.server_name = name.map(String::from);
    Options {
        client_id: "tls-test".into(),
        tls: Some(tls),
        ..Options::default()
    }
}

#[test]
fn the_binary_protocol_speaks_tls_and_its_connections_stay_on_their_shard() {
    let pki = Pki::new("es test CA");
    pki.server(1);
    let b = start_tls(&pki, &[]);
    let addr = b.binary_addr();
    let c = Client::connect(&addr, tls_options(&pki.ca_path(), None)).expect("TLS connect");
    c.admin(Kind::CreateTopic, json!({"name": "t", "partitions": 2}))
        .unwrap();
    // Small produces, pipelined, to both partitions: whichever shard the
    // connection landed on, one of them is another shard's.
    let pending: Vec<_> = (0..40u32)
        .map(|i| {
            c.send(&es_protocol::Request::Produce(
                es_protocol::requests::produce::Produce {
                    topic: "t".into(),
                    records: vec![ProduceRecord {
                        partition: Some(i % 2),
                        timestamp_ms: None,
                        key: None,
                        value: format!("r{i}").into_bytes(),
                    }],
                },
            ))
            .unwrap()
        })
        .collect();
    for p in pending {
        p.wait().expect("produce over TLS");
    }
    // Large batches (read into memory of their own, early writes) to one
    // partition, more than enough to move a plaintext connection, from
    // four connections: the kernel puts some, almost surely, on the shard
    // that does not own the partition.
    let value: Vec<u8> = (0..(3 << 20)).map(|i| (i % 251) as u8).collect();
    let others: Vec<Client> = (0..3)
        .map(|_| Client::connect(&addr, tls_options(&pki.ca_path(), None)).expect("TLS connect"))
        .collect();
    for conn in std::iter::once(&c).chain(&others) {
        for _ in 0..10 {
            let mut bb = es_protocol::batch::BatchBuilder::default();
            bb.push(None, &value, 0);
            conn.produce_batch("t", 1, bb.finish(0, None).unwrap())
                .expect("a 3 MiB batch over TLS");
        }
    }
    let mut got = Vec::new();
    let mut offset = 0;
    while got.len() < 60 {
        let ok = c
            .fetch(Fetch {
                topic: "t".into(),
                partition: 1,
                offset: Some(offset),
                max_records: 100,
                max_bytes: 16 << 20,
                wait_ms: 0,
            })
            .expect("fetch over TLS");
        assert!(!ok.is_empty(), "fetched {} records", got.len());
        offset = ok.next_offset;
        got.extend(ok.to_records().into_iter().map(|r| r.value));
    }
    assert_eq!(got.len(), 60);
    assert_eq!(got[0], b"r1");
    assert!(
        got[20..].iter().all(|v| *v == value),
        "large values come back whole"
    );
    assert_eq!(metric(&b, &pki, "es_binary_connections_moved_total"), Some(0.0));

    // Plaintext to the TLS port, an unknown CA, a wrong name: refused,
    // saying what failed.
    let e = Client::connect(&addr, Options::default())
        .err()
        .expect("plaintext is refused");
    assert!(
        matches!(
            e,
            ClientError::Closed | ClientError::Io(_) | ClientError::Protocol(_)
        ),
        "{e:?}"
    );
    let other = Pki::new("another CA");
    let e = Client::connect(&addr, tls_options(&other.ca_path(), None))
        .err()
        .unwrap();
    assert!(
        matches!(&e, ClientError::Tls(m) if m.contains("unknown issuer")),
        "{e:?}"
    );
    let e = Client::connect(&addr, tls_options(&pki.ca_path(), Some("elsewhere.example")))
        .err()
        .unwrap();
    assert!(
        matches!(&e, ClientError::Tls(m) if m.contains("name mismatch")),
        "{e:?}"
    );
    let c = Client::connect(&addr, tls_options(&pki.ca_path(), Some("localhost"))).expect("by name");
    c.admin(Kind::ListTopics, json!({})).unwrap();
}

#[test]
fn client_certificates_are_required_with_a_client_ca() {
    let pki = Pki::new("es test CA");
    pki.server(1);
    pki.client();
    let ca = pki.ca_path().display().to_string();
    let b = start_tls(&pki, &["--tls-client-ca", &ca]);
    let url = format!("https://127.0.0.1:{}/health", b.addr().port());
    let out = curl(&["--cacert", &ca, &url]);
    assert!(!out.status.success(), "no client certificate, yet: {out:?}");
    let out = curl(&[
        "--cacert",
        &ca,
        "--cert",
        pki.path("client.pem").to_str().unwrap(),
        "--key",
        pki.path("client-key.pem").to_str().unwrap(),
        &url,
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"],
        "ok"
    );
    // A certificate of another CA is refused too.
    let other = Pki::new("another CA");
    other.client();
    let config = client_config(
        &pki.ca_path(),
        Some((&other.path("client.pem"), &other.path("client-key.pem"))),
    );
    let refused = Https::connect(b.addr(), &config).and_then(|mut c| c.request("GET", "/health", None));
    assert!(refused.is_err(), "{refused:?}");
    // The binary listener asks too.
    let e = Client::connect(&b.binary_addr(), tls_options(&pki.ca_path(), None))
        .err()
        .unwrap();
    assert!(
        matches!(&e, ClientError::Tls(_) | ClientError::Io(_) | ClientError::Closed),
        "{e:?}"
    );
}

/// `es-broker` run to its exit with `args` (no `ES_*` variables): exit
/// code and output.
fn refused_start(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_es-broker"));
    cmd.args(["--registry-addr", "disabled", "--kafka-addr", "disabled"]);
    cmd.args(["--data-dir", data.to_str().unwrap(), "--shards", "1"])
        .args(["--http-addr", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--binary-addr", &format!("127.0.0.1:{}", common::free_port())])
        .args(args)
        .stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("ES_") && k != "ES_TEST_WAIT_SECS" {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("es-broker runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn a_certificate_without_its_key_or_a_missing_file_refuses_the_start() {
    let pki = Pki::new("es test CA");
    pki.server(1);
    let cert = pki.path("cert.pem").display().to_string();
    let (code, out) = refused_start(&["--tls-cert", &cert]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--tls-cert needs --tls-key"), "{out}");
    let missing = pki.path("nope.pem").display().to_string();
    let (code, out) = refused_start(&["--tls-cert", &cert, "--tls-key", &missing]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&format!("--tls-key {missing}")), "{out}");
}
