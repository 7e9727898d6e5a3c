//! Grants as stored and checked: what a key may do, as an allow-only list
//! of `{resource, pattern, name, operations}` (docs/security.md,
//! "Grants"). `read`, `write`, `delete` and `alter` imply `describe`.
//! Reading a client's grants (with `all` and the name limits) is the
//! broker's (`broker/src/auth/grants.rs`).

use serde::{Deserialize, Serialize};

/// What a grant is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    Topic,
    Group,
    Subject,
    Cluster,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Topic => "topic",
            Resource::Group => "group",
            Resource::Subject => "subject",
            Resource::Cluster => "cluster",
        }
    }
}

/// How a grant's name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Byte equality; `*` matches every name.
    Literal,
    /// The name starts with these bytes (no segment rules: `orders`
    /// matches `orders-eu` and `ordersX`).
    Prefixed,
}

/// One operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Read,
    Write,
    Create,
    Delete,
    Describe,
    Alter,
}

impl Operation {
    pub const ALL: [Operation; 6] = [
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Describe,
        Operation::Alter,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Write => "write",
            Operation::Create => "create",
            Operation::Delete => "delete",
            Operation::Describe => "describe",
            Operation::Alter => "alter",
        }
    }

    /// The operation named `s` (`read`, ...; not `all`).
    pub fn parse(s: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Whether holding `self` grants `wanted`: itself, and `describe` for
    /// `read`, `write`, `delete` and `alter` (Kafka's implied operations).
    pub fn implies(self, wanted: Operation) -> bool {
        self == wanted
            || (wanted == Operation::Describe
                && matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ))
    }
}

/// A checked grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub resource: Resource,
    pub pattern: Pattern,
    /// Empty for `cluster`.
    #[serde(default)]
    pub name: String,
    pub operations: Vec<Operation>,
}

impl Grant {
    /// Whether this grant allows `op` on `resource` `name`.
    pub fn allows(&self, op: Operation, resource: Resource, name: &str) -> bool {
        self.resource == resource && self.operations.iter().any(|o| o.implies(op)) && self.matches(name)
    }

    fn matches(&self, name: &str) -> bool {
        if self.resource == Resource::Cluster {
            return true;
        }
        match self.pattern {
            Pattern::Literal => self.name == "*" || self.name == name,
            Pattern::Prefixed => !self.name.is_empty() && name.as_bytes().starts_with(self.name.as_bytes()),
        }
    }
}
