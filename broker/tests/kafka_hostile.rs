//! Hostile input on the Kafka port: random bytes, a 2 GiB length prefix,
//! an unknown api key, version 9999, truncated frames, an array claiming
//! two billion elements (with the broker's address space limited, so a
//! decoder that reserved room for the claim would abort it). Each closes
//! its own connection (or, for an
//! ApiVersions es does not speak, is answered UNSUPPORTED_VERSION), and the
//! shard keeps serving; 10,000 pipelined requests are answered in order.

mod common;
mod kafka_common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::hang_guard;
use kafka_common::{start, start_with_address_space};

/// The hostile-frames broker's address space: ample for a shard, far
/// below what a decoder that believed a claimed element count would ask
/// for (two billion topics: about 150 GB), so such a reservation fails
/// and aborts the process, as it would under `vm.overcommit_memory=2`.
const ADDRESS_SPACE: u64 = 16 << 30;

/// A request frame: length, api key, version, correlation id, client id
/// "t", then `body`.
fn frame(key: i16, version: i16, cid: i32, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&cid.to_be_bytes());
    f.extend_from_slice(&1i16.to_be_bytes());
    f.push(b't');
    f.extend_from_slice(body);
    let mut out = (f.len() as i32).to_be_bytes().to_vec();
    out.extend(f);
    out
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(hang_guard())).unwrap();
    s
}

/// Reads one response frame: its bytes after the length.
fn response(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Whether the broker closed the connection (reads end), rather than
/// answering.
fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(e) => panic!("no answer and no close within the hang guard: {e}"),
        }
    }
}

/// The broker answers an ApiVersions v0 on a new connection.
fn still_serves(addr: &str) {
    let mut s = connect(addr);
    s.write_all(&frame(18, 0, 42, &[])).unwrap();
    let r = response(&mut s).expect("an ApiVersions answer");
    assert_eq!(&r[..4], &42i32.to_be_bytes());
    assert_eq!(&r[4..6], &0i16.to_be_bytes(), "error code 0");
}

#[test]
fn bad_frames_close_their_connection_and_the_shard_keeps_serving() {
    let (_b, addr) = start_with_address_space(ADDRESS_SPACE, 1, &[]);
    still_serves(&addr);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = |n: usize| {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect::<Vec<u8>>()
    };
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "a 2 GiB length prefix",
            [&[0x7f, 0xff, 0xff, 0xff][..], &[0; 64]].concat(),
        ),
        (
            "a negative length",
            [&[0xff, 0xff, 0xff, 0xf0][..], &[0; 64]].concat(),
        ),
        ("an unknown api key", frame(999, 0, 1, &[])),
        ("Metadata version 9999", frame(3, 9999, 1, &[])),
        (
            "Produce v2 (advertised for librdkafka, not served)",
            frame(0, 2, 1, &[0; 16]),
        ),
        ("a body cut short", frame(3, 1, 1, &[0, 0])),
        (
            "an array of two billion topics",
            frame(3, 1, 1, &0x7fff_ffffi32.to_be_bytes()),
        ),
        (
            "a compact array of four billion topics",
            frame(3, 9, 1, &[0, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        ),
    ];
    for i in 0..20 {
        cases.push(("random bytes", random(64 + i * 97)));
    }
    for (what, bytes) in cases {
        let mut s = connect(&addr);
        s.write_all(&bytes).unwrap();
        assert!(closed(&mut s), "{what}: the connection was not closed");
        still_serves(&addr);
    }
    // A frame announced longer than what arrives, then the sender stops:
    // the broker waits for the rest, and closes once the client does.
    let mut s = connect(&addr);
    s.write_all(&[0, 0, 0, 100, 0, 18, 0, 0]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert!(closed(&mut s), "a truncated frame");
    still_serves(&addr);
}

#[test]
fn an_api_versions_above_what_es_speaks_gets_unsupported_version_and_the_table() {
    let (_b, addr) = start(1, &[]);
    let mut s = connect(&addr);
    s.write_all(&frame(18, 9999, 7, &[])).unwrap();
    let r = response(&mut s).expect("an answer");
    assert_eq!(&r[..4], &7i32.to_be_bytes());
    assert_eq!(&r[4..6], &35i16.to_be_bytes(), "UNSUPPORTED_VERSION");
    let keys = i32::from_be_bytes(r[6..10].try_into().unwrap());
    assert!(keys >= 20, "the table of APIs: {keys}");
    // The connection goes on.
    s.write_all(&frame(18, 0, 8, &[])).unwrap();
    assert_eq!(&response(&mut s).unwrap()[..4], &8i32.to_be_bytes());
}

#[test]
fn ten_thousand_pipelined_requests_are_answered_in_order() {
    let (_b, addr) = start(2, &[]);
    let s = connect(&addr);
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let mut all = Vec::new();
        for cid in 0..10_000 {
            // ApiVersions and Metadata (all topics) alternate.
            let f = if cid % 2 == 0 {
                frame(18, 0, cid, &[])
            } else {
                frame(3, 1, cid, &(-1i32).to_be_bytes())
            };
            all.extend(f);
        }
        w.write_all(&all).unwrap();
    });
    let mut r = s;
    r.set_read_timeout(Some(Duration::from_secs(600).min(hang_guard())))
        .unwrap();
    for cid in 0..10_000i32 {
        let resp = response(&mut r).unwrap_or_else(|| panic!("answer {cid} missing"));
        assert_eq!(
            i32::from_be_bytes(resp[..4].try_into().unwrap()),
            cid,
            "answers in request order"
        );
    }
    writer.join().unwrap();
}
