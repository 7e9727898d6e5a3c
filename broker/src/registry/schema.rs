//! Schemas by type: parsing (AVRO with apache-avro, JSON Schema as JSON,
//! PROTOBUF with protox, a protoc in Rust), the fingerprint that tells two
//! registrations of one schema apart from two schemas, and the
//! compatibility check (docs/registry.md, "Compatibility"): AVRO's in
//! full; JSON's and PROTOBUF's are not implemented, and any level but NONE
//! refuses them saying so.

use apache_avro::schema_compatibility::{Compatibility, SchemaCompatibility};
use serde::{Deserialize, Serialize};

use super::level::Level;
use crate::error::{ApiError, ErrorCode};

/// A schema's type; absent in Confluent's JSON means AVRO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    #[default]
    Avro,
    Json,
    Protobuf,
}

impl SchemaType {
    /// The types `GET /schemas/types` lists.
    pub const SUPPORTED: [SchemaType; 3] = [SchemaType::Avro, SchemaType::Json, SchemaType::Protobuf];

    pub fn is_avro(&self) -> bool {
        *self == SchemaType::Avro
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }

    /// Parses `schemaType` (absent: AVRO); 42201 for an unknown type.
    pub fn parse(s: Option<&str>) -> Result<SchemaType, ApiError> {
        match s {
            None | Some("AVRO") => Ok(SchemaType::Avro),
            Some("JSON") => Ok(SchemaType::Json),
            Some("PROTOBUF") => Ok(SchemaType::Protobuf),
            Some(other) => Err(ApiError::new(
                ErrorCode::InvalidSchema,
                format!("unknown schemaType {other:?}: AVRO, JSON or PROTOBUF"),
            )),
        }
    }
}

/// A reference from a schema to a subject's version that defines a type
/// it uses (`name` is how the schema names it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: u32,
}

/// A schema parsed, ready to be checked.
pub enum Parsed {
    Avro(apache_avro::Schema),
    Json,
    Protobuf,
}

/// A referenced schema: the name its referrer uses for it (an Avro type's
/// full name, a `.proto` file's import path) and its text.
pub struct Referenced {
    pub name: String,
    pub text: String,
}

/// Parses `schema` of type `t`; `referenced` holds the schemas it
/// references (transitively, dependencies first). 42201 says why it is
/// not a schema.
pub fn parse(t: SchemaType, schema: &str, referenced: &[Referenced]) -> Result<Parsed, ApiError> {
    let invalid = |why: String| ApiError::new(ErrorCode::InvalidSchema, why);
    match t {
        SchemaType::Avro => {
            let parsed = if referenced.is_empty() {
                apache_avro::Schema::parse_str(schema)
            } else {
                let texts = referenced.iter().map(|r| r.text.as_str());
                apache_avro::Schema::parse_str_with_list(schema, texts).map(|(s, _)| s)
            };
            parsed
                .map(Parsed::Avro)
                .map_err(|e| invalid(format!("invalid AVRO schema: {e}")))
        }
        SchemaType::Json => {
            let v: serde_json::Value = serde_json::from_str(schema)
                .map_err(|e| invalid(format!("invalid JSON schema: not JSON: {e}")))?;
            if v.is_object() || v.is_boolean() {
                Ok(Parsed::Json)
            } else {
                Err(invalid(
                    "invalid JSON schema: a JSON Schema is an object or a boolean".into(),
                ))
            }
        }
        SchemaType::Protobuf => proto::parse(schema, referenced)
            .map(|()| Parsed::Protobuf)
            .map_err(|e| invalid(format!("invalid PROTOBUF schema: {e}"))),
    }
}

/// `.proto` text compiled with protox: the schema as a file of its own
/// (`schema.proto`), its references served by their import names, and
/// Google's well-known types; the result read as a prost-reflect
/// `DescriptorPool`, which checks every name resolves.
mod proto {
    use std::collections::HashMap;

    use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

    use super::Referenced;

    /// The name the registered schema's own file gets.
    const SELF: &str = "es-registry-schema.proto";

    struct Sources(HashMap<String, String>);

    impl FileResolver for Sources {
        fn open_file(&self, name: &str) -> Result<File, protox::Error> {
            match self.0.get(name) {
                Some(text) => File::from_source(name, text),
                None => Err(protox::Error::file_not_found(name)),
            }
        }
    }

    pub fn parse(schema: &str, referenced: &[Referenced]) -> Result<(), String> {
        let mut sources: HashMap<String, String> = referenced
            .iter()
            .map(|r| (r.name.clone(), r.text.clone()))
            .collect();
        sources.insert(SELF.to_string(), schema.to_string());
        let mut resolver = ChainFileResolver::new();
        resolver.add(Sources(sources));
        resolver.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.include_imports(true);
        compiler.open_file(SELF).map_err(|e| e.to_string())?;
        let pool = compiler.descriptor_pool();
        if pool.get_file_by_name(SELF).is_none() {
            return Err("the schema compiled to no file".into());
        }
        Ok(())
    }
}

/// What tells two registrations of one schema from two schemas: its type,
/// its references, and its text with the JSON normalized (whitespace and
/// key order; with `normalize`, an AVRO schema's Parsing Canonical Form,
/// which also drops docs, aliases and defaults). SHA-256 of those.
pub fn fingerprint(
    t: SchemaType,
    schema: &str,
    references: &[Reference],
    parsed: Option<&Parsed>,
    normalize: bool,
) -> [u8; 32] {
    let form = match (normalize, parsed) {
        (true, Some(Parsed::Avro(s))) => s.canonical_form(),
        _ => serde_json::from_str::<serde_json::Value>(schema)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| schema.to_string()),
    };
    let refs = serde_json::to_string(references).expect("references serialize");
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [t.as_str(), "\n", &refs, "\n", &form] {
        ctx.update(part.as_bytes());
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// Checks a new schema against earlier ones (`olds`, newest last: their
/// version and parsed schema) at `level`; the reasons it is not
/// compatible, none when it is.
pub fn incompatibilities(
    level: Level,
    new_type: SchemaType,
    new: &Parsed,
    olds: &[(u32, SchemaType, Parsed)],
) -> Vec<String> {
    if level == Level::None {
        return Vec::new();
    }
    if new_type != SchemaType::Avro {
        return vec![not_implemented(new_type)];
    }
    let Parsed::Avro(new) = new else {
        return vec![not_implemented(new_type)];
    };
    let checked: &[(u32, SchemaType, Parsed)] = if level.transitive() {
        olds
    } else {
        olds.last().map_or(&[], std::slice::from_ref)
    };
    let mut reasons = Vec::new();
    for (version, old_type, old) in checked {
        let Parsed::Avro(old) = old else {
            reasons.push(format!(
                "version {version} is a {} schema, the new one AVRO: a subject's schemas must be of one type under {}",
                old_type.as_str(),
                level.as_str()
            ));
            continue;
        };
        if level.backward() {
            if let Some(why) = can_read(old, new) {
                reasons.push(format!(
                    "the new schema cannot read data written with version {version} ({} needs it): {why}",
                    level.as_str()
                ));
            }
        }
        if level.forward() {
            if let Some(why) = can_read(new, old) {
                reasons.push(format!(
                    "version {version} cannot read data written with the new schema ({} needs it): {why}",
                    level.as_str()
                ));
            }
        }
    }
    reasons
}

/// Why `reader` cannot read what `writer` wrote, if it cannot. A
/// `Partial` answer (an enum lacks symbols, a union only partly overlaps:
/// resolving may fail) counts as incompatible, as Confluent's checker
/// counts it.
fn can_read(writer: &apache_avro::Schema, reader: &apache_avro::Schema) -> Option<String> {
    match SchemaCompatibility::can_read(writer, reader) {
        Ok(Compatibility::Full) => None,
        Ok(Compatibility::Partial) => Some(
            "resolving may fail: an enum lacks some of the writer's symbols, or a union only partly overlaps"
                .into(),
        ),
        Err(e) => Some(e.to_string()),
    }
}

fn not_implemented(t: SchemaType) -> String {
    let name = if t == SchemaType::Json {
        "JSON Schema"
    } else {
        t.as_str()
    };
    format!("{name} compatibility checking is not implemented; set compatibility NONE for this subject")
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;
    const V2_DEFAULT: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}"#;
    const V2_NO_DEFAULT: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string"}]}"#;

    fn avro(s: &str) -> Parsed {
        parse(SchemaType::Avro, s, &[]).unwrap()
    }

    fn check(level: Level, new: &str, olds: &[&str]) -> Vec<String> {
        let olds: Vec<_> = olds
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u32 + 1, SchemaType::Avro, avro(s)))
            .collect();
        incompatibilities(level, SchemaType::Avro, &avro(new), &olds)
    }

    #[test]
    fn backward_needs_defaults_for_new_fields() {
        assert!(check(Level::Backward, V2_DEFAULT, &[V1]).is_empty());
        let why = check(Level::Backward, V2_NO_DEFAULT, &[V1]);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("note"), "{why:?}");
        // Forward: old readers ignore the new field.
        assert!(check(Level::Forward, V2_NO_DEFAULT, &[V1]).is_empty());
        assert!(!check(Level::Full, V2_NO_DEFAULT, &[V1]).is_empty());
        assert!(check(Level::None, V2_NO_DEFAULT, &[V1]).is_empty());
    }

    #[test]
    fn transitive_levels_check_every_version() {
        let v3 = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string"},{"name":"x","type":"int","default":0}]}"#;
        // v3 reads v2 (same fields plus one with a default), not v1.
        assert!(check(Level::Backward, v3, &[V1, V2_NO_DEFAULT]).is_empty());
        assert!(!check(Level::BackwardTransitive, v3, &[V1, V2_NO_DEFAULT]).is_empty());
    }

    #[test]
    fn a_partial_answer_is_incompatible() {
        let e1 = r#"{"type":"enum","name":"E","symbols":["A","B"]}"#;
        let e2 = r#"{"type":"enum","name":"E","symbols":["A"]}"#;
        let why = check(Level::Backward, e2, &[e1]);
        assert!(!why.is_empty(), "an enum lacking a symbol");
        // A reader's enum default reads any symbol it lacks (Avro 1.9's
        // rule, and Confluent's).
        let e2_default = r#"{"type":"enum","name":"E","symbols":["A","OTHER"],"default":"OTHER"}"#;
        assert!(check(Level::Backward, e2_default, &[e1]).is_empty());
    }

    #[test]
    fn json_schemas_parse_and_refuse_checked_levels() {
        assert!(parse(SchemaType::Json, r#"{"type":"object"}"#, &[]).is_ok());
        assert!(parse(SchemaType::Json, "true", &[]).is_ok());
        assert_eq!(
            parse(SchemaType::Json, "[1]", &[])
                .err()
                .unwrap()
                .code
                .confluent(),
            42201
        );
        assert_eq!(
            parse(SchemaType::Json, "{", &[]).err().unwrap().code.confluent(),
            42201
        );
        let why = incompatibilities(Level::Backward, SchemaType::Json, &Parsed::Json, &[]);
        assert!(why[0].contains("not implemented"), "{why:?}");
        assert!(incompatibilities(Level::None, SchemaType::Json, &Parsed::Json, &[]).is_empty());
    }

    #[test]
    fn invalid_avro_is_42201() {
        for bad in ["{", r#"{"type":"record"}"#, r#""nosuchtype""#, "[]x"] {
            let e = parse(SchemaType::Avro, bad, &[]).err().unwrap();
            assert_eq!(e.code.confluent(), 42201, "{bad}");
        }
        assert_eq!(SchemaType::parse(Some("PROTOBUF")).unwrap(), SchemaType::Protobuf);
        assert_eq!(
            SchemaType::parse(Some("XML")).unwrap_err().code.confluent(),
            42201
        );
    }

    #[test]
    fn protobuf_schemas_compile_with_their_references() {
        let order = "syntax = \"proto3\";\npackage shop;\nimport \"item.proto\";\nimport \"google/protobuf/timestamp.proto\";\nmessage Order { int64 id = 1; Item item = 2; google.protobuf.Timestamp at = 3; }\n";
        let item = Referenced {
            name: "item.proto".into(),
            text: "syntax = \"proto3\";\npackage shop;\nmessage Item { string sku = 1; }\n".into(),
        };
        assert!(parse(SchemaType::Protobuf, order, &[item]).is_ok());
        for bad in [
            order, // item.proto is not given
            "syntax = \"proto3\"; message A { int32 x = 1; int32 y = 1; }",
            "message {",
            "syntax = \"proto3\"; message A { Missing m = 1; }",
        ] {
            let e = parse(SchemaType::Protobuf, bad, &[]).err().expect(bad);
            assert_eq!(e.code.confluent(), 42201, "{bad}: {}", e.message);
        }
        let why = incompatibilities(Level::Backward, SchemaType::Protobuf, &Parsed::Protobuf, &[]);
        assert!(
            why[0].contains("PROTOBUF compatibility checking is not implemented"),
            "{why:?}"
        );
    }

    #[test]
    fn fingerprints_ignore_whitespace_not_content() {
        let spaced = r#"{ "type": "record", "name": "Order", "fields": [ {"name": "id", "type": "long"} ] }"#;
        let f = |s: &str, n: bool| fingerprint(SchemaType::Avro, s, &[], Some(&avro(s)), n);
        assert_eq!(f(V1, false), f(spaced, false));
        assert_ne!(f(V1, false), f(V2_DEFAULT, false));
        let doc = r#"{"type":"record","name":"Order","doc":"d","fields":[{"name":"id","type":"long"}]}"#;
        assert_ne!(f(V1, false), f(doc, false));
        assert_eq!(
            f(V1, true),
            f(doc, true),
            "normalize: the canonical form drops docs"
        );
        assert_ne!(
            fingerprint(SchemaType::Json, V1, &[], None, false),
            fingerprint(SchemaType::Avro, V1, &[], None, false)
        );
    }
}
