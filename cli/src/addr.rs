//! `--broker HOST:PORT`, checked before anything connects: a missing or
//! bad port, a missing host, an IPv6 address without brackets or a URL is
//! said as such, rather than as whatever the resolver makes of it.

/// Why `addr` is not `HOST:PORT` (`None`: it is). The reason names an
/// example of the right form, built from what was given where it can.
pub fn problem(addr: &str) -> Option<String> {
    if addr.is_empty() {
        return Some("missing host and port (e.g. 127.0.0.1:9090)".into());
    }
    if let Some((_, rest)) = addr.split_once("://") {
        let host = rest
            .split(['/', ':'])
            .next()
            .filter(|h| !h.is_empty())
            .unwrap_or("127.0.0.1");
        return Some(format!(
            "a URL, but --broker takes the HOST:PORT of the broker's binary protocol listener \
             (e.g. {host}:9090), not its HTTP address"
        ));
    }
    if let Some(inside) = addr.strip_prefix('[') {
        let Some((host, after)) = inside.split_once(']') else {
            return Some("an IPv6 address without its closing ] (e.g. [::1]:9090)".into());
        };
        if host.is_empty() {
            return Some("missing host inside [] (e.g. [::1]:9090)".into());
        }
        return match after.strip_prefix(':') {
            None if after.is_empty() => Some(format!("missing port (e.g. [{host}]:9090)")),
            None => Some(format!("expected :PORT after ] (e.g. [{host}]:9090)")),
            Some(port) => port_problem(port, &format!("[{host}]")),
        };
    }
    match addr.matches(':').count() {
        0 => Some(format!("missing port (e.g. {addr}:9090)")),
        1 => {
            let (host, port) = addr.split_once(':').unwrap_or((addr, ""));
            if host.is_empty() {
                Some(format!("missing host (e.g. 127.0.0.1{addr})"))
            } else {
                port_problem(port, host)
            }
        }
        _ => Some("an IPv6 address goes in brackets, the port after them (e.g. [::1]:9090)".into()),
    }
}

fn port_problem(port: &str, host: &str) -> Option<String> {
    if port.is_empty() {
        return Some(format!("missing port (e.g. {host}:9090)"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => None,
        _ => Some(format!(
            "the port {port:?} is not a number from 1 to 65535 (e.g. {host}:9090)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_addresses() {
        for a in [
            "localhost:9090",
            "127.0.0.1:1",
            "[::1]:9090",
            "broker.example.com:65535",
        ] {
            assert_eq!(problem(a), None, "{a}");
        }
    }

    #[test]
    fn each_bad_form_says_what_is_wrong() {
        let cases = [
            ("localhost", "missing port (e.g. localhost:9090)"),
            ("localhost:", "missing port (e.g. localhost:9090)"),
            (":9090", "missing host (e.g. 127.0.0.1:9090)"),
            ("[::1]", "missing port (e.g. [::1]:9090)"),
            ("[::1]:", "missing port (e.g. [::1]:9090)"),
            ("[::1]9090", "expected :PORT after ] (e.g. [::1]:9090)"),
            ("[::1", "an IPv6 address without its closing ] (e.g. [::1]:9090)"),
            ("[]:9090", "missing host inside [] (e.g. [::1]:9090)"),
            (
                "::1",
                "an IPv6 address goes in brackets, the port after them (e.g. [::1]:9090)",
            ),
            (
                "localhost:http",
                "the port \"http\" is not a number from 1 to 65535 (e.g. localhost:9090)",
            ),
            (
                "localhost:0",
                "the port \"0\" is not a number from 1 to 65535 (e.g. localhost:9090)",
            ),
            (
                "localhost:65536",
                "the port \"65536\" is not a number from 1 to 65535 (e.g. localhost:9090)",
            ),
            ("", "missing host and port (e.g. 127.0.0.1:9090)"),
        ];
        for (addr, want) in cases {
            assert_eq!(problem(addr).as_deref(), Some(want), "{addr:?}");
        }
        let url = problem("http://localhost:8080/").unwrap();
        assert!(
            url.starts_with("a URL, but") && url.contains("(e.g. localhost:9090)"),
            "{url}"
        );
    }
}
