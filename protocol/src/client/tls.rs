//! TLS for the blocking client (feature `tls`): rustls on ring, trusting
//! the CA certificates of a PEM file, or the system's store
//! (`rustls-native-certs`: what the operating system trusts, a company CA
//! installed there included).
//!
//! The client writes from the caller's threads and reads on its reader
//! thread, while one TLS session serves both: the session sits behind a
//! mutex held only to encrypt or decrypt, never across a socket read or
//! write, so a writer blocked on a full socket never keeps the reader from
//! draining the responses that would unblock it.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use super::ClientError;

/// Raw TLS bytes read from the socket at once.
const TLS_READ_BYTES: usize = 32 << 10;

/// How to speak TLS to the broker.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    pub config: Arc<ClientConfig>,
    /// The name the broker's certificate must carry (a DNS name or an IP
    /// address); `None`: the host of the address connected to.
    pub server_name: Option<String>,
}

impl TlsOptions {
    /// Trusts the CA certificates in the PEM file `ca`, or, without one,
    /// those of the system's store. Says what is wrong with the file or
    /// the store.
    pub fn new(ca: Option<&Path>) -> Result<TlsOptions, String> {
        let mut roots = RootCertStore::empty();
        match ca {
            Some(path) => {
                let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
                for cert in CertificateDer::pem_file_iter(path).map_err(|e| what(&e))? {
                    roots.add(cert.map_err(|e| what(&e))?).map_err(|e| what(&e))?;
                }
                if roots.is_empty() {
                    return Err(what(&"no CERTIFICATE block in it"));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    let why = found
                        .errors
                        .first()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default();
                    return Err(format!(
                        "the system's certificate store has no CA certificate{why}"
                    ));
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsOptions {
            config: Arc::new(config),
            server_name: None,
        })
    }
}

/// Runs the TLS handshake on `sock` (connected to `addr`, `HOST:PORT`):
/// the session, ready for the es handshake.
pub(super) fn handshake(
    sock: &mut TcpStream,
    tls: &TlsOptions,
    addr: &str,
) -> Result<ClientConnection, ClientError> {
    let name = name_for(tls, addr);
    let server_name = ServerName::try_from(name.clone())
        .map_err(|e| ClientError::Tls(format!("{name:?} is not a DNS name or an IP address: {e}")))?;
    let mut conn = ClientConnection::new(tls.config.clone(), server_name)
        .map_err(|e| ClientError::Tls(e.to_string()))?;
    while conn.is_handshaking() {
        conn.complete_io(sock).map_err(|e| from_io(e, &name))?;
    }
    Ok(conn)
}

/// The name the broker at `addr` must show in its certificate.
pub(super) fn name_for(tls: &TlsOptions, addr: &str) -> String {
    match &tls.server_name {
        Some(name) => name.clone(),
        None => host_of(addr).to_string(),
    }
}

/// `addr`'s host, without the port and an IPv6 address's brackets.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// An I/O error of a TLS session as the client error it is: a rustls
/// error says what failed (and the caller what to do), anything else is
/// the connection's.
pub(super) fn from_io(e: io::Error, name: &str) -> ClientError {
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return ClientError::Io(e);
    };
    ClientError::Tls(describe(tls, name))
}

/// What a rustls error means for a client of the broker named `name`.
fn describe(e: &rustls::Error, name: &str) -> String {
    use rustls::{AlertDescription, CertificateError, Error};
    match e {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the broker's certificate is not signed by a CA this client trusts (unknown issuer)".to_string()
        }
        Error::InvalidCertificate(CertificateError::NotValidForName)
        | Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            format!("the broker's certificate is not valid for the name {name:?} (name mismatch)")
        }
        Error::InvalidCertificate(CertificateError::Expired)
        | Error::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
            "the broker's certificate has expired".to_string()
        }
        Error::InvalidCertificate(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
            "the broker's certificate is a CA certificate (basicConstraints CA:TRUE), which is refused as a \
             server's own: the broker needs a certificate issued by a CA (docs/security.md)"
                .to_string()
        }
        Error::InvalidCertificate(other) => format!("the broker's certificate is refused: {other:?}"),
        Error::AlertReceived(AlertDescription::CertificateRequired)
        | Error::AlertReceived(AlertDescription::HandshakeFailure)
        | Error::AlertReceived(AlertDescription::BadCertificate) => format!(
            "the broker refused the handshake ({e}): it may require a client certificate (es-broker --tls-client-ca)"
        ),
        Error::InvalidMessage(_) => format!("the broker did not answer in TLS ({e}): it may not speak TLS"),
        other => other.to_string(),
    }
}

/// Locks the session; a thread that panicked holding it left it as it was.
fn lock(conn: &Mutex<ClientConnection>) -> MutexGuard<'_, ClientConnection> {
    conn.lock().unwrap_or_else(|e| e.into_inner())
}

/// The session and its socket, split for the client's reader thread and
/// its writers.
pub(super) fn split(conn: ClientConnection, sock: TcpStream) -> io::Result<(ReadHalf, WriteHalf)> {
    let conn = Arc::new(Mutex::new(conn));
    let read = ReadHalf {
        conn: conn.clone(),
        sock: sock.try_clone()?,
        raw: vec![0u8; TLS_READ_BYTES].into_boxed_slice(),
        at: 0,
        end: 0,
    };
    let write = WriteHalf {
        conn,
        sock,
        out: Vec::new(),
    };
    Ok((read, write))
}

/// The reading side: plaintext out of the session, raw bytes from the
/// socket into it when it has none.
pub(super) struct ReadHalf {
    conn: Arc<Mutex<ClientConnection>>,
    sock: TcpStream,
    /// Raw bytes read from the socket; `raw[at..end]` not given to the
    /// session yet.
    raw: Box<[u8]>,
    at: usize,
    end: usize,
}

impl Read for ReadHalf {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut conn = lock(&self.conn);
                match conn.reader().read(out) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if self.at < self.end {
                    // The session takes what it can hold; the rest waits
                    // until its plaintext is read.
                    let mut data = self.raw.get(self.at..self.end).unwrap_or_default();
                    let took = conn.read_tls(&mut data)?;
                    self.at += took;
                    conn.process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    continue;
                }
            }
            let n = match self.sock.read(&mut self.raw) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                // The peer closed: the session says whether cleanly
                // (close_notify: `Ok(0)`) or not (`UnexpectedEof`).
                let mut conn = lock(&self.conn);
                conn.read_tls(&mut &[][..])?;
                conn.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                return match conn.reader().read(out) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        Err(io::ErrorKind::UnexpectedEof.into())
                    }
                    other => other,
                };
            }
            (self.at, self.end) = (0, n);
        }
    }
}

/// The writing side: plaintext into the session, its records out to the
/// socket, the session unlocked while the socket takes them.
pub(super) struct WriteHalf {
    conn: Arc<Mutex<ClientConnection>>,
    sock: TcpStream,
    out: Vec<u8>,
}

impl WriteHalf {
    /// Sends `head` then `body` (one request frame).
    pub(super) fn write_frame(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        for part in [head, body] {
            let mut rest = part;
            while !rest.is_empty() {
                let n = lock(&self.conn).writer().write(rest)?;
                rest = rest.get(n..).unwrap_or_default();
                if !rest.is_empty() {
                    // The session's buffer is full: out with it first.
                    self.flush_records()?;
                }
            }
        }
        self.flush_records()
    }

    /// Writes the records the session has ready to the socket.
    fn flush_records(&mut self) -> io::Result<()> {
        {
            let mut conn = lock(&self.conn);
            while conn.wants_write() {
                conn.write_tls(&mut self.out)?;
            }
        }
        let written = self.sock.write_all(&self.out);
        self.out.clear();
        written
    }

    /// Says goodbye (close_notify), then shuts the socket down.
    pub(super) fn shutdown(&mut self) {
        lock(&self.conn).send_close_notify();
        let _ = self.flush_records();
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address() {
        assert_eq!(host_of("localhost:9090"), "localhost");
        assert_eq!(host_of("127.0.0.1:9090"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9090"), "::1");
        assert_eq!(host_of("broker"), "broker");
    }

    #[test]
    fn rustls_errors_say_what_failed() {
        use rustls::{CertificateError, Error};
        let unknown = describe(&Error::InvalidCertificate(CertificateError::UnknownIssuer), "x");
        assert!(unknown.contains("unknown issuer"), "{unknown}");
        let name = describe(
            &Error::InvalidCertificate(CertificateError::NotValidForName),
            "db1",
        );
        assert!(
            name.contains("name mismatch") && name.contains("\"db1\""),
            "{name}"
        );
        let wrapped = io::Error::new(
            io::ErrorKind::InvalidData,
            Error::InvalidCertificate(CertificateError::Expired),
        );
        assert!(matches!(from_io(wrapped, "x"), ClientError::Tls(m) if m.contains("expired")));
        assert!(matches!(
            from_io(io::ErrorKind::ConnectionReset.into(), "x"),
            ClientError::Io(_)
        ));
    }
}
