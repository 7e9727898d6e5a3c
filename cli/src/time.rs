//! Times on the command line (`es consume --from-time`): RFC 3339
//! (`2024-05-01T12:00:00Z`, `2024-05-01T14:00:00.250+02:00`, or a date
//! alone, `2024-05-01`, for its midnight UTC) or milliseconds since the
//! Unix epoch, the unit of record timestamps.

const EXPECTED: &str = "expected an RFC 3339 time (e.g. 2024-05-01T12:00:00Z, 2024-05-01T14:00:00+02:00 or \
                        2024-05-01) or milliseconds since the Unix epoch (e.g. 1714564800000)";

/// Milliseconds since the Unix epoch of `s` (clap's value parser).
pub fn parse_time(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .map_err(|_| format!("{s} milliseconds is too far from the epoch"));
    }
    parse_rfc3339(s).ok_or_else(|| EXPECTED.to_string())
}

/// Whether `ms`, given as milliseconds, looks like it was meant as
/// seconds: a time in 1970 that is a plausible epoch-seconds value
/// (2001 to 2286).
pub fn looks_like_seconds(ms: i64) -> bool {
    (1_000_000_000..100_000_000_000).contains(&ms)
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if b.len() == 10 {
        return days.checked_mul(86_400_000);
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) || b.get(13) != Some(&b':') || b.get(16) != Some(&b':')
    {
        return None;
    }
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for i in 0..3 {
            millis = millis * 10
                + if i < digits {
                    i64::from(b[at + i] - b'0')
                } else {
                    0
                };
        }
        at += digits;
    }
    let offset_minutes = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digit = |c: &u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
            let (h, m) = (digit(h1)? * 10 + digit(h2)?, digit(m1)? * 10 + digit(m2)?);
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return None,
    };
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    seconds.checked_mul(1000)?.checked_add(millis)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a date in the proleptic Gregorian calendar
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `ms` since the epoch as RFC 3339 in UTC, to the second or, where it
/// has some, the millisecond.
pub fn to_rfc3339(ms: i64) -> String {
    let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    if millis == 0 {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_and_epoch_ms() {
        assert_eq!(parse_time("1714564800000"), Ok(1_714_564_800_000));
        assert_eq!(parse_time("0"), Ok(0));
        assert_eq!(parse_time("2024-05-01T12:00:00Z"), Ok(1_714_564_800_000));
        assert_eq!(parse_time("2024-05-01t12:00:00z"), Ok(1_714_564_800_000));
        assert_eq!(parse_time("2024-05-01 12:00:00Z"), Ok(1_714_564_800_000));
        assert_eq!(parse_time("2024-05-01T14:00:00+02:00"), Ok(1_714_564_800_000));
        assert_eq!(parse_time("2024-05-01T07:30:00-04:30"), Ok(1_714_564_800_000));
        assert_eq!(parse_time("2024-05-01T12:00:00.25Z"), Ok(1_714_564_800_250));
        assert_eq!(
            parse_time("2024-05-01T12:00:00.123456789Z"),
            Ok(1_714_564_800_123)
        );
        assert_eq!(parse_time("2024-05-01"), Ok(1_714_521_600_000));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time("1969-12-31T23:59:59Z"), Ok(-1000));
        assert_eq!(parse_time("2000-02-29T00:00:00Z"), Ok(951_782_400_000));
    }

    #[test]
    fn malformed_times() {
        for bad in [
            "",
            "yesterday",
            "2024-05-01T12:00:00",
            "2024-05-01T12:00Z",
            "2024-13-01T00:00:00Z",
            "2023-02-29",
            "2024-05-01T24:00:00Z",
            "2024-05-01T12:00:00.Z",
            "2024-05-01T12:00:00+2:00",
            "2024-05-01T12:00:00+02:00x",
            "-5",
            "99999999999999999999",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn formats_back() {
        for ms in [0, 1_714_564_800_000, 1_714_564_800_250, 951_782_400_000, -1000] {
            assert_eq!(parse_time(&to_rfc3339(ms)), Ok(ms), "{ms}");
        }
        assert_eq!(to_rfc3339(1_700_000_000), "1970-01-20T16:13:20Z");
        assert!(looks_like_seconds(1_700_000_000) && !looks_like_seconds(1_700_000_000_000));
    }
}
