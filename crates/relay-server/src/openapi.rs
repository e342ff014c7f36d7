//! `GET /openapi.json`: the OpenAPI 3.0 description of every endpoint, built
//! from the server's own limits. `scripts/schemathesis` checks the running
//! server against it with generated requests.

use crate::ServerConfig;
use serde_json::{json, Value};

use relay_client::wire::{calls, Call, MAX_MS};

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

/// Optional request fields also accept `null` (read as absent).
fn nullable(mut v: Value) -> Value {
    v["nullable"] = json!(true);
    v
}

fn queue() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"})
}

fn id_param() -> Value {
    json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "format": "int64", "minimum": 1}}])
}

fn queue_param() -> Value {
    json!([{"name": "queue", "in": "path", "required": true, "schema": queue()}])
}

fn name_param() -> Value {
    json!([{"name": "name", "in": "path", "required": true, "schema": queue()}])
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

fn limits_body() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "max_leased": {"type": "integer", "minimum": 1, "maximum": 1_000_000, "nullable": true},
        "rate_limit": {"type": "object", "nullable": true, "additionalProperties": false, "required": ["limit", "per_ms"], "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
            "per_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000}}}}})
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
                        outcome("release", json!({"in_ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS, "nullable": true}}))]}},
                    "lease": {"allOf": [r("Lease")], "nullable": true, "description": "Leave it out (or null) when no slot is free."}}})
}

/// `POST /v1/heartbeat`'s body.
fn heartbeat_body() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["leases"], "properties": {
                    "leases": {"type": "array", "minItems": 1, "maxItems": relay_client::wire::MAX_ITEMS, "items": {
                        "type": "object", "additionalProperties": false, "required": ["id", "token"], "properties": {
                            "id": {"type": "integer", "format": "int64"}, "token": {"type": "integer", "format": "int64"},
                            "lease_for_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000, "nullable": true}}}},
                    "lease_for_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000, "nullable": true}}})
}

/// The worker protocol's calls: `/v1/work` and `/v1/heartbeat`.
fn worker_paths() -> Value {
    json!({
            "/v1/work": {"post": {"operationId": "work",
                "description": "A worker's turn in one call: records `outcomes` (each answered on its own: a stale token fails only its item), then leases as `lease` asks, in the same transaction and commit. `lease.wait_ms` is honoured only when there are no outcomes. Sending the same call again after a lost answer is safe for its outcomes (a repeated ack answers its state again).",
                "requestBody": body(work_body()),
                "responses": responses("200", &["400", "413", "429"])}},
            "/v1/heartbeat": {"post": {"operationId": "heartbeat",
                "description": "Extends many leases at once, each to its `lease_for_ms` (else the call's, else 30 s) from now; each answered on its own (`lease_lost`, `invalid_state`, `not_found`: the job is no longer held).",
                "requestBody": body(heartbeat_body()),
                "responses": responses("200", &["400", "413"])}}
    })
}

pub(crate) fn document(config: &ServerConfig) -> Value {
    let max_wait = u64::try_from(config.max_wait.as_millis()).unwrap_or(u64::MAX);
    let e = ["400", "404", "409", "413"];
    let mut doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Relay", "version": env!("CARGO_PKG_VERSION"),
                 "description": "A durable job queue. Every state change is committed to disk before the response."},
        "security": if config.tokens.is_empty() { json!([]) } else { json!([{"bearer": []}]) },
        "paths": {
            "/healthz": {"get": {"operationId": "health", "security": [], "responses": {"200": {"description": "up: the store takes writes",
                "content": {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "enum": ["ok"]}}}}}},
                "503": {"description": "failing: the last batch failed as a whole (a full disk, a read-only file) and none has committed since; `stopped` after a failed fsync (restart once the disk is fixed)",
                "content": {"application/json": {"schema": {"type": "object", "required": ["status", "stopped", "error", "since"], "properties": {
                    "status": {"type": "string", "enum": ["failing"]}, "stopped": {"type": "boolean"},
                    "error": {"type": "string", "nullable": true}, "since": {"type": "string", "format": "date-time", "nullable": true}}}}}}}}},
            "/metrics": {"get": {"operationId": "metrics", "responses": {"200": {"description": "Prometheus text",
                "content": {"text/plain": {"schema": {"type": "string"}}}}, "401": {"$ref": "#/components/responses/E401"}}}},
            "/v1/jobs": {
                "post": {"operationId": "submit", "requestBody": body(r("NewJob")), "parameters": [traceparent_header(), idempotency_header(false)],
                    "responses": with_existing(responses("201", &["400", "404", "413"]))},
                "get": {"operationId": "list", "parameters": [
                    {"name": "queue", "in": "query", "schema": queue()},
                    {"name": "state", "in": "query", "schema": r("State")},
                    {"name": "kind", "in": "query", "schema": label()},
                    {"name": "tag", "in": "query", "schema": tag_schema()},
                    {"name": "since", "in": "query", "schema": {"type": "string", "format": "date-time"}, "description": "Created at or after (RFC 3339)."},
                    {"name": "until", "in": "query", "schema": {"type": "string", "format": "date-time"}, "description": "Created before (RFC 3339)."},
                    {"name": "error_contains", "in": "query", "schema": {"type": "string", "minLength": 1, "maxLength": 256}},
                    {"name": "before", "in": "query", "schema": {"type": "integer", "format": "int64"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}],
                    "responses": responses("200", &["400"])}},
            "/v1/jobs/bulk": {"post": {"operationId": "bulk",
                "description": "Retries, cancels or deletes every job the filter matches (jobs whose state does not allow it are passed over), 100 per transaction, paced so other callers keep their latency (never cut off by the request timeout); answers how many it changed.",
                "requestBody": body(json!({"type": "object", "additionalProperties": false, "required": ["action", "filter"], "properties": {
                    "action": {"type": "string", "enum": ["retry", "cancel", "delete"]},
                    "filter": {"type": "object", "additionalProperties": false, "minProperties": 1, "properties": {
                        "queue": queue(), "state": r("State"),
                        "kind": label(),
                        "tag": tag_schema(),
                        "since": {"type": "string", "format": "date-time"}, "until": {"type": "string", "format": "date-time"},
                        "error_contains": {"type": "string", "minLength": 1, "maxLength": 256}}}}})),
                "responses": responses("200", &["400"])}},
            "/v1/dead": {"get": {"operationId": "deadGroups",
                "description": "The newest 10,000 DEAD jobs grouped by queue, kind and the first line of their error, the largest groups first (a group's count is of those; /v1/stats counts every DEAD job).",
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}],
                "responses": responses("200", &["400"])}},
            "/v1/jobs/batch": {"post": {"operationId": "submitBatch", "parameters": [traceparent_header(), idempotency_header(true)],
                "requestBody": body(json!({"type": "object", "additionalProperties": false, "required": ["jobs"],
                    "properties": {"jobs": {"type": "array", "minItems": 1, "maxItems": 10000, "items": r("NewJob")}}})),
                "responses": responses("201", &["400", "404", "413"])}},
            "/v1/jobs/{id}": {
                "get": {"operationId": "get", "parameters": id_param(), "responses": responses("200", &["400", "404"])},
                "delete": {"operationId": "delete", "parameters": id_param(), "responses": responses("200", &["400", "404", "409"])}},
            "/v1/jobs/{id}/ack": {"post": {"operationId": "ack", "parameters": id_param(),
                "requestBody": body(not_both(token_body(json!({"result": {"description": "Any JSON value, kept as its JSON text and returned as that value."},
                    "result_base64": {"type": "string", "format": "byte", "nullable": true, "description": "Bytes that are not JSON (not with result)."}})), "result", "result_base64")), "responses": responses("200", &e)}},
            "/v1/jobs/{id}/nack": {"post": {"operationId": "nack", "parameters": id_param(),
                "requestBody": body({
                    let mut b = token_body(json!({"error": {"type": "string"}, "retry_in_ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS, "nullable": true}, "permanent": {"type": "boolean"}}));
                    b["required"] = json!(["token", "error"]);
                    b
                }),
                "responses": responses("200", &e)}},
            "/v1/jobs/{id}/extend": {"post": {"operationId": "extend", "parameters": id_param(),
                "requestBody": body(token_body(json!({"lease_for_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000, "nullable": true}}))),
                "responses": responses("200", &e)}},
            "/v1/jobs/{id}/release": {"post": {"operationId": "release", "parameters": id_param(),
                "description": "Gives a leased job back untried (the attempt is not counted): READY at once, or with `in_ms`, snoozed: READY again after that long, with a \"snoozed\" event.",
                "requestBody": body(token_body(json!({"in_ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS, "nullable": true}}))),
                "responses": responses("200", &e)}},
            "/v1/jobs/{id}/cancel": {"post": {"operationId": "cancel", "parameters": id_param(), "responses": responses("200", &["400", "404", "409"])}},
            "/v1/jobs/{id}/retry": {"post": {"operationId": "retry", "parameters": id_param(), "responses": responses("200", &["400", "404", "409"])}},
            "/v1/jobs/{id}/events": {
                "get": {"operationId": "events", "parameters": id_param(), "responses": responses("200", &["400", "404"])},
                "post": {"operationId": "appendEvent", "parameters": id_param(),
                    "requestBody": body(json!({"type": "object", "additionalProperties": false, "required": ["kind"],
                        "properties": {"kind": label(), "data": {}}})),
                    "responses": responses("201", &["400", "404", "413"])}},
            "/v1/lease": {"post": {"operationId": "lease",
                "description": "Leases up to `max` ready jobs; with `wait_ms`, waits for one (woken at once by a submit).",
                "requestBody": body(r("Lease")),
                "responses": responses("200", &["400", "413", "429"])}},
            "/v1/stats": {"get": {"operationId": "stats",
                "description": "A page of queues' stats, by name in byte order (1,000 at most), so that no answer grows with the number of queues: follow `next` as `after`. The first page (no `after`) carries `totals` over every queue.",
                "parameters": queue_page_params(),
                "responses": responses("200", &["400"])}},
            "/v1/queues/{queue}/pause": {"post": {"operationId": "pauseQueue",
                "description": "Pauses the queue: from the next claim on, in every process on the store, none of its jobs is leased; submits and completions go on. Stored; pausing a paused queue changes nothing.",
                "parameters": queue_param(), "responses": responses("200", &["400"])}},
            "/v1/queues/{queue}/limits": {"put": {"operationId": "setQueueLimits",
                "description": "Replaces the queue's limits, enforced across every process on the store: at most `max_leased` of its jobs LEASED at once, at most `rate_limit.limit` leases per `rate_limit.per_ms`. A field left out or null lifts that limit.",
                "parameters": queue_param(),
                "requestBody": body(limits_body()),
                "responses": responses("200", &["400", "413"])}},
            "/v1/schedules": {"get": {"operationId": "schedules", "responses": responses("200", &[])}},
            "/v1/schedules/{name}": {
                "put": {"operationId": "putSchedule",
                    "description": "Adds a schedule of periodic jobs, or replaces the one of this name (keeping its paused state). Each tick enqueues exactly one job, whichever process runs the scheduler; ticks missed while no Relay ran enqueue one job.",
                    "parameters": name_param(), "requestBody": body(schedule_body()),
                    "responses": responses("200", &["400", "413"])},
                "delete": {"operationId": "removeSchedule", "parameters": name_param(), "responses": responses("200", &["400", "404"])}},
            "/v1/schedules/{name}/pause": {"post": {"operationId": "pauseSchedule", "parameters": name_param(),
                "responses": responses("200", &["400", "404"])}},
            "/v1/schedules/{name}/resume": {"post": {"operationId": "resumeSchedule", "parameters": name_param(),
                "description": "Resumes from the next tick after now (ticks missed while paused enqueue nothing).",
                "responses": responses("200", &["400", "404"])}},
            "/v1/queues/{queue}/resume": {"post": {"operationId": "resumeQueue",
                "description": "Resumes a paused queue and wakes lessees waiting for it.",
                "parameters": queue_param(), "responses": responses("200", &["400"])}},
            "/v1/queues/{queue}": {"get": {"operationId": "getQueue",
                "description": "One queue: its jobs by state, the age of its oldest due job, whether it is paused, and its limits (every count zero for a queue nothing has used).",
                "parameters": queue_param(),
                "responses": responses("200", &["400"])}},
            "/v1/queues": {"get": {"operationId": "queues",
                "description": "A page of queue names (with jobs, paused or limited), in byte order, 1,000 at most: follow `next` as `after`.",
                "parameters": queue_page_params(),
                "responses": responses("200", &["400"])}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": errors(),
            "schemas": schemas(max_wait),
        }
    });
    if let (Some(paths), Value::Object(more)) = (doc["paths"].as_object_mut(), worker_paths()) {
        paths.extend(more);
    }
    answers(&mut doc);
    doc
}

/// Each call's success answer, generated from its type in the table
/// (`relay_client::wire`, through schemars in OpenAPI 3.0's form: an
/// `Option` is `nullable`), with the schemas those use under
/// `components/schemas`: an answer is described by the very type the
/// server serializes it from, never spelled again here.
fn answers(doc: &mut Value) {
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
    for (name, schema) in generator.take_definitions(true) {
        doc["components"]["schemas"][name] = schema;
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
        ("404", "no such job"),
        (
            "409",
            "lease lost, wrong state, or a unique key held by another unfinished job",
        ),
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

fn schemas(max_wait: u64) -> Value {
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
        "NewJob": job_schema("A job to submit.", json!({
            "delay_ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS, "nullable": true},
            "run_at": {"type": "string", "format": "date-time", "nullable": true},
            "unique_key": {"type": "string", "minLength": 1, "maxLength": 256, "nullable": true},
            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 256, "nullable": true,
                "description": "Makes the submit safe to repeat: a submit with this key again within 24 h answers the first submit's job (`existing`) and creates nothing. See the Idempotency-Key header."},
            "lease_for_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000, "nullable": true},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000, "nullable": true},
            "depends_on": {"type": "array", "nullable": true, "maxItems": 10_000,
                "description": "Ids of jobs this one waits for (WAITING): READY once all of them have SUCCEEDED. Each must exist (404 dependency_not_found otherwise).",
                "items": {"type": "integer", "minimum": 1, "maximum": i64::MAX}},
            "on_dependency_failure": {"type": "string", "enum": ["cancel", "run", null], "nullable": true,
                "description": "If a job it depends on ends DEAD or CANCELLED: cancel this one (the default), or run it anyway."},
            "traceparent": {"type": "string", "nullable": true, "pattern": "^00-(?!0{32}-)[0-9a-f]{32}-(?!0{16}-)[0-9a-f]{16}-[0-9a-f]{2}$",
                "description": "The W3C trace context the job continues (handed to its workers). Without it, the request's traceparent header, when valid."},
            "tags": {"type": "array", "nullable": true, "maxItems": 8, "items": tag_schema(),
                "description": "Short labels to search by; given twice counts once."}})),
        "Lease": {"type": "object", "additionalProperties": false, "required": ["queues"], "properties": {
            "queues": {"type": "array", "minItems": 1, "maxItems": 64, "items": queue()},
            "worker": nullable(label()), "max": {"type": "integer", "minimum": 1, "maximum": 1000, "nullable": true},
            "lease_for_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000, "nullable": true},
            "wait_ms": {"type": "integer", "minimum": 0, "maximum": max_wait, "nullable": true}}},
    })
}

/// `after` and `limit`: a page of queues.
fn queue_page_params() -> Value {
    json!([
        {"name": "after", "in": "query", "description": "The page starts after this queue (empty or left out: the first page).",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{0,64}$"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}
    ])
}
