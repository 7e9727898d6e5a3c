//! Who a request is from, and the checks each operation makes
//! (docs/security.md, "Operation matrix"). Every listener authenticates
//! its requests into a `Principal` and calls these before the operation:
//! authorization comes before existence, so a missing grant is 403 whether
//! or not the name exists.
//!
//! The principal is also what per-key quotas charge (quota.rs): it is in
//! hand on every request of both listeners.

use std::sync::Arc;

use super::grants::{Operation, Resource};
use super::table::{KeyEntry, Refused};
use crate::error::{ApiError, ErrorCode};

/// The identity a request runs as.
#[derive(Debug, Clone, Default)]
pub enum Principal {
    /// `--auth disabled`: every operation is allowed, nothing is owned.
    #[default]
    Anonymous,
    /// An authenticated key.
    Key(Arc<KeyEntry>),
}

impl Principal {
    /// The key, if any.
    pub fn key(&self) -> Option<&Arc<KeyEntry>> {
        match self {
            Principal::Anonymous => None,
            Principal::Key(k) => Some(k),
        }
    }

    /// The key id, as ownership records it.
    pub fn id(&self) -> Option<&str> {
        self.key().map(|k| k.id.as_str())
    }

    /// Whether everything is allowed: auth disabled, or an admin key.
    pub fn is_admin(&self) -> bool {
        self.key().is_none_or(|k| k.admin)
    }

    pub fn allows(&self, op: Operation, resource: Resource, name: &str) -> bool {
        // The registry's topic: reads follow grants; anything else through
        // the topic API takes an admin key, whatever a grant says (the
        // broker's registry code writes it without asking).
        if resource == Resource::Topic
            && name == crate::registry::TOPIC
            && !matches!(op, Operation::Read | Operation::Describe)
        {
            return self.is_admin();
        }
        self.key().is_none_or(|k| k.allows(op, resource, name))
    }

    /// `forbidden` unless the key may do `op` on `resource` `name`.
    pub fn require(&self, op: Operation, resource: Resource, name: &str) -> Result<(), ApiError> {
        if self.allows(op, resource, name) {
            return Ok(());
        }
        Err(forbidden(self, op, resource, name))
    }

    /// `create` on topic `name`, or `create` on the cluster.
    pub fn require_create_topic(&self, name: &str) -> Result<(), ApiError> {
        if name != crate::registry::TOPIC && self.allows(Operation::Create, Resource::Cluster, "") {
            return Ok(());
        }
        self.require(Operation::Create, Resource::Topic, name)
    }

    /// `write` on at least one topic grant: what a new producer id needs
    /// (KIP-679: no separate idempotent-write operation).
    pub fn require_some_topic_write(&self) -> Result<(), ApiError> {
        let Some(k) = self.key() else { return Ok(()) };
        if k.admin
            || k.grants
                .iter()
                .any(|g| g.resource == Resource::Topic && g.operations.contains(&Operation::Write))
        {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "key {} may not init a producer id: it needs write on some topic",
                k.id
            ),
        ))
    }

    /// `forbidden` unless this is an admin key (or auth is disabled).
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.is_admin() {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "key {} may not {what}: it takes an admin key",
                self.id().unwrap_or("-")
            ),
        ))
    }
}

/// `key q3x7… may not write topic "orders-eu"`.
fn forbidden(p: &Principal, op: Operation, resource: Resource, name: &str) -> ApiError {
    let id = p.id().unwrap_or("-");
    let message = if resource == Resource::Cluster {
        format!("key {id} may not {} the cluster", op.as_str())
    } else {
        format!("key {id} may not {} {} {name:?}", op.as_str(), resource.as_str())
    };
    ApiError::new(ErrorCode::Forbidden, message)
}

/// The 401 for a refused key.
pub fn unauthenticated(refused: Refused) -> ApiError {
    ApiError::new(ErrorCode::Unauthenticated, refused.message())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::grants::{Grant, Pattern};

    #[test]
    fn forbidden_names_key_operation_and_resource() {
        let entry = KeyEntry {
            id: "q3x7k2m5w4a6b2cd".into(),
            name: "n".into(),
            digest: [0; 32],
            admin: false,
            grants: vec![Grant {
                resource: Resource::Topic,
                pattern: Pattern::Prefixed,
                name: "orders.".into(),
                operations: vec![Operation::Read],
            }],
            quota: Default::default(),
            created_at_ms: 0,
            created_by: None,
            revoked_at_ms: None,
            revoked: Default::default(),
            runtime: Default::default(),
        };
        let p = Principal::Key(Arc::new(entry));
        assert!(p
            .require(Operation::Describe, Resource::Topic, "orders.eu")
            .is_ok());
        let e = p
            .require(Operation::Write, Resource::Topic, "orders-eu")
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert_eq!(
            e.message,
            "key q3x7k2m5w4a6b2cd may not write topic \"orders-eu\""
        );
        assert!(p.require_create_topic("orders.x").is_err());
        // The registry's topic: a grant on every topic does not reach it,
        // but for reads.
        let everything = Principal::Key(Arc::new(KeyEntry {
            grants: vec![Grant {
                resource: Resource::Topic,
                pattern: Pattern::Literal,
                name: "*".into(),
                operations: Operation::ALL.to_vec(),
            }],
            id: "q3x7k2m5w4a6b2ce".into(),
            name: "n".into(),
            digest: [0; 32],
            admin: false,
            quota: Default::default(),
            created_at_ms: 0,
            created_by: None,
            revoked_at_ms: None,
            revoked: Default::default(),
            runtime: Default::default(),
        }));
        for op in [
            Operation::Write,
            Operation::Delete,
            Operation::Alter,
            Operation::Create,
        ] {
            assert!(!everything.allows(op, Resource::Topic, "_schemas"), "{op:?}");
        }
        assert!(everything.allows(Operation::Read, Resource::Topic, "_schemas"));
        assert!(everything.allows(Operation::Write, Resource::Topic, "_schemas2"));
        assert!(everything.require_create_topic("_schemas").is_err());
        assert!(Principal::Anonymous.allows(Operation::Write, Resource::Topic, "_schemas"));
        assert!(p.require_admin("manage keys").is_err());
        assert!(Principal::Anonymous.require_admin("manage keys").is_ok());
    }
}
