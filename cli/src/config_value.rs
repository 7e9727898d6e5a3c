//! Topic config entries from the command line: `key=value`, where `null`
//! clears a key and a value that parses as an integer is sent as one.

use std::str::FromStr;

use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq)]
pub struct ConfigPair {
    pub key: String,
    pub value: Value,
}

impl FromStr for ConfigPair {
    type Err = String;

    fn from_str(s: &str) -> Result<ConfigPair, String> {
        let (key, raw) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not key=value (e.g. segment_bytes=1048576)"))?;
        if key.is_empty() {
            return Err(format!("{s:?} has an empty key"));
        }
        Ok(ConfigPair {
            key: key.to_string(),
            value: parse_value(raw),
        })
    }
}

fn parse_value(raw: &str) -> Value {
    if raw == "null" {
        Value::Null
    } else if let Ok(n) = raw.parse::<i64>() {
        Value::from(n)
    } else if let Ok(n) = raw.parse::<u64>() {
        Value::from(n)
    } else {
        Value::String(raw.to_string())
    }
}

/// The entries as a JSON object (a later entry for the same key wins).
pub fn to_object(pairs: &[ConfigPair]) -> Map<String, Value> {
    pairs.iter().map(|p| (p.key.clone(), p.value.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        let p: ConfigPair = "segment_bytes=1048576".parse().unwrap();
        assert_eq!(p.value, Value::from(1048576));
        assert_eq!(
            "segment_ms=null".parse::<ConfigPair>().unwrap().value,
            Value::Null
        );
        assert_eq!("x=-5".parse::<ConfigPair>().unwrap().value, Value::from(-5));
        assert_eq!(
            "x=18446744073709551615".parse::<ConfigPair>().unwrap().value,
            Value::from(u64::MAX)
        );
        assert_eq!("x=1.5".parse::<ConfigPair>().unwrap().value, Value::from("1.5"));
        assert_eq!("x=a=b".parse::<ConfigPair>().unwrap().value, Value::from("a=b"));
        assert_eq!("x=".parse::<ConfigPair>().unwrap().value, Value::from(""));
        assert!("novalue".parse::<ConfigPair>().is_err());
        assert!("=1".parse::<ConfigPair>().is_err());
    }
}
