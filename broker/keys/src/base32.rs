//! RFC 4648 base32, lowercase, no padding: the alphabet of API keys
//! (a-z, 2-7), so a key is one word a double-click selects whole.

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The character of the low 5 bits of `v`.
fn symbol(v: u32) -> char {
    // Five bits index the 32 entries: `get` never misses.
    ALPHABET.get((v & 31) as usize).map_or('a', |&b| char::from(b))
}

/// `bytes` in lowercase base32 without padding: 8 characters per 5 bytes,
/// the last group cut to the characters its bits need.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(symbol(acc >> bits));
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(symbol(acc << (5 - bits)));
    }
    out
}

/// The bytes of lowercase unpadded base32 `text`; `None` for a character
/// outside the alphabet, a length no byte count encodes to, or non-zero
/// padding bits (each byte string has exactly one encoding).
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if matches!(text.len() % 8, 1 | 3 | 6) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'a'..=b'z' => c - b'a',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        acc = (acc << 5) | u32::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    (acc == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648 section 10's vectors, lowercased and unpadded.
    #[test]
    fn the_rfc_table() {
        let table = [
            ("", ""),
            ("f", "my"),
            ("fo", "mzxq"),
            ("foo", "mzxw6"),
            ("foob", "mzxw6yq"),
            ("fooba", "mzxw6ytb"),
            ("foobar", "mzxw6ytboi"),
        ];
        for (plain, encoded) in table {
            assert_eq!(encode(plain.as_bytes()), encoded, "{plain:?}");
            assert_eq!(decode(encoded).as_deref(), Some(plain.as_bytes()), "{encoded:?}");
        }
    }

    #[test]
    fn key_lengths() {
        assert_eq!(encode(&[0xff; 10]).len(), 16, "an id");
        assert_eq!(encode(&[0xff; 32]).len(), 52, "a secret");
        assert_eq!(encode(&[0xff; 4]).len(), 7, "a crc");
        assert_eq!(encode(&[0xff; 10]), "7".repeat(16));
    }

    #[test]
    fn hostile_text_is_refused() {
        for bad in ["A", "MY", "m1", "m8", "m=", "mz", "m", "mzx", "mzxw6y", "é"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
        assert_eq!(decode("mz"), None, "non-zero padding bits");
    }

    #[test]
    fn round_trips() {
        for n in 0..40u8 {
            let bytes: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
            assert_eq!(decode(&encode(&bytes)), Some(bytes));
        }
    }
}
