//! What a registry request asks of the shard that owns `_schemas`, parsed
//! by the listener (listen/registry/): owned data only, as it crosses the
//! mesh. Each answers a JSON value (the `/schema` paths: a JSON string,
//! which the listener writes raw).

use super::level::{Level, Mode};
use super::schema::SchemaType;

/// A version as a path names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionRef {
    /// `latest` (or `-1`): the newest live version.
    Latest,
    Number(u32),
}

/// A reference as a client sends it (`version` -1: the latest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceInput {
    pub name: String,
    pub subject: String,
    pub version: i64,
}

/// A schema as a client sends it to register, look up or check.
#[derive(Debug, Clone)]
pub struct NewSchema {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<ReferenceInput>,
    /// `?normalize=true`: store and compare the schema's canonical form.
    pub normalize: bool,
    /// `"id"` of a registration in IMPORT mode: the id to keep.
    pub id: Option<u32>,
    /// `"version"` of a registration in IMPORT mode: the version to keep.
    pub version: Option<u32>,
}

#[derive(Debug)]
pub enum RegistryOp {
    Subjects {
        prefix: String,
        deleted: bool,
        deleted_only: bool,
    },
    Versions {
        subject: String,
        deleted: bool,
    },
    Version {
        subject: String,
        version: VersionRef,
        deleted: bool,
    },
    ReferencedBy {
        subject: String,
        version: VersionRef,
    },
    Lookup {
        subject: String,
        schema: NewSchema,
        deleted: bool,
    },
    Check {
        subject: String,
        version: VersionRef,
        schema: NewSchema,
        verbose: bool,
    },
    /// `GET /schemas`: every (subject, version) whose subject starts with
    /// `prefix`, in subject then version order, from the `offset`-th on.
    Schemas {
        prefix: String,
        deleted: bool,
        latest_only: bool,
        offset: usize,
        /// At most this many; `None`: as many as one answer holds.
        limit: Option<usize>,
    },
    SchemaById {
        id: u32,
    },
    SubjectsById {
        id: u32,
        deleted: bool,
    },
    VersionsById {
        id: u32,
        deleted: bool,
    },
    GetConfig {
        subject: Option<String>,
        default_to_global: bool,
    },
    GetMode,
    Register {
        subject: String,
        schema: NewSchema,
    },
    DeleteSubject {
        subject: String,
        permanent: bool,
    },
    DeleteVersion {
        subject: String,
        version: VersionRef,
        permanent: bool,
    },
    SetConfig {
        subject: Option<String>,
        level: Level,
    },
    DeleteConfig {
        subject: Option<String>,
    },
    SetMode {
        mode: Mode,
        /// `?force=true`: IMPORT even though the registry holds subjects.
        force: bool,
    },
}

impl RegistryOp {
    /// Whether it changes the registry (and so runs to its end once
    /// started, one change at a time).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            RegistryOp::Register { .. }
                | RegistryOp::DeleteSubject { .. }
                | RegistryOp::DeleteVersion { .. }
                | RegistryOp::SetConfig { .. }
                | RegistryOp::DeleteConfig { .. }
                | RegistryOp::SetMode { .. }
        )
    }

    /// The subject it names, if any.
    pub fn subject(&self) -> Option<&str> {
        use RegistryOp as R;
        match self {
            R::Versions { subject, .. }
            | R::Version { subject, .. }
            | R::ReferencedBy { subject, .. }
            | R::Lookup { subject, .. }
            | R::Check { subject, .. }
            | R::Register { subject, .. }
            | R::DeleteSubject { subject, .. }
            | R::DeleteVersion { subject, .. } => Some(subject),
            R::GetConfig { subject, .. } | R::SetConfig { subject, .. } | R::DeleteConfig { subject } => {
                subject.as_deref()
            }
            R::Subjects { .. }
            | R::Schemas { .. }
            | R::SchemaById { .. }
            | R::SubjectsById { .. }
            | R::VersionsById { .. }
            | R::GetMode
            | R::SetMode { .. } => None,
        }
    }
}
