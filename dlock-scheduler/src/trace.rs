//! Trace context from the submitter of a one-off job to its run (issue #51): the hook that
//! gives the submitter's W3C `traceparent` ([`crate::SchedulerBuilder::trace_context`]), its
//! check, and the versioned record it is stored in (`<id>:trace` in the job's ledger, written
//! by `once.lua`, returned by `take_retry.lua` when a replica claims the run).
//!
//! `tracing` has no trace ids of its own, so the scheduler carries the text and the run's span
//! (`dlock.run`) records it as its `traceparent` field. With the feature `opentelemetry`, the
//! hook can read the current span's OpenTelemetry context ([`current_traceparent`]) and the
//! run's span is linked to the submitter's span ([`link`], through `tracing-opentelemetry`):
//! a link, not a parent, as OpenTelemetry advises for work started by a message, since the run
//! may start long after the request that asked for it ended.

use std::sync::Arc;

/// The hook: the current `traceparent` of the caller that enqueues, if it has one.
pub(crate) type TraceHook = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// The version of the `<id>:trace` record this dlock writes and reads.
const TRACE_VERSION: &str = "1";

/// `text` if it is a W3C `traceparent` this version can carry (version `00`, as the
/// recommendation defines it: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower
/// case, neither id all zeros). Anything else is dropped (with a warning): a malformed header
/// must not make the enqueue fail, nor travel on to the run as if it were one.
pub(crate) fn checked(text: String) -> Option<String> {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    let valid = matches!(
        parts.as_slice(),
        ["00", trace, parent, flags]
            if hex(trace, 32) && hex(parent, 16) && hex(flags, 2) && nonzero(trace) && nonzero(parent)
    );
    if valid {
        Some(text)
    } else {
        tracing::warn!(traceparent = %text.escape_debug(), "dlock-scheduler: the trace context hook gave no W3C traceparent of version 00; the one-off job is enqueued without it");
        None
    }
}

/// The `<id>:trace` record for `traceparent`: `"1\x1f<traceparent>"` (once.lua writes it).
#[cfg(test)]
fn record(traceparent: &str) -> String {
    format!("{TRACE_VERSION}\x1f{traceparent}")
}

/// The `traceparent` in a `<id>:trace` record; `None` (with a warning naming it) for a record
/// of another version or shape, never misread.
pub(crate) fn parse(job: &str, run: &str, record: &str) -> Option<Arc<str>> {
    match record.split_once('\x1f') {
        Some((TRACE_VERSION, traceparent)) => Some(Arc::from(traceparent)),
        Some((version, _))
            if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()) =>
        {
            tracing::warn!(%job, %run, %version, "dlock-scheduler: the run's trace context is of a newer format version; running it without (upgrade this replica)");
            None
        }
        _ => {
            tracing::warn!(%job, %run, "dlock-scheduler: the run's trace context is not one dlock wrote; running it without");
            None
        }
    }
}

/// The W3C `traceparent` of the current `tracing` span's OpenTelemetry context (the hook of
/// [`crate::SchedulerBuilder::trace_context_from_opentelemetry`]); `None` without a valid span
/// context (no OpenTelemetry layer, or no span).
#[cfg(feature = "opentelemetry")]
pub(crate) fn current_traceparent() -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// Links `span` (a run's) to the submitter's span named by `traceparent` (checked when it was
/// enqueued: version 00, ids not zero).
#[cfg(feature = "opentelemetry")]
pub(crate) fn link(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let parts: Vec<&str> = traceparent.split('-').collect();
    let ["00", trace, parent, flags] = parts.as_slice() else {
        return;
    };
    let (Ok(trace), Ok(parent), Ok(flags)) = (
        TraceId::from_hex(trace),
        SpanId::from_hex(parent),
        u8::from_str_radix(flags, 16),
    ) else {
        return;
    };
    let remote = SpanContext::new(
        trace,
        parent,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    if remote.is_valid() {
        span.add_link(remote);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn only_a_version_00_traceparent_is_carried() {
        assert_eq!(checked(GOOD.to_owned()).as_deref(), Some(GOOD));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473\u{1f}-00f067aa0ba902b7-01",
        ] {
            assert_eq!(checked(bad.to_owned()), None, "{bad:?}");
        }
    }

    #[test]
    fn a_record_of_another_version_is_refused_not_misread() {
        assert_eq!(parse("j", "o1", &record(GOOD)).as_deref(), Some(GOOD));
        assert_eq!(parse("j", "o1", &format!("2\x1f{GOOD}")), None);
        assert_eq!(parse("j", "o1", GOOD), None);
    }
}
