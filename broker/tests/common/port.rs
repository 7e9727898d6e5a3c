//! Test ports, shared by the broker's and the CLI's integration tests
//! (cli/tests/common includes this file by path).

use std::net::TcpListener;

/// A loopback port nobody listens on right now.
/// Never the same port twice in one test process: the broker's listeners
/// set SO_REUSEPORT, so a second broker given a port another test's broker
/// already listens on would share it silently, and each would get some of
/// the other's connections.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut given = GIVEN.lock().expect("lock");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}
