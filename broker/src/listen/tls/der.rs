//! The two facts the broker reports of its certificate (RFC 5280), read
//! with a small DER walk instead of a full X.509 parser: the serial
//! number (logged on every load, so an operator sees which certificate a
//! reload took) and notAfter (`es_tls_cert_not_after_seconds`).
//!
//! ```text
//! Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
//! TBSCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber INTEGER,
//!     signature AlgorithmIdentifier, issuer Name,
//!     validity SEQUENCE { notBefore Time, notAfter Time }, ... }
//! Time ::= UTCTime (YYMMDDHHMMSSZ) | GeneralizedTime (YYYYMMDDHHMMSSZ)
//! ```
//!
//! Nothing here panics on malformed input: a certificate it cannot read
//! gives `None` (rustls has already parsed it for the handshake).

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The leaf's serial number (hex) and notAfter (unix seconds).
pub fn leaf_facts(cert: &[u8]) -> Option<(String, i64)> {
    let (tag, cert, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (mut tag, mut value, mut rest) = element(tbs)?;
    if tag == VERSION {
        (tag, value, rest) = element(rest)?;
    }
    if tag != INTEGER {
        return None;
    }
    let serial: String = value.iter().map(|b| format!("{b:02x}")).collect();
    let (_signature, rest) = skip(rest)?;
    let (_issuer, rest) = skip(rest)?;
    let (tag, validity, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_not_before, validity) = skip(validity)?;
    let (tag, not_after, _) = element(validity)?;
    Some((serial, time(tag, not_after)?))
}

/// One DER element of `input`: its tag, its value and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    let (&first, mut input) = input.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let bytes = (first & 0x7f) as usize;
        if bytes == 0 || bytes > 4 {
            return None;
        }
        let (len, after) = input.split_at_checked(bytes)?;
        input = after;
        len.iter().fold(0usize, |n, &b| (n << 8) | b as usize)
    };
    let (value, rest) = input.split_at_checked(len)?;
    Some((tag, value, rest))
}

/// Skips one element: its value and what follows it.
fn skip(input: &[u8]) -> Option<(&[u8], &[u8])> {
    element(input).map(|(_, value, rest)| (value, rest))
}

/// A UTCTime or GeneralizedTime in UTC (`Z`) as unix seconds.
fn time(tag: u8, value: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let text = text.strip_suffix('Z')?;
    let (year, rest) = match tag {
        UTC_TIME => {
            let (yy, rest) = text.split_at_checked(2)?;
            let yy: i64 = digits(yy)?;
            // RFC 5280: YY >= 50 is 19YY, else 20YY.
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, rest)
        }
        GENERALIZED_TIME => {
            let (yyyy, rest) = text.split_at_checked(4)?;
            (digits(yyyy)?, rest)
        }
        _ => return None,
    };
    if rest.len() != 10 {
        return None;
    }
    let field = |at: usize| digits(rest.get(at..at + 2)?);
    let (month, day, hour, minute, second) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Days from 1970-01-01 to the given date (proleptic Gregorian; Howard
/// Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate with this serial, valid until midnight
    /// (UTC) of `ymd`.
    fn cert(serial: &[u8], ymd: (i32, u8, u8)) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.serial_number = Some(rcgen::SerialNumber::from_slice(serial));
        params.not_after = rcgen::date_time_ymd(ymd.0, ymd.1, ymd.2);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_the_serial_and_not_after_of_a_certificate() {
        // 2049: UTCTime; 2050 and after: GeneralizedTime (RFC 5280).
        for (ymd, unix, serial) in [
            ((2049, 12, 31), 2_524_521_600i64, &[0x01, 0x02][..]),
            ((2050, 1, 1), 2_524_608_000, &[0x7f, 0x33, 0x10]),
        ] {
            let der = cert(serial, ymd);
            let (s, not_after) = leaf_facts(&der).expect("parses");
            assert_eq!(not_after, unix);
            let hex: String = serial.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(s, hex);
        }
    }

    #[test]
    fn dates_convert_to_unix_seconds() {
        assert_eq!(time(UTC_TIME, b"700101000000Z"), Some(0));
        assert_eq!(time(UTC_TIME, b"000229120000Z"), Some(951_825_600));
        assert_eq!(time(GENERALIZED_TIME, b"20380119031408Z"), Some(2_147_483_648));
        assert_eq!(time(GENERALIZED_TIME, b"99991231235959Z"), Some(253_402_300_799));
        for bad in [
            &b"7001010000Z"[..],
            b"700101000000",
            b"701301000000Z",
            b"7001010000+0Z",
            b"",
        ] {
            assert_eq!(time(UTC_TIME, bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }

    #[test]
    fn garbage_and_every_truncation_give_none_without_panicking() {
        let der = cert(&[0x42], (2033, 5, 18));
        assert_eq!(leaf_facts(&der), Some(("42".to_string(), 1_999_987_200)));
        for cut in 0..der.len() {
            // Truncating a certificate may still leave its validity whole.
            let _ = leaf_facts(&der[..cut]);
        }
        assert_eq!(leaf_facts(&[]), None);
        assert_eq!(leaf_facts(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(leaf_facts(&[0x30, 0x85, 1, 1, 1, 1, 1]), None);
        assert_eq!(leaf_facts(b"not a certificate at all"), None);
    }
}
