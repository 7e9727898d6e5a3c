//! Grants as a client writes them: checked into es-keys' stored grants
//! (`{resource, pattern, name, operations}`, docs/security.md, "Grants"),
//! `all` in input being all six operations. The types and their matching
//! are es-keys' (`broker/keys/src/grants.rs`), shared with es-tools.

use serde::Deserialize;

pub use es_keys::grants::{Grant, Operation, Pattern, Resource};

use crate::error::ApiError;
use crate::limits;

/// A grant as a client writes it: operations may say `all`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantInput {
    resource: String,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    name: Option<String>,
    operations: Vec<String>,
}

/// Checks a client's `grants` array: each resource, pattern, name and
/// operation known and within its limits. `invalid_request` says which
/// grant is wrong and why.
pub fn parse_grants(v: &serde_json::Value) -> Result<Vec<Grant>, ApiError> {
    let serde_json::Value::Array(items) = v else {
        return Err(ApiError::invalid("\"grants\" must be an array of grants"));
    };
    if items.len() > limits::GRANTS_PER_KEY_MAX {
        return Err(ApiError::invalid(format!(
            "a key has at most {} grants, got {}",
            limits::GRANTS_PER_KEY_MAX,
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, g)| parse_grant(g).map_err(|e| ApiError::invalid(format!("grants[{i}]: {e}"))))
        .collect()
}

fn parse_grant(v: &serde_json::Value) -> Result<Grant, String> {
    let input: GrantInput = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let resource = match input.resource.as_str() {
        "topic" => Resource::Topic,
        "group" => Resource::Group,
        "subject" => Resource::Subject,
        "cluster" => Resource::Cluster,
        other => {
            return Err(format!(
                "unknown resource {other:?} (topic, group, subject or cluster)"
            ))
        }
    };
    let pattern = match input.pattern.as_deref() {
        None | Some("literal") => Pattern::Literal,
        Some("prefixed") => Pattern::Prefixed,
        Some(other) => return Err(format!("unknown pattern {other:?} (literal or prefixed)")),
    };
    let mut operations = Vec::new();
    for op in &input.operations {
        if op == "all" {
            operations.extend(Operation::ALL);
        } else {
            operations.push(Operation::parse(op).ok_or_else(|| {
                format!("unknown operation {op:?} (read, write, create, delete, describe, alter or all)")
            })?);
        }
    }
    if operations.is_empty() {
        return Err("a grant needs at least one operation".into());
    }
    operations.sort();
    operations.dedup();
    let name = input.name.unwrap_or_default();
    if resource == Resource::Cluster {
        if !name.is_empty() {
            return Err("a cluster grant has no name".into());
        }
        if let Some(op) = operations
            .iter()
            .find(|o| !matches!(o, Operation::Create | Operation::Describe | Operation::Alter))
        {
            return Err(format!(
                "a cluster grant allows create, describe or alter, not {}",
                op.as_str()
            ));
        }
        return Ok(Grant {
            resource,
            pattern: Pattern::Literal,
            name,
            operations,
        });
    }
    if name.is_empty() {
        return Err(match pattern {
            Pattern::Prefixed => "an empty prefix is not allowed: use literal \"*\" for every name".into(),
            Pattern::Literal => "a grant needs a \"name\" (\"*\" for every name)".into(),
        });
    }
    let max = if resource == Resource::Subject {
        limits::SUBJECT_NAME_BYTES_MAX
    } else {
        limits::GRANT_NAME_CHARS_MAX
    };
    if name.len() > max {
        return Err(format!("a {} name is at most {max} bytes", resource.as_str()));
    }
    Ok(Grant {
        resource,
        pattern,
        name,
        operations,
    })
}

#[cfg(test)]
mod tests {
    use super::Operation as O;
    use super::*;
    use serde_json::json;

    fn grant(resource: &str, pattern: &str, name: &str, ops: &[&str]) -> Result<Grant, ApiError> {
        parse_grants(&json!([{"resource": resource, "pattern": pattern, "name": name, "operations": ops}]))
            .map(|mut g| g.remove(0))
    }

    #[test]
    fn prefix_and_literal_matching() {
        let table: &[(&str, &str, &[&str], &[&str])] = &[
            (
                "prefixed",
                "orders",
                &["orders", "orders-eu", "ordersX"],
                &["order", "Orders", "xorders"],
            ),
            (
                "prefixed",
                "orders.",
                &["orders.eu", "orders."],
                &["orders", "orders-eu", "ordersX"],
            ),
            (
                "literal",
                "orders",
                &["orders"],
                &["orders-eu", "order", "Orders"],
            ),
            ("literal", "*", &["orders", "x", "*"], &[]),
        ];
        for resource in [Resource::Topic, Resource::Group] {
            for (pattern, name, yes, no) in table {
                let g = grant(resource.as_str(), pattern, name, &["read"]).unwrap();
                for n in *yes {
                    assert!(g.allows(O::Read, resource, n), "{pattern}:{name} allows {n}");
                }
                for n in *no {
                    assert!(!g.allows(O::Read, resource, n), "{pattern}:{name} refuses {n}");
                }
                let other = if resource == Resource::Topic {
                    Resource::Group
                } else {
                    Resource::Topic
                };
                assert!(!g.allows(O::Read, other, name), "a grant is on its resource only");
            }
        }
    }

    #[test]
    fn implied_operations() {
        for op in [O::Read, O::Write, O::Delete, O::Alter] {
            assert!(op.implies(O::Describe), "{op:?}");
        }
        assert!(!O::Create.implies(O::Describe));
        for op in O::ALL {
            assert!(op.implies(op));
            if op != O::Describe {
                assert!(!O::Describe.implies(op), "describe does not imply {op:?}");
            }
        }
        assert!(!O::Read.implies(O::Write));
        let g = grant("topic", "literal", "t", &["all"]).unwrap();
        assert_eq!(g.operations.len(), 6);
    }

    #[test]
    fn bad_grants_are_invalid_requests() {
        let bad = [
            json!([{"resource": "topic", "pattern": "prefixed", "name": "", "operations": ["read"]}]),
            json!([{"resource": "topic", "pattern": "prefixed", "operations": ["read"]}]),
            json!([{"resource": "topic", "name": "t", "operations": ["fly"]}]),
            json!([{"resource": "topic", "name": "t", "operations": []}]),
            json!([{"resource": "queue", "name": "t", "operations": ["read"]}]),
            json!([{"resource": "topic", "pattern": "glob", "name": "t", "operations": ["read"]}]),
            json!([{"resource": "cluster", "name": "x", "operations": ["create"]}]),
            json!([{"resource": "cluster", "operations": ["read"]}]),
            json!([{"resource": "topic", "name": "t".repeat(250), "operations": ["read"]}]),
            json!([{"resource": "topic", "name": "t", "operations": ["read"], "extra": 1}]),
            json!({"resource": "topic"}),
            json!([1]),
        ];
        for b in bad {
            let e = parse_grants(&b).unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::InvalidRequest, "{b}");
        }
        let many: Vec<_> = (0..=limits::GRANTS_PER_KEY_MAX)
            .map(|i| json!({"resource": "topic", "name": format!("t{i}"), "operations": ["read"]}))
            .collect();
        assert!(parse_grants(&serde_json::Value::Array(many)).is_err());
        let cluster = parse_grants(&json!([{"resource": "cluster", "operations": ["create"]}])).unwrap();
        assert!(cluster[0].allows(O::Create, Resource::Cluster, ""));
    }
}
