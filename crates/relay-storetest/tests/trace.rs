//! Trace propagation (issue "Relay from any language", item 5), with an
//! in-memory OpenTelemetry span exporter: a job submitted inside a span
//! (the request that enqueued it) carries that span's context, and the
//! worker runtime runs it in a `relay.job` span whose parent is that span,
//! in the same trace; a handler's own spans nest under it. A traceparent
//! given at submit (a caller in another process) is continued the same way.
//! The engine's own spans (ARCHITECTURE.md, "Tracing") are exported too.
//! One test in its own binary: it installs the global subscriber.

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use relay::worker::Worker;
use relay::{NewJob, Relay};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span {name} among {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

#[test]
fn a_trace_runs_from_the_submit_through_the_handler() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open(dir.path().join("trace.db")).unwrap();

    // 1. Submitted inside the request's span: the job takes its context.
    let request = tracing::info_span!("checkout");
    let id = request.in_scope(|| relay.submit(NewJob::new("emails", "send", b"{}".to_vec())).unwrap());
    let stored = relay
        .get(id)
        .unwrap()
        .traceparent
        .expect("the job took the span's context");
    // 2. A caller elsewhere gave its own.
    let remote_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let remote_parent = "00f067aa0ba902b7";
    let given = format!("00-{remote_trace}-{remote_parent}-01");
    let remote = relay
        .submit(NewJob::new("emails", "send", b"{}".to_vec()).traceparent(&given))
        .unwrap();
    assert_eq!(relay.get(remote).unwrap().traceparent.as_deref(), Some(given.as_str()));

    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = Worker::new(relay.clone(), ["emails"])
        .handle_signals(false)
        .handler("send", {
            let seen = Arc::clone(&seen);
            move |ctx| {
                seen.lock()
                    .unwrap()
                    .push((ctx.id(), ctx.traceparent().map(str::to_owned)));
                let _inner = tracing::info_span!("smtp").entered();
                Ok(None)
            }
        });
    let stop = worker.shutdown_handle();
    let running = std::thread::spawn(move || worker.run());
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.graceful();
    running.join().unwrap().unwrap();
    drop(request);
    provider.force_flush().unwrap();

    // The handler was handed each job's traceparent.
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, vec![(id, Some(stored.clone())), (remote, Some(given.clone()))]);

    let spans = exporter.get_finished_spans().unwrap();
    let checkout = span(&spans, "checkout");
    assert_eq!(
        stored,
        format!(
            "00-{}-{}-01",
            checkout.span_context.trace_id(),
            checkout.span_context.span_id()
        )
    );
    let jobs: Vec<&SpanData> = spans.iter().filter(|s| s.name == "relay.job").collect();
    assert_eq!(jobs.len(), 2, "one relay.job span per job");
    // The local job's span continues the request's trace, under its span.
    let local = jobs
        .iter()
        .find(|s| s.span_context.trace_id() == checkout.span_context.trace_id())
        .expect("no relay.job span in the request's trace");
    assert_eq!(local.parent_span_id, checkout.span_context.span_id());
    // The remote one continues the given trace.
    let far = jobs
        .iter()
        .find(|s| s.span_context.trace_id() == TraceId::from_hex(remote_trace).unwrap())
        .expect("no relay.job span in the given trace");
    assert_eq!(far.parent_span_id, SpanId::from_hex(remote_parent).unwrap());
    // The engine's own spans: the call in the caller's span, the batch
    // that committed it and the fsync that made it durable.
    let submit = spans
        .iter()
        .find(|s| s.name == "relay.submit" && s.span_context.trace_id() == checkout.span_context.trace_id())
        .expect("no relay.submit span under the request");
    assert_eq!(submit.parent_span_id, checkout.span_context.span_id());
    for name in ["relay.lease", "relay.update", "relay.commit", "relay.fsync"] {
        span(&spans, name);
    }
    // The handler's own spans nest under the job's.
    let smtp: Vec<&SpanData> = spans.iter().filter(|s| s.name == "smtp").collect();
    assert_eq!(smtp.len(), 2);
    for s in smtp {
        assert!(
            jobs.iter().any(|j| j.span_context.span_id() == s.parent_span_id
                && j.span_context.trace_id() == s.span_context.trace_id()),
            "a handler's span is not under its job's"
        );
    }
}
