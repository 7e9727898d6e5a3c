//! The registry's routes: method and path to a [`RegistryOp`], run on the
//! shard that owns `_schemas/0`; answers in Confluent's content type, and
//! every error as `{"error_code": <int>, "message": "..."}` with the
//! status its code leads with (error.rs, `ErrorCode::confluent`).

use std::convert::Infallible;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::path::{self, Query};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::limits::{REGISTRY_BODY_BYTES_PER_SCHEMA_BYTE, REGISTRY_BODY_BYTES_SLACK};
use crate::listen::http::response::{self, Body};
use crate::listen::http::Conn;
use crate::registry::level::{Level, Mode};
use crate::registry::request::{NewSchema, ReferenceInput, RegistryOp, VersionRef};
use crate::registry::schema::SchemaType;
use crate::registry::TOPIC;
use crate::shard::message::{Op, Reply};
use crate::shard::Shard;

/// What every answer is sent as.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";
/// The `WWW-Authenticate` value of a 401 on this listener.
const CHALLENGE: &str = "Basic realm=\"es-registry\"";

/// Answers one request, a panic in its handling contained as on the HTTP
/// listener (`listener::guarded`).
pub async fn route(
    shard: Rc<Shard>,
    _conn: Rc<Conn>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let what = move || format!("{method} {}", uri.path());
    match crate::listen::listener::guarded("registry", what, routed(shard, req)).await {
        Ok(resp) => Ok(resp),
        Err(()) => {
            let mut resp = error(&ApiError::internal(
                "the broker failed while handling this request (a bug; its log says more)",
            ));
            resp.headers_mut().insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("close"),
            );
            Ok(resp)
        }
    }
}

async fn routed(shard: Rc<Shard>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let (endpoint, result) = match crate::listen::http::auth::principal(&shard, req.headers()) {
        Ok(p) => dispatch(&shard, &p, req).await,
        Err(e) => ("unauthenticated", Err(e)),
    };
    let mut resp = result.unwrap_or_else(|e| error(&e));
    let status = resp.status();
    if status == StatusCode::UNAUTHORIZED {
        metrics::counter!("es_auth_unauthenticated_total", "listener" => "registry").increment(1);
        resp.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static(CHALLENGE),
        );
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE || status == StatusCode::REQUEST_TIMEOUT {
        // A body refused midway was not read to its end.
        resp.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    let status = status.as_u16().to_string();
    metrics::counter!("es_registry_requests_total", "endpoint" => endpoint, "status" => status).increment(1);
    metrics::histogram!("es_registry_request_duration_seconds", "endpoint" => endpoint)
        .record(started.elapsed().as_secs_f64());
    resp
}

type Handled = (&'static str, Result<Response<Body>, ApiError>);

async fn dispatch(shard: &Rc<Shard>, p: &Principal, req: Request<Incoming>) -> Handled {
    let path = req.uri().path().to_string();
    let q = Query::parse(req.uri().query());
    let method = req.method().clone();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let segments: &[&str] = if segments == [""] { &[] } else { &segments };
    use RegistryOp as R;
    let (endpoint, op): (&'static str, Result<RegistryOp, ApiError>) = match (segments, &method) {
        ([], &Method::GET) => return ("root", Ok(ok(json!({})))),
        (["schemas", "types"], &Method::GET) => {
            let types: Vec<&str> = SchemaType::SUPPORTED.iter().map(|t| t.as_str()).collect();
            return ("schema_types", Ok(ok(json!(types))));
        }
        (["schemas", "guids", _], &Method::GET) => {
            return (
                "schema_by_guid",
                Err(ApiError::new(
                    ErrorCode::SchemaNotFound,
                    "es gives schemas no GUIDs: look schemas up by id",
                )),
            )
        }
        (["subjects"], &Method::GET) => (
            "list_subjects",
            Ok(R::Subjects {
                prefix: q
                    .get("subjectPrefix")
                    .or(q.get("subject"))
                    .unwrap_or("")
                    .to_string(),
                deleted: q.flag("deleted"),
                deleted_only: q.flag("deleted_only") || q.flag("deletedOnly"),
            }),
        ),
        (["subjects", s], &Method::POST) => (
            "lookup",
            match (path::subject(s), body_schema(shard, req, &q).await) {
                (Ok(subject), Ok(schema)) => Ok(R::Lookup {
                    subject,
                    schema,
                    deleted: q.flag("deleted"),
                }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        ),
        (["subjects", s], &Method::DELETE) => (
            "delete_subject",
            path::subject(s).map(|subject| R::DeleteSubject {
                subject,
                permanent: q.flag("permanent"),
            }),
        ),
        (["subjects", s, "versions"], &Method::GET) => (
            "versions",
            path::subject(s).map(|subject| R::Versions {
                subject,
                deleted: q.flag("deleted"),
            }),
        ),
        (["subjects", s, "versions"], &Method::POST) => (
            "register",
            match (path::subject(s), body_schema(shard, req, &q).await) {
                (Ok(subject), Ok(schema)) => Ok(R::Register { subject, schema }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        ),
        (["subjects", s, "versions", v], &Method::GET) => (
            "version",
            subject_version(s, v).map(|(subject, version)| R::Version {
                subject,
                version,
                deleted: q.flag("deleted"),
            }),
        ),
        (["subjects", s, "versions", v, "schema"], &Method::GET) => (
            "version_schema",
            subject_version(s, v).map(|(subject, version)| R::Version {
                subject,
                version,
                deleted: q.flag("deleted"),
            }),
        ),
        (["subjects", s, "versions", v, "referencedby"], &Method::GET) => (
            "referenced_by",
            subject_version(s, v).map(|(subject, version)| R::ReferencedBy { subject, version }),
        ),
        (["subjects", s, "versions", v], &Method::DELETE) => (
            "delete_version",
            subject_version(s, v).map(|(subject, version)| R::DeleteVersion {
                subject,
                version,
                permanent: q.flag("permanent"),
            }),
        ),
        (["schemas"], &Method::GET) => ("list_schemas", schemas_query(&q)),
        (["contexts"], &Method::GET) => return ("contexts", Ok(ok(json!(["."])))),
        (["schemas", "ids", id], &Method::GET) => {
            ("schema_by_id", path::id(id).map(|id| R::SchemaById { id }))
        }
        (["schemas", "ids", id, "schema"], &Method::GET) => {
            ("schema_by_id_raw", path::id(id).map(|id| R::SchemaById { id }))
        }
        (["schemas", "ids", id, "subjects"], &Method::GET) => (
            "subjects_by_id",
            path::id(id).map(|id| R::SubjectsById {
                id,
                deleted: q.flag("deleted"),
            }),
        ),
        (["schemas", "ids", id, "versions"], &Method::GET) => (
            "versions_by_id",
            path::id(id).map(|id| R::VersionsById {
                id,
                deleted: q.flag("deleted"),
            }),
        ),
        (["config"], &Method::GET) => (
            "get_config",
            Ok(R::GetConfig {
                subject: None,
                default_to_global: true,
            }),
        ),
        (["config", s], &Method::GET) => (
            "get_config",
            path::subject(s).map(|s| R::GetConfig {
                subject: Some(s),
                default_to_global: q.flag("defaultToGlobal"),
            }),
        ),
        (["config"], &Method::PUT) => ("set_config", body_level(shard, req, None).await),
        (["config", s], &Method::PUT) => (
            "set_config",
            match path::subject(s) {
                Ok(s) => body_level(shard, req, Some(s)).await,
                Err(e) => Err(e),
            },
        ),
        (["config"], &Method::DELETE) => ("delete_config", Ok(R::DeleteConfig { subject: None })),
        (["config", s], &Method::DELETE) => (
            "delete_config",
            path::subject(s).map(|s| R::DeleteConfig { subject: Some(s) }),
        ),
        (["compatibility", "subjects", s, "versions", v], &Method::POST) => (
            "check",
            match (subject_version(s, v), body_schema(shard, req, &q).await) {
                (Ok((subject, version)), Ok(schema)) => Ok(R::Check {
                    subject,
                    version,
                    schema,
                    verbose: q.flag("verbose"),
                }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        ),
        (["compatibility", "subjects", s, "versions"], &Method::POST) => (
            "check",
            match (path::subject(s), body_schema(shard, req, &q).await) {
                (Ok(subject), Ok(schema)) => Ok(R::Check {
                    subject,
                    version: VersionRef::Latest,
                    schema,
                    verbose: q.flag("verbose"),
                }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        ),
        (["mode"], &Method::GET) => ("get_mode", Ok(R::GetMode)),
        (["mode"], &Method::PUT) => ("set_mode", body_mode(shard, req, q.flag("force")).await),
        _ => {
            return (
                "not_found",
                Err(ApiError::new(
                    ErrorCode::NotFound,
                    format!("no such endpoint: {method} {path}"),
                )),
            )
        }
    };
    let op = match op {
        Ok(op) => op,
        Err(e) => return (endpoint, Err(e)),
    };
    let raw = matches!(endpoint, "version_schema" | "schema_by_id_raw");
    let reply = shard
        .call(
            shard.owner(TOPIC, 0),
            Op::Registry {
                op,
                caller: p.clone(),
            },
        )
        .await;
    let value = match reply {
        Reply::Json(Ok(v)) => v,
        Reply::Json(Err(e)) | Reply::Done(Err(e)) => return (endpoint, Err(e)),
        other => {
            return (
                endpoint,
                Err(ApiError::internal(format!("unexpected reply {other:?}"))),
            )
        }
    };
    if raw {
        let schema = value.get("schema").and_then(Value::as_str).unwrap_or_default();
        return (endpoint, Ok(bytes(StatusCode::OK, schema.as_bytes().to_vec())));
    }
    (endpoint, Ok(ok(value)))
}

fn subject_version(s: &str, v: &str) -> Result<(String, VersionRef), ApiError> {
    Ok((path::subject(s)?, path::version(v)?))
}

/// The request's body, read up to the registry's limit (a larger one is a
/// schema too large, 42209), parsed as a JSON object.
async fn body_object(
    shard: &Shard,
    req: Request<Incoming>,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let schema_max = shard.config.registry.registry_schema_bytes_max;
    let limit = schema_max * REGISTRY_BODY_BYTES_PER_SCHEMA_BYTE + REGISTRY_BODY_BYTES_SLACK;
    let too_large = |got: String| {
        ApiError::new(
            ErrorCode::SchemaTooLarge,
            format!("the request body is {got} bytes, more than a schema of at most {schema_max} bytes (--registry-schema-bytes-max) takes"),
        )
    };
    if let Some(n) = req.body().size_hint().exact().filter(|n| *n > limit as u64) {
        return Err(too_large(n.to_string()));
    }
    let body = response::read_body_up_to(shard, req.into_body(), limit)
        .await
        .map_err(|e| {
            if e.code == ErrorCode::PayloadTooLarge {
                too_large(format!("over {limit}"))
            } else {
                e
            }
        })?;
    let v: Value = response::parse(&body)?;
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::invalid("the request body must be a JSON object")),
    }
}

/// `{"schema", "schemaType"?, "references"?}` of a register, lookup or
/// check.
async fn body_schema(shard: &Shard, req: Request<Incoming>, q: &Query) -> Result<NewSchema, ApiError> {
    let body = body_object(shard, req).await?;
    let invalid = |why: &str| ApiError::new(ErrorCode::InvalidSchema, why.to_string());
    let schema = match body.get("schema") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => return Err(invalid("Empty schema")),
        Some(_) => return Err(invalid("\"schema\" must be a string holding the schema")),
    };
    let max = shard.config.registry.registry_schema_bytes_max;
    if schema.len() > max {
        return Err(crate::registry::service::too_large(schema.len(), max));
    }
    let schema_type = match body.get("schemaType") {
        None | Some(Value::Null) => SchemaType::parse(None)?,
        Some(Value::String(t)) => SchemaType::parse(Some(t))?,
        Some(_) => return Err(invalid("\"schemaType\" must be a string")),
    };
    let references = match body.get("references") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(refs)) => refs
            .iter()
            .map(|r| {
                let name = r.get("name").and_then(Value::as_str);
                let subject = r.get("subject").and_then(Value::as_str);
                let version = r.get("version").and_then(Value::as_i64);
                match (name, subject, version) {
                    (Some(name), Some(subject), Some(version)) => Ok(ReferenceInput {
                        name: name.to_string(),
                        subject: subject.to_string(),
                        version,
                    }),
                    _ => Err(invalid("a reference is {\"name\", \"subject\", \"version\"}")),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("\"references\" must be an array")),
    };
    // A registration in IMPORT mode names the id and version to keep.
    let number = |name: &str, code: ErrorCode| -> Result<Option<u32>, ApiError> {
        match body.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=i32::MAX as u64).contains(n))
                .map(|n| Some(n as u32))
                .ok_or_else(|| ApiError::new(code, format!("\"{name}\" must be 1 to 2147483647, got {v}"))),
        }
    };
    Ok(NewSchema {
        schema_type,
        schema,
        references,
        normalize: q.flag("normalize"),
        id: number("id", ErrorCode::InvalidSchema)?,
        version: number("version", ErrorCode::InvalidVersion)?,
    })
}

/// `{"compatibility": LEVEL}` (or `compatibilityLevel`) of a config change.
async fn body_level(
    shard: &Shard,
    req: Request<Incoming>,
    subject: Option<String>,
) -> Result<RegistryOp, ApiError> {
    if let Some(s) = &subject {
        crate::registry::service::check_subject(s)?;
    }
    let body = body_object(shard, req).await?;
    let level = body
        .get("compatibility")
        .or(body.get("compatibilityLevel"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidCompatibilityLevel,
                "the body must be {\"compatibility\": LEVEL}",
            )
        })?;
    Ok(RegistryOp::SetConfig {
        subject,
        level: Level::parse(level)?,
    })
}

/// `{"mode": MODE}` of a mode change.
async fn body_mode(shard: &Shard, req: Request<Incoming>, force: bool) -> Result<RegistryOp, ApiError> {
    let body = body_object(shard, req).await?;
    let mode = body
        .get("mode")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidMode, "the body must be {\"mode\": MODE}"))?;
    Ok(RegistryOp::SetMode {
        mode: Mode::parse(mode)?,
        force,
    })
}

fn ok(v: Value) -> Response<Body> {
    bytes(
        StatusCode::OK,
        serde_json::to_vec(&v).expect("JSON values serialize"),
    )
}

fn bytes(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", CONTENT_TYPE)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}

/// Confluent's error body, with the status its code leads with.
fn error(e: &ApiError) -> Response<Body> {
    let body = json!({"error_code": e.code.confluent(), "message": e.message});
    bytes(
        response::status(e.code),
        serde_json::to_vec(&body).expect("JSON values serialize"),
    )
}

/// `GET /schemas`'s query: `subjectPrefix`, `deleted`, `latestOnly`,
/// `offset` (from 0) and `limit` (-1 or absent: as many as one answer
/// holds).
fn schemas_query(q: &Query) -> Result<RegistryOp, ApiError> {
    let number = |name: &str, absent: i64| -> Result<i64, ApiError> {
        match q.get(name) {
            None | Some("") => Ok(absent),
            Some(v) => v.parse::<i64>().ok().filter(|n| *n >= -1).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!("{name} must be a whole number, got {v:?}"),
                )
            }),
        }
    };
    let offset = number("offset", 0)?.max(0) as usize;
    let limit = number("limit", -1)?;
    Ok(RegistryOp::Schemas {
        prefix: q.get("subjectPrefix").unwrap_or("").to_string(),
        deleted: q.flag("deleted"),
        latest_only: q.flag("latestOnly"),
        offset,
        limit: (limit >= 0).then_some(limit as usize),
    })
}
