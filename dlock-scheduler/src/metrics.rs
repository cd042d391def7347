//! Scheduler metrics (feature `metrics`), through the same `metrics` facade as dlock-core's
//! lock metrics (which the feature turns on too):
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `dlock.scheduler.occurrences` | counter | `job`, `outcome` (`succeeded`, `failed`, `cancelled`, `skipped_overlap`, `skipped_group`) | runs that ended on this replica |
//! | `dlock.scheduler.fire.delay` | histogram, s | `job` | from an occurrence's fire time (nominal + jitter) to its run's start (first attempts), by this replica's clock |
//! | `dlock.scheduler.retries` | counter | `job`, `after` (`failed`, `cancelled`, `abandoned`) | attempts of at-least-once runs that this replica found failed or abandoned and scheduled again |
//!
//! Job names are labels: they are a fixed set of the application's, unlike lock names. Without
//! the feature the functions are empty and inlined away.

use std::time::Duration;

/// A run of `job` started `delay` after its fire time.
#[cfg(feature = "metrics")]
pub(crate) fn started(job: &str, delay: Duration) {
    metrics::histogram!("dlock.scheduler.fire.delay", "job" => job.to_owned())
        .record(delay.as_secs_f64());
}

/// A run of `job` ended with `outcome` (the ledger's code).
#[cfg(feature = "metrics")]
pub(crate) fn ended(job: &str, outcome: &'static str) {
    metrics::counter!("dlock.scheduler.occurrences", "job" => job.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// An attempt of `job` ended with `after` and its run's next attempt was scheduled.
#[cfg(feature = "metrics")]
pub(crate) fn retried(job: &str, after: &'static str) {
    metrics::counter!("dlock.scheduler.retries", "job" => job.to_owned(), "after" => after)
        .increment(1);
}

/// Describes the scheduler's metrics to the installed recorder.
#[cfg(feature = "metrics")]
pub(crate) fn describe() {
    metrics::describe_counter!(
        "dlock.scheduler.occurrences",
        "Scheduler runs that ended on this replica, by outcome"
    );
    metrics::describe_counter!(
        "dlock.scheduler.retries",
        "Attempts of at-least-once runs that failed or were abandoned and were scheduled again"
    );
    metrics::describe_histogram!(
        "dlock.scheduler.fire.delay",
        metrics::Unit::Seconds,
        "From an occurrence's fire time to its run's start"
    );
}

#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn started(_: &str, _: Duration) {}

#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn ended(_: &str, _: &'static str) {}

#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn describe() {}

#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn retried(_: &str, _: &'static str) {}
