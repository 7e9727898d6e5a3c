//! The API key format (docs/security.md, "Key format"):
//!
//! ```text
//! esk_<id>_<secret>_<crc>
//!   id     16 chars: base32 of 10 random bytes (public: lookup, logs)
//!   secret 52 chars: base32 of 32 random bytes
//!   crc     7 chars: base32 of the big-endian CRC-32 of "esk_<id>_<secret>"
//! ```
//!
//! The checksum tells a mistyped or made-up key from a real one without a
//! lookup, and lets scanners find leaked keys. The table stores only the
//! SHA-256 of the whole key.

use ring::rand::SecureRandom;

use crate::base32;

pub const PREFIX: &str = "esk_";
/// Characters of the id: 10 random bytes (80 bits).
pub const ID_CHARS: usize = 16;
/// Characters of the secret: 32 random bytes (256 bits).
pub const SECRET_CHARS: usize = 52;
/// Characters of the checksum: a CRC-32.
pub const CRC_CHARS: usize = 7;
/// The whole key's length.
pub const KEY_CHARS: usize = PREFIX.len() + ID_CHARS + 1 + SECRET_CHARS + 1 + CRC_CHARS;
const _: () = assert!(KEY_CHARS == 81);

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// A key that parsed and whose checksum holds: not yet known to the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The whole key, as given.
    pub key: &'a str,
    /// Its id.
    pub id: &'a str,
}

impl ParsedKey<'_> {
    /// The SHA-256 of the whole key, what api_keys.json stores.
    pub fn digest(&self) -> Digest {
        digest(self.key)
    }
}

/// SHA-256 of `key`'s bytes.
pub fn digest(key: &str) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Why a key was refused before any lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Not `esk_` + id + secret + checksum in the base32 alphabet.
    Shape,
    /// The shape is right, the checksum is not: a typo or a made-up key.
    Checksum,
}

/// Parses `key` and checks its checksum. Never panics, whatever `key` is.
pub fn parse(key: &str) -> Result<ParsedKey<'_>, Malformed> {
    if key.len() != KEY_CHARS || !key.is_ascii() {
        return Err(Malformed::Shape);
    }
    let Some(rest) = key.strip_prefix(PREFIX) else {
        return Err(Malformed::Shape);
    };
    let mut parts = rest.split('_');
    let (Some(id), Some(secret), Some(crc), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Malformed::Shape);
    };
    if id.len() != ID_CHARS || secret.len() != SECRET_CHARS || crc.len() != CRC_CHARS {
        return Err(Malformed::Shape);
    }
    let ok = |s: &str, bytes: usize| base32::decode(s).is_some_and(|b| b.len() == bytes);
    if !ok(id, 10) || !ok(secret, 32) {
        return Err(Malformed::Shape);
    }
    let Some(crc_bytes) = base32::decode(crc).filter(|b| b.len() == 4) else {
        return Err(Malformed::Shape);
    };
    let body = &key[..key.len() - CRC_CHARS - 1];
    if crc_bytes[..] != crc32fast::hash(body.as_bytes()).to_be_bytes() {
        return Err(Malformed::Checksum);
    }
    Ok(ParsedKey { key, id })
}

/// Whether `id` is a well-formed key id (16 base32 characters of 10 bytes).
pub fn is_id(id: &str) -> bool {
    id.len() == ID_CHARS && base32::decode(id).is_some_and(|b| b.len() == 10)
}

/// The key made of `id_bytes` and `secret_bytes`, with its checksum.
pub fn assemble(id_bytes: &[u8; 10], secret_bytes: &[u8; 32]) -> String {
    let body = format!(
        "{PREFIX}{}_{}",
        base32::encode(id_bytes),
        base32::encode(secret_bytes)
    );
    let crc = base32::encode(&crc32fast::hash(body.as_bytes()).to_be_bytes());
    format!("{body}_{crc}")
}

/// A new key from the system's secure random source.
pub fn generate() -> Result<String, String> {
    let rng = ring::rand::SystemRandom::new();
    let mut id = [0u8; 10];
    let mut secret = [0u8; 32];
    rng.fill(&mut id)
        .and_then(|()| rng.fill(&mut secret))
        .map_err(|_| "the system's random source failed".to_string())?;
    Ok(assemble(&id, &secret))
}

/// Hex of a digest, as api_keys.json writes it.
pub fn to_hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A digest from 64 lowercase or uppercase hex characters.
pub fn from_hex(s: &str) -> Option<Digest> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_parses() {
        let key = generate().unwrap();
        assert_eq!(key.len(), KEY_CHARS);
        let parsed = parse(&key).unwrap();
        assert_eq!(parsed.id, &key[4..20]);
        assert!(is_id(parsed.id));
        assert_ne!(generate().unwrap(), key);
    }

    #[test]
    fn the_checksum_is_the_crc32_of_the_rest() {
        let key = assemble(&[0; 10], &[0; 32]);
        let body = &key[..KEY_CHARS - CRC_CHARS - 1];
        assert_eq!(body, format!("esk_{}_{}", "a".repeat(16), "a".repeat(52)));
        let crc = crc32fast::hash(body.as_bytes());
        assert_eq!(&key[KEY_CHARS - CRC_CHARS..], base32::encode(&crc.to_be_bytes()));
    }

    #[test]
    fn malformed_keys_are_refused() {
        let key = assemble(&[7; 10], &[9; 32]);
        assert!(parse(&key).is_ok());
        let flip = |at: usize| {
            let mut b = key.clone().into_bytes();
            b[at] = if b[at] == b'a' { b'b' } else { b'a' };
            String::from_utf8(b).unwrap()
        };
        // A changed id or secret character: the checksum no longer holds.
        assert_eq!(parse(&flip(4)), Err(Malformed::Checksum), "first id char");
        assert_eq!(parse(&flip(21)), Err(Malformed::Checksum), "first secret char");
        assert_eq!(parse(&flip(72)), Err(Malformed::Checksum), "last secret char");
        let cases = [
            String::new(),
            "esk_".into(),
            key[..80].to_string(),
            format!("{key}a"),
            key.replacen("esk_", "esx_", 1),
            key.to_uppercase(),
            key.replace('_', "-"),
            format!("{}é", &key[..79]),
            format!("esk_{}_{}__{}", "a".repeat(16), "a".repeat(51), "a".repeat(7)),
        ];
        for bad in cases {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hex_round_trips() {
        let d = digest("x");
        assert_eq!(from_hex(&to_hex(&d)), Some(d));
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(&"é".repeat(32)), None);
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(s in ".{0,100}") {
            let _ = parse(&s);
        }

        #[test]
        fn parsing_near_keys_never_panics(i in 0usize..81, c in proptest::char::any()) {
            let key = assemble(&[1; 10], &[2; 32]);
            let mut chars: Vec<char> = key.chars().collect();
            chars[i] = c;
            let s: String = chars.into_iter().collect();
            let _ = parse(&s);
        }
    }
}
