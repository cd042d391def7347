//! Trace context from the submitter of a one-off job to its run (issue #51): the submitter's
//! `trace_context` hook gives its W3C `traceparent`, stored with the job; the replica that runs
//! it (another scheduler, without the hook) records it on the run's span (`dlock.run`), which
//! the handler's own events nest in. Seen through a recording subscriber (the test's log
//! capture, on a current-thread runtime: every task of the test on its thread).

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::Scheduler;

use crate::support::{LogCapture, redis};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A scheduler that only enqueues, with `hook` as its trace context hook.
fn submitter(url: &str, hook: impl Fn() -> Option<String> + Send + Sync + 'static) -> Scheduler {
    Scheduler::builder(Client::open(url).unwrap())
        .handler("work", |_| async { Ok::<(), String>(()) })
        .trace_context(hook)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_one_offs_run_span_records_its_submitters_traceparent() {
    let log = LogCapture::start();
    let server = redis();
    let url = server.url();
    let replica = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .handler("work", |ctx| async move {
            let n: u32 = ctx.args().map_err(|e| e.to_string())?;
            tracing::info!(n, "the handler ran");
            Ok::<(), String>(())
        })
        .build()
        .unwrap();
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let running = tokio::spawn(async move {
        replica
            .run_until(stopped.notified_owned(), Duration::from_secs(5))
            .await
    });

    let traced = submitter(&url, || Some(TRACEPARENT.to_owned()));
    traced.run_after("work", Duration::ZERO, &1).await.unwrap();
    // A hook that gives no traceparent of version 00: enqueued without it, with a warning.
    let garbled = submitter(&url, || Some("00-not-a-trace".to_owned()));
    garbled.run_after("work", Duration::ZERO, &2).await.unwrap();
    // No hook: nothing to carry.
    let plain = submitter(&url, || None);
    plain.run_after("work", Duration::ZERO, &3).await.unwrap();

    let limit = Duration::from_secs(30);
    let first = log.wait_for("the handler ran n=1", limit).await;
    assert!(
        first.contains("dlock.run{") && first.contains(&format!("traceparent={TRACEPARENT}")),
        "the run's span does not carry the submitter's traceparent: {first}"
    );
    assert!(first.contains("job=once:work"), "{first}");
    for n in [2, 3] {
        let line = log.wait_for(&format!("the handler ran n={n}"), limit).await;
        assert!(
            line.contains("dlock.run{") && !line.contains("traceparent="),
            "{line}"
        );
    }
    assert_eq!(
        log.matching("gave no W3C traceparent of version 00").len(),
        1,
        "the garbled traceparent was not reported once"
    );
    stop.notify_one();
    let _report = running.await.unwrap();
}

/// With the feature `opentelemetry`: the hook reads the submitter's span from OpenTelemetry,
/// and the run's span, exported by the application's tracer, links to it (and records it).
mod opentelemetry_link {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use dlock_core::Client;
    use dlock_scheduler::{RunOutcome, Scheduler};
    use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use tracing::Instrument;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::layer::SubscriberExt;

    use crate::support::{eventually, redis};

    /// Keeps every span the tracer ends.
    #[derive(Clone, Debug, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_runs_span_links_to_the_submitters_span() {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(kept.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("dlock-test"));
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

        let server = redis();
        let url = server.url();
        let replica = Scheduler::builder(Client::open(url.as_str()).unwrap())
            .handler("work", |_| async { Ok::<(), String>(()) })
            .build()
            .unwrap();
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = stop.clone();
        let running = tokio::spawn(async move {
            replica
                .run_until(stopped.notified_owned(), Duration::from_secs(5))
                .await
        });
        let submitter = Scheduler::builder(Client::open(url.as_str()).unwrap())
            .handler("work", |_| async { Ok::<(), String>(()) })
            .trace_context_from_opentelemetry()
            .build()
            .unwrap();

        // The submitter enqueues inside a span of its own (a request, say).
        let request = tracing::info_span!("request");
        let request_cx: SpanContext = request.context().span().span_context().clone();
        assert!(
            request_cx.is_valid(),
            "the test's tracer gave no span context"
        );
        let id = submitter
            .run_after("work", Duration::ZERO, &1)
            .instrument(request.clone())
            .await
            .unwrap();
        drop(request);

        let run = eventually(Duration::from_secs(30), "the run's span exported", || {
            let kept = kept.clone();
            async move {
                let spans = kept.0.lock().unwrap();
                spans.iter().find(|s| s.name == "dlock.run").cloned()
            }
        })
        .await;
        // The link names the request's span, as a remote one (it came through Redis).
        let ids = |c: &SpanContext| (c.trace_id(), c.span_id(), c.trace_flags());
        let links: Vec<_> = run.links.iter().map(|l| &l.span_context).collect();
        assert_eq!(
            links.iter().map(|c| ids(c)).collect::<Vec<_>>(),
            [ids(&request_cx)],
            "the run's span links to the request's"
        );
        assert!(links[0].is_remote());
        assert_ne!(
            run.span_context.trace_id(),
            request_cx.trace_id(),
            "a link, not a parent: the run is a trace of its own"
        );
        let traceparent = run
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "traceparent")
            .map(|kv| kv.value.to_string());
        let expected = format!("00-{}-{}-01", request_cx.trace_id(), request_cx.span_id());
        assert_eq!(traceparent, Some(expected));
        let record = submitter.one_off(&id).await.unwrap().unwrap();
        assert_eq!(record.outcome, RunOutcome::Succeeded);
        stop.notify_one();
        let _report = running.await.unwrap();
    }
}
