//! `GET /openapi.json`: the OpenAPI 3.0 description of every endpoint, built
//! from the server's own limits. `scripts/schemathesis` checks the running
//! server against it with generated requests.

use crate::ServerConfig;
use serde_json::{json, Value};

use relay_client::wire::{calls, Call, Part, MAX_MS};

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// A tag: 1-64 characters, no control characters, no commas.
fn tag_schema() -> Value {
    json!({"type": "string", "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f,]{1,64}$"})
}

/// The W3C `traceparent` header a submit may carry.
fn traceparent_header() -> Value {
    json!({"name": "traceparent", "in": "header", "required": false, "schema": {"type": "string"},
        "description": "The W3C trace context of the caller: stored with each job that gives none in its body (an invalid value is passed over, as the W3C recommendation asks)."})
}

fn idempotency_header(batch: bool) -> Value {
    let what = if batch {
        "Makes the batch safe to repeat: each job without an idempotency_key of its own takes this key with `/` and its index after it (`K/0`, `K/1`, ...); a repeat within 24 h answers the first batch's ids and creates nothing."
    } else {
        "Makes the submit safe to repeat: a submit with this key again within 24 h answers 200 with the first submit's job (`existing`) and creates nothing, whatever state that job is in. The same as the body's idempotency_key (given both, the body's counts). If the first submit's job was deleted since, 404."
    };
    json!({"name": "Idempotency-Key", "in": "header", "required": false,
        "schema": {"type": "string", "minLength": 1, "maxLength": 250}, "description": what})
}

fn body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

/// The success response (its schema filled in from the table by
/// [`answers`]) plus every error a call can answer with.
fn responses(ok: &str, errors: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    // Its schema is the answer type's, generated (`answers`).
    out.insert(ok.to_owned(), json!({"description": "success"}));
    for code in errors.iter().chain(["401", "503"].iter()) {
        out.insert(
            (*code).to_owned(),
            json!({"$ref": format!("#/components/responses/E{code}")}),
        );
    }
    Value::Object(out)
}

/// What `Limits::label` accepts: 1-64 characters, no control characters.
fn label() -> Value {
    json!({"type": "string", "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]{1,64}$"})
}

fn queue() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"})
}

/// A step's name (`relay_core::Step::check_name`).
fn step_name() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": r"^[^\u0000-\u001f\u007f-\u009f]+$"})
}

/// An event's key (`relay_core::job::Waited::check_key`).
fn event_key() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9_.:/@+=-]{1,256}$"})
}

fn id_param() -> Value {
    json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "format": "int64", "minimum": 1}}])
}

/// A cron expression of five fields, each `*`, `*/N` or a number in its
/// range (day of month up to 28, so that every expression the pattern
/// allows has ticks); the server accepts all of cron (ranges, lists,
/// names, seconds), the document describes a safe subset for generators.
const CRON_PATTERN: &str = concat!(
    r"^(\*(/[1-9])?|[1-5]?[0-9]) (\*(/[1-9])?|1?[0-9]|2[0-3]) (\*|[1-9]|1[0-9]|2[0-8])",
    r" (\*|[1-9]|1[0-2]) (\*|[0-6])$"
);

fn schedule_body() -> Value {
    let zones: Vec<&str> = relay::time_zones().collect();
    json!({"type": "object", "additionalProperties": false, "required": ["job"],
        "description": "Give `cron` (with an optional `tz`) or `every_ms`.",
        "oneOf": [{"required": ["cron"], "not": {"required": ["every_ms"]}},
                  {"required": ["every_ms"], "not": {"anyOf": [{"required": ["cron"]}, {"required": ["tz"]}]}}],
        "properties": {
        "cron": {"type": "string", "pattern": CRON_PATTERN, "description": "Five fields (or six, seconds first), e.g. \"*/5 * * * *\"."},
        "tz": {"type": "string", "enum": zones, "description": "An IANA time zone for the cron expression (default UTC)."},
        "every_ms": {"type": "integer", "minimum": 1000, "maximum": 31_622_400_000_u64},
        "job": r("JobTemplate")}})
}

/// A submit's responses, with 200: an unfinished job already holds the
/// unique key (its id; nothing was written).
fn with_existing(mut responses: Value) -> Value {
    // Its schema is the 201's (`answers`).
    responses["200"] = json!({"description": "an unfinished job already holds the unique key, or an earlier submit carried the idempotency key: its id, `existing`, nothing written"});
    responses
}

/// `schema`, refusing bodies that give both fields `a` and `b`.
fn not_both(mut schema: Value, a: &str, b: &str) -> Value {
    schema["not"] = json!({"required": [a, b]});
    schema
}

/// One item of `POST /v1/work`'s outcomes, of kind `kind`, with its own
/// fields `extra`.
fn outcome(kind: &str, extra: Value) -> Value {
    let mut props = json!({"id": {"type": "integer", "format": "int64"}, "token": {"type": "integer", "format": "int64"},
        "outcome": {"type": "string", "enum": [kind]}});
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let mut item = json!({"type": "object", "additionalProperties": false, "required": ["id", "token", "outcome"], "properties": props});
    match kind {
        "nack" => item["required"] = json!(["id", "token", "outcome", "error"]),
        "sleep" => item["required"] = json!(["id", "token", "outcome", "step", "until"]),
        "wait" => item["required"] = json!(["id", "token", "outcome", "step", "key", "until"]),
        "join" => item["required"] = json!(["id", "token", "outcome", "step", "child"]),
        "step" => {
            item["required"] = json!(["id", "token", "outcome", "step"]);
            item["not"] = json!({"required": ["output", "output_base64"]});
        }
        "ack" => item["not"] = json!({"required": ["result", "result_base64"]}),
        _ => {}
    }
    item
}

fn token_body(extra: Value) -> Value {
    let mut props = json!({"token": {"type": "integer", "format": "int64"}});
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({"type": "object", "additionalProperties": false, "required": ["token"], "properties": props})
}

/// `POST /v1/work`'s body.
fn work_body() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
                    "outcomes": {"type": "array", "maxItems": relay_client::wire::MAX_ITEMS, "items": {"oneOf": [
                        outcome("ack", json!({
                            "result": {"description": "Any JSON value, kept as its JSON text (not with result_base64)."},
                            "result_base64": {"type": "string", "format": "byte", "nullable": true}})),
                        outcome("nack", json!({"error": {"type": "string"},
                            "retry_in_ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS, "nullable": true},
                            "permanent": {"type": "boolean", "description": "DEAD now (retry_in_ms is then ignored)."}})),
                        outcome("release", json!({"in_ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS, "nullable": true}})),
                        outcome("sleep", json!({"step": step_name(),
                            "until": {"type": "string", "format": "date-time"}})),
                        outcome("wait", json!({"step": step_name(),
                            "key": event_key(),
                            "until": {"type": "string", "format": "date-time"}})),
                        outcome("step", json!({"step": step_name(),
                            "output": {"description": "Any JSON value, kept as its JSON text (not with output_base64)."},
                            "output_base64": {"type": "string", "format": "byte", "nullable": true}})),
                        outcome("join", json!({"step": step_name(),
                            "child": {"type": "integer", "format": "int64"}}))]}},
                    "lease": {"allOf": [r("Lease")], "nullable": true, "description": "Leave it out (or null) when no slot is free."}}})
}

pub(crate) fn document(config: &ServerConfig) -> Value {
    let (doc, clashes) = build(config);
    for name in clashes {
        tracing::error!(schema = %name, "two definitions of one schema in the OpenAPI document differ; the later is kept");
    }
    doc
}

/// The document, and the names of the schemas defined twice, differently
/// (a type spelled by hand and generated; a request's and an answer's):
/// none, as a test checks.
fn build(config: &ServerConfig) -> (Value, Vec<String>) {
    let mut clashes = Vec::new();
    let max_wait = u64::try_from(config.max_wait.as_millis()).unwrap_or(u64::MAX);
    let mut doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Relay", "version": env!("CARGO_PKG_VERSION"),
                 "description": "A durable job queue. Every state change is committed to disk before the response."},
        "security": if config.tokens.is_empty() { json!([]) } else { json!([{"bearer": []}]) },
        "paths": {
            "/v1/tokens/{token}/complete": {"post": {"operationId": "completeToken", "security": [],
                "description": "Completes a completion token (made by a job's handler: POST /v1/jobs/{id}/tokens) with the body, any JSON value (at most 64 KiB; none: null). Needs no API token: the token's secret, part of `token` (`<id>.<secret>`), is the credential. The job waiting for the token runs on with the payload, in this commit. The first completion stands.",
                "parameters": [{"name": "token", "in": "path", "required": true, "schema": {"type": "string", "maxLength": 200}}],
                "requestBody": {"required": false, "content": {"application/json": {"schema": {"description": "The payload: any JSON value."}}}},
                "responses": {"200": {"description": "completed", "content": {"application/json": {"schema": {"type": "object", "required": ["completed", "woken"],
                    "properties": {"completed": {"type": "boolean"}, "woken": {"type": "integer", "minimum": 0}}}}}},
                    "400": {"$ref": "#/components/responses/E400"}, "404": {"$ref": "#/components/responses/E404"},
                    "409": {"$ref": "#/components/responses/E409"}, "410": {"$ref": "#/components/responses/E410"},
                    "413": {"$ref": "#/components/responses/E413"}, "503": {"$ref": "#/components/responses/E503"}}}},
            "/healthz": {"get": {"operationId": "health", "security": [], "responses": {"200": {"description": "up: the store takes writes",
                "content": {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "enum": ["ok"]}}}}}},
                "503": {"description": "failing: the last batch failed as a whole (a full disk, a read-only file) and none has committed since; `stopped` after a failed fsync (restart once the disk is fixed)",
                "content": {"application/json": {"schema": {"type": "object", "required": ["status", "stopped", "error", "since"], "properties": {
                    "status": {"type": "string", "enum": ["failing"]}, "stopped": {"type": "boolean"},
                    "error": {"type": "string", "nullable": true}, "since": {"type": "string", "format": "date-time", "nullable": true}}}}}}}}},
            "/metrics": {"get": {"operationId": "metrics", "responses": {"200": {"description": "Prometheus text",
                "content": {"text/plain": {"schema": {"type": "string"}}}}, "401": {"$ref": "#/components/responses/E401"}}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": errors(),
            "schemas": schemas(),
        }
    });
    let mut settings = relay_client::schemars::generate::SchemaSettings::openapi3();
    settings.contract = relay_client::schemars::generate::Contract::Deserialize;
    let mut requests = settings.into_generator();
    macro_rules! each {
        ($($call:ident),*) => {
            $({
                let body = <<calls::$call as Call>::Body as Part>::schema(&mut requests);
                operation::<calls::$call>(&mut doc, query_params::<<calls::$call as Call>::Query>(), body);
            })*
        };
    }
    relay_client::for_each_call!(each);
    merge(&mut doc, requests.take_definitions(true), &mut clashes);
    // The longest lease wait is this server's.
    doc["components"]["schemas"]["Lease"]["properties"]["wait_ms"]["maximum"] = json!(max_wait);
    answers(&mut doc, &mut clashes);
    (doc, clashes)
}

/// Call `C`'s operation, from the table: its name, description, path
/// parameter, the success status and its errors; its query parameters and
/// body generated from its types ([`query_params`], `Part::schema`), or
/// the body written by hand where its type does not tell its rules
/// ([`request_body`]); its headers from [`header_params`]; its answer's
/// schema from [`answers`].
fn operation<C: Call>(doc: &mut Value, query: Vec<Value>, body: Option<Value>) {
    let mut op = json!({"operationId": C::OPERATION});
    let description: Vec<&str> = C::DESCRIPTION
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if !description.is_empty() {
        op["description"] = json!(description.join(" "));
    }
    let errors: Vec<String> = C::ERRORS.iter().map(u16::to_string).collect();
    let errors: Vec<&str> = errors.iter().map(String::as_str).collect();
    op["responses"] = responses(&C::STATUS.to_string(), &errors);
    if C::OPERATION == "submit" {
        op["responses"] = with_existing(op["responses"].take());
    }
    if C::OPERATION == "submitBatch" {
        op["responses"]["200"] = json!({"description": "every job was found rather than written (the batch's idempotency key was carried by an earlier submit, or unfinished jobs hold their unique keys): their ids, all in `existing`, nothing written"});
    }
    let mut params: Vec<Value> = Vec::new();
    match C::param_name() {
        Some("id") => params.extend(id_param().as_array().cloned().unwrap_or_default()),
        Some("key") => params.push(json!({"name": "key", "in": "path", "required": true, "schema": event_key()})),
        Some(n) => params.push(json!({"name": n, "in": "path", "required": true, "schema": queue()})),
        None => {}
    }
    params.extend(query);
    params.extend(header_params(C::OPERATION));
    if !params.is_empty() {
        op["parameters"] = json!(params);
    }
    if let Some(b) = request_body(C::OPERATION).or(body) {
        op["requestBody"] = self::body(b);
    }
    doc["paths"][C::PATH][C::METHOD.as_str().to_lowercase()] = op;
}

/// A query type's fields as query parameters, generated from the type
/// (its limits in schemars attributes): each optional, never null.
fn query_params<Q: relay_client::schemars::JsonSchema>() -> Vec<Value> {
    let mut settings = relay_client::schemars::generate::SchemaSettings::openapi3();
    settings.contract = relay_client::schemars::generate::Contract::Deserialize;
    settings.inline_subschemas = true;
    let schema = settings.into_generator().root_schema_for::<Q>().to_value();
    let Some(fields) = schema["properties"].as_object() else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|(name, field)| {
            let mut field = field.clone();
            // An Option's `null` branch, or its `nullable`: a query value
            // is never null.
            if let Some(some) = field["anyOf"]
                .as_array()
                .and_then(|a| a.iter().find(|b| b["nullable"] != json!(true)))
            {
                field = some.clone();
            }
            let description = field.as_object_mut().and_then(|f| {
                f.remove("nullable");
                f.remove("default");
                f.remove("description")
            });
            let mut param = json!({"name": name, "in": "query", "schema": field});
            if let Some(d) = description {
                param["description"] = d;
            }
            param
        })
        .collect()
}

/// The headers the submits read.
fn header_params(operation: &str) -> Vec<Value> {
    match operation {
        "submit" => vec![traceparent_header(), idempotency_header(false)],
        "submitBatch" => vec![traceparent_header(), idempotency_header(true)],
        _ => Vec::new(),
    }
}

/// The bodies whose rules a type does not tell (one field or another,
/// fields that go with a kind), written here; every other call's body is
/// generated from its type in the table (`Part::schema`).
fn request_body(operation: &str) -> Option<Value> {
    Some(match operation {
        "bulk" => {
            json!({"type": "object", "additionalProperties": false, "required": ["action", "filter"], "properties": {
            "action": {"type": "string", "enum": ["retry", "cancel", "delete"]},
            "filter": {"type": "object", "additionalProperties": false, "minProperties": 1, "properties": {
                "queue": queue(), "state": r("State"),
                "kind": label(),
                "tag": tag_schema(),
                "since": {"type": "string", "format": "date-time"}, "until": {"type": "string", "format": "date-time"},
                "error_contains": {"type": "string", "minLength": 1, "maxLength": 256}}}}})
        }
        "ack" => not_both(
            token_body(
                json!({"result": {"description": "Any JSON value, kept as its JSON text and returned as that value."},
                "result_base64": {"type": "string", "format": "byte", "nullable": true, "description": "Bytes that are not JSON (not with result)."}}),
            ),
            "result",
            "result_base64",
        ),
        "recordStep" => not_both(
            {
                let mut b = token_body(json!({
                    "name": step_name(),
                    "output": {"description": "Any JSON value, kept as its JSON text and returned as that value."},
                    "output_base64": {"type": "string", "format": "byte", "nullable": true, "description": "Bytes that are not JSON (not with output)."}}));
                b["required"] = json!(["token", "name"]);
                b
            },
            "output",
            "output_base64",
        ),
        "emit" => not_both(
            json!({"type": "object", "additionalProperties": false, "properties": {
                "payload": {"description": "Any JSON value, kept as its JSON text and returned as that value."},
                "payload_base64": {"type": "string", "format": "byte", "nullable": true, "description": "Bytes that are not JSON (not with payload)."}}}),
            "payload",
            "payload_base64",
        ),
        "work" => work_body(),
        "putSchedule" => schedule_body(),
        _ => return None,
    })
}

/// Each call's success answer, generated from its type in the table
/// (`relay_client::wire`, through schemars in OpenAPI 3.0's form: an
/// `Option` is `nullable`), with the schemas those use under
/// `components/schemas`: an answer is described by the very type the
/// server serializes it from, never spelled again here.
fn answers(doc: &mut Value, clashes: &mut Vec<String>) {
    let mut settings = relay_client::schemars::generate::SchemaSettings::openapi3();
    settings.contract = relay_client::schemars::generate::Contract::Serialize;
    let mut generator = settings.into_generator();
    macro_rules! each {
        ($($call:ident),*) => {
            $(answer::<calls::$call>(doc, generator.subschema_for::<<calls::$call as Call>::Answer>().to_value());)*
        };
    }
    relay_client::for_each_call!(each);
    // A submit that found its key's job answers 200 with the same type.
    let submitted = doc["paths"]["/v1/jobs"]["post"]["responses"]["201"]["content"].clone();
    doc["paths"]["/v1/jobs"]["post"]["responses"]["200"]["content"] = submitted;
    merge(doc, generator.take_definitions(true), clashes);
}

/// Generated schemas into `components/schemas`. A type both read and
/// answered (a rate limit) must come out the same both ways: a request's
/// limits in the answer's schema would be dropped otherwise (a test
/// checks).
fn merge(doc: &mut Value, defs: serde_json::Map<String, Value>, clashes: &mut Vec<String>) {
    for (name, schema) in defs {
        let slot = &mut doc["components"]["schemas"][&name];
        if !slot.is_null() && *slot != schema {
            clashes.push(name);
        }
        *slot = schema;
    }
}

/// Call `C`'s success response's schema.
fn answer<C: Call>(doc: &mut Value, schema: Value) {
    let op = &mut doc["paths"][C::PATH][C::METHOD.as_str().to_lowercase()];
    op["responses"][C::STATUS.to_string()]["content"]["application/json"]["schema"] = schema;
}

fn errors() -> Value {
    let mut out = serde_json::Map::new();
    for (code, what) in [
        ("400", "bad request"),
        ("401", "missing or wrong token"),
        (
            "403",
            "refused whatever the token: a worker id whose record another worker made (send its secret)",
        ),
        ("404", "no such job"),
        (
            "409",
            "lease lost, wrong state, or a unique key held by another unfinished job",
        ),
        ("410", "the completion token expired"),
        ("413", "body too large"),
        ("429", "too many waiting long-polls"),
        ("503", "busy, closed or timed out"),
    ] {
        out.insert(
            format!("E{code}"),
            json!({"description": what, "content": {"application/json": {"schema": r("Error")}}}),
        );
    }
    Value::Object(out)
}

/// A job's schema: queue, kind, payload (or payload_base64), priority and
/// max_attempts, with `extra` properties.
fn job_schema(description: &str, extra: Value) -> Value {
    let mut props = json!({
        "queue": queue(),
        "kind": label(),
        "payload": {"description": "Any JSON value, stored as its JSON text exactly as sent (null: empty) and returned as that value. Bytes that are not JSON: payload_base64."},
        "payload_base64": {"type": "string", "format": "byte", "nullable": true},
        "priority": {"type": "integer", "minimum": 0, "maximum": 3, "nullable": true},
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 1000, "nullable": true}});
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({"type": "object", "additionalProperties": false, "required": ["queue", "kind"], "description": description,
        "not": {"required": ["payload", "payload_base64"]}, "properties": props})
}

fn schemas() -> Value {
    // Every code a server sends, from the one list (relay_client::wire::ErrorCode).
    let codes: Vec<&str> = relay_client::wire::ErrorCode::SERVER
        .iter()
        .map(|c| c.as_str())
        .collect();
    let error = json!({"type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string", "enum": codes}, "message": {"type": "string"}}});
    json!({
        "Error": {"type": "object", "required": ["error"], "properties": {"error": error}},
        "JobTemplate": job_schema("The job each tick enqueues: a NewJob without delay_ms, run_at, unique_key, idempotency_key, lease_for_ms, timeout_ms, depends_on, traceparent or tags.", json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay_client::wire::Part;

    /// Every call of the table has the request the document gives it: a
    /// body exactly when its body type is one, query parameters exactly
    /// when it takes a query (a call added with a body or a query and no
    /// schema for it here fails).
    #[test]
    fn every_call_documents_its_body_and_query() {
        let doc = document(&crate::ServerConfig::new("127.0.0.1:0".parse().unwrap()));
        let mut wrong = Vec::new();
        macro_rules! each {
            ($($call:ident),*) => {
                $({
                    type C = calls::$call;
                    let op = &doc["paths"][C::PATH][C::METHOD.as_str().to_lowercase()];
                    let body = !op["requestBody"].is_null();
                    let query = op["parameters"].as_array().is_some_and(|p| p.iter().any(|p| p["in"] == "query"));
                    if body != <<C as Call>::Body as Part>::GIVEN || query != <<C as Call>::Query as Part>::GIVEN {
                        wrong.push((C::OPERATION, body, query));
                    }
                    if op["responses"][C::STATUS.to_string()]["content"]["application/json"]["schema"].is_null() {
                        wrong.push((C::OPERATION, false, false));
                    }
                })*
            };
        }
        relay_client::for_each_call!(each);
        assert!(
            wrong.is_empty(),
            "calls documented without their body or query (operation, body, query): {wrong:?}"
        );
    }

    /// No schema is defined twice, differently: a type spelled by hand
    /// and generated, or read and answered with two shapes (every
    /// `GET /openapi.json` logged an ERROR for NewJob, spelled both ways).
    #[test]
    fn no_schema_is_defined_twice_differently() {
        let (_, clashes) = build(&ServerConfig::new("127.0.0.1:0".parse().unwrap()));
        assert_eq!(clashes, Vec::<String>::new());
    }

    /// A type both read and answered (a rate limit) has one schema: the
    /// request generator's and the answer generator's agree on it.
    #[test]
    fn a_type_read_and_answered_has_one_schema() {
        use relay_client::schemars::generate::{Contract, SchemaSettings};
        let make = |contract| {
            let mut settings = SchemaSettings::openapi3();
            settings.contract = contract;
            let mut g = settings.into_generator();
            g.subschema_for::<relay_client::wire::Limits>();
            g.subschema_for::<relay_client::wire::QueueLimits>();
            g.take_definitions(true)
        };
        let (read, answered) = (make(Contract::Deserialize), make(Contract::Serialize));
        assert!(read.get("RateLimit").is_some());
        assert_eq!(read.get("RateLimit"), answered.get("RateLimit"));
    }
}
