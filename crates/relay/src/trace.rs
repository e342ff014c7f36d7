//! Trace propagation: the W3C trace context (`traceparent`) a job is
//! submitted in goes with it to the worker that runs it.
//!
//! Without the `opentelemetry` feature, a job carries only the traceparent
//! its submitter gives ([`crate::NewJob::traceparent`]); the worker runtime
//! hands it to the handler (`JobContext::traceparent`). With the feature
//! (and a `tracing-opentelemetry` layer installed by the application), a
//! job submitted without one takes the context of the current `tracing`
//! span, and the worker runtime runs each job in a span (`relay.job`)
//! whose parent is the job's traceparent, so one trace runs from the
//! request that enqueued a job through its execution.

/// The current `tracing` span's OpenTelemetry context as a `traceparent`
/// value, where it has a valid one.
#[cfg(feature = "opentelemetry")]
pub(crate) fn current() -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid()
        .then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

#[cfg(not(feature = "opentelemetry"))]
pub(crate) fn current() -> Option<String> {
    None
}

/// Makes `traceparent` the (remote) parent of `span`. A value that does
/// not parse is passed over (it was checked at submit; a hand-edited row
/// must not stop the job).
#[cfg(all(feature = "worker", feature = "opentelemetry"))]
pub(crate) fn set_parent(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let mut parts = traceparent.split('-');
    let (Some(_version), Some(trace), Some(parent), Some(flags)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    let (Ok(trace), Ok(parent), Ok(flags)) = (
        TraceId::from_hex(trace),
        SpanId::from_hex(parent),
        u8::from_str_radix(flags, 16),
    ) else {
        return;
    };
    let sc = SpanContext::new(trace, parent, TraceFlags::new(flags), true, TraceState::default());
    if sc.is_valid() {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
    }
}

#[cfg(all(feature = "worker", not(feature = "opentelemetry")))]
pub(crate) fn set_parent(_span: &tracing::Span, _traceparent: &str) {}
