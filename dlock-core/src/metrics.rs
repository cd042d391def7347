//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`, off by
//! default): the application installs the exporter it wants (Prometheus, OpenTelemetry, …);
//! without one, or without the feature, every call here costs nothing (the functions are empty
//! and inlined away).
//!
//! Names follow OpenTelemetry's conventions (dotted, `dlock.` prefix, durations in seconds,
//! described with their unit, counters without a `_total` of their own): an exporter maps them
//! to its system's conventions. `metrics-exporter-prometheus` turns `dlock.acquire.duration`
//! into `dlock_acquire_duration`, or `dlock_acquire_duration_seconds` with
//! `PrometheusBuilder::set_enable_unit_suffix(true)` (as `examples/web` does, on 0.18, whose
//! `# TYPE` lines carry the suffix too); it adds no `_total` to counters (`dlock_lease_lost`);
//! its `with_recommended_naming(true)` and an OpenTelemetry Prometheus exporter do
//! (`dlock_lease_lost_total`). Naming the counters `….total` here would give that exporter
//! `_total_total`, so the names stay as they are (see CHANGELOG.md, 0.x "metrics").
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `dlock.acquire.duration` | histogram, s | `kind`, `lock`, `outcome` (`acquired`, `busy`, `timeout`, `error`), `contended` (`true`, `false`) | one acquire call, from the call to its answer |
//! | `dlock.wait.duration` | histogram, s | `kind`, `lock` | time spent queued, for acquisitions that queued |
//! | `dlock.hold.duration` | histogram, s | `kind`, `lock` | from the grant to the release or the loss |
//! | `dlock.lease.lost` | counter | `kind`, `lock`, `reason` | leases lost (`expired`, `taken_over`, `removed`, `unreachable`, `paused`, `max_hold`) |
//! | `dlock.lease.suspect` | counter | `kind`, `lock` | leases that became suspect: a watchdog renewal unacknowledged for one renewal interval while the lease still stood |
//! | `dlock.lease.recovered` | counter | `kind`, `lock` | suspect leases whose renewal was then acknowledged (held again) |
//! | `dlock.release.requested` | counter | `kind`, `lock` | holders that learnt someone asked them to give the lock back ([`crate::Client::request_release`]) |
//! | `dlock.rate.allowed` | counter | `limiter` | cells admitted by a rate limiter (also without a decision, failing open: `unchecked="true"`) |
//! | `dlock.rate.limited` | counter | `limiter` | cells refused (a `try_acquire` limited, an `acquire_timeout` whose slot was too far) |
//! | `dlock.rate.wait` | histogram, s | `limiter` | how long an `acquire` slept until its slot |
//! | `dlock.held` | gauge | `kind`, `lock` | leases held now (not yet released or lost) |
//! | `dlock.waiting` | gauge | `kind`, `lock` | acquire calls queued now |
//! | `dlock.wake.fallback` | counter | `kind`, `lock` | a waiter woke by its fallback timer, not by a push (a lost message, or a holder whose lease ran out) |
//! | `dlock.renewals` | counter | — | leases renewed by the watchdog |
//! | `dlock.renewal.duration` | histogram, s | — | one renewal request (a batch of up to 100 leases) |
//! | `dlock.renewal.margin` | histogram, s | — | how much of the lease was certainly left when its renewal was sent |
//!
//! `kind` is `mutex`, `semaphore` or `rwlock` (multi-locks, elections and quorum locks are
//! made of mutexes). **No label carries the lock name**: names are unbounded (`order:42`,
//! `order:43`, …) and would make one time series each. `lock` is the holder label instead
//! ([`crate::MutexOptions::label`], the macro's `label = "…"`), [`NO_LABEL`] (`"(none)"`) when
//! none was set: keep labels to a bounded set (a code path, a job name), not per-request values.
//!
//! **Series that exist before any traffic.** When a client is built (which is when the
//! recorder learns the descriptions), the label-free metrics and a fixed set are registered at
//! zero, so that a scrape lists them and `rate()` has a starting point: `dlock.renewals`,
//! `dlock.renewal.duration`, `dlock.renewal.margin`; for each `kind` with `lock="(none)"`:
//! `dlock.acquire.duration` for each `outcome` (with the `contended` value that outcome
//! usually has: `true` for `timeout`, else `false`), `dlock.lease.lost` for each `reason`,
//! `dlock.lease.suspect`, `dlock.lease.recovered`, `dlock.release.requested`, and the gauges `dlock.held` and `dlock.waiting`. Series of labelled locks appear with their
//! first use.

use std::time::Duration;

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
/// The `lock` label of a lock without a label ([`crate::MutexOptions::label`] not set): one
/// documented value rather than an empty one, which some systems drop or show as missing.
pub(crate) const NO_LABEL: &str = "(none)";

/// The `lock` label for `label` (a lock's label, empty when none was set).
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn lock_label(label: &str) -> String {
    if label.is_empty() {
        NO_LABEL.to_owned()
    } else {
        label.to_owned()
    }
}

/// Every `kind` label.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const KINDS: [&str; 3] = ["mutex", "semaphore", "rwlock"];

/// Every `reason` label of `dlock.lease.lost`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const LOST_REASONS: [&str; 5] = [
    "expired",
    "taken_over",
    "removed",
    "unreachable",
    "max_hold",
];

/// How an acquire call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// Refused at once (`try_acquire`, or a zero wait).
    Busy,
    /// The wait ran out.
    Timeout,
    Error,
}

impl Outcome {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            Self::Acquired => "acquired",
            Self::Busy => "busy",
            Self::Timeout => "timeout",
            Self::Error => "error",
        }
    }

    /// The outcome of an acquire that ended without the lock: `Busy` or `Timeout` by whether
    /// it could wait (`wait`: `None` without limit, zero for one attempt), else `Error`.
    pub(crate) fn refused(error: Option<&crate::Error>, wait: Option<Duration>) -> Self {
        match error {
            Some(e) if !e.is_busy() => Self::Error,
            _ if wait == Some(Duration::ZERO) => Self::Busy,
            _ => Self::Timeout,
        }
    }
}

#[cfg(feature = "metrics")]
mod on {
    use std::time::{Duration, Instant};

    use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram};
    use metrics::{gauge, histogram};

    use super::{KINDS, LOST_REASONS, NO_LABEL, Outcome, RateOutcome, Suspicion, lock_label};

    /// Describes every metric (unit and help text) to the installed recorder, and registers
    /// the series listed in the module's docs at zero; called by each client's build (cheap,
    /// and a recorder installed between two builds learns them too).
    pub(crate) fn describe() {
        describe_all();
        register_at_zero();
    }

    /// Registers, at zero, the series a scrape lists before any traffic (module docs).
    fn register_at_zero() {
        counter!("dlock.renewals").increment(0);
        // A histogram handle registers its series; its count and sum stay zero.
        let _ = histogram!("dlock.renewal.duration");
        let _ = histogram!("dlock.renewal.margin");
        for kind in KINDS {
            for outcome in [
                Outcome::Acquired,
                Outcome::Busy,
                Outcome::Timeout,
                Outcome::Error,
            ] {
                let contended = if outcome == Outcome::Timeout {
                    "true"
                } else {
                    "false"
                };
                let _ = histogram!(
                    "dlock.acquire.duration",
                    "kind" => kind,
                    "lock" => NO_LABEL,
                    "outcome" => outcome.as_str(),
                    "contended" => contended,
                );
            }
            for reason in LOST_REASONS {
                counter!("dlock.lease.lost", "kind" => kind, "lock" => NO_LABEL, "reason" => reason)
                    .increment(0);
            }
            counter!("dlock.release.requested", "kind" => kind, "lock" => NO_LABEL).increment(0);
            for suspicion in [Suspicion::Suspect, Suspicion::Recovered] {
                counter!(suspicion.metric(), "kind" => kind, "lock" => NO_LABEL).increment(0);
            }
            gauge!("dlock.held", "kind" => kind, "lock" => NO_LABEL).increment(0.0);
            gauge!("dlock.waiting", "kind" => kind, "lock" => NO_LABEL).increment(0.0);
        }
    }

    fn describe_all() {
        {
            describe_histogram!(
                "dlock.acquire.duration",
                Unit::Seconds,
                "One acquire call, from the call to its answer"
            );
            describe_histogram!("dlock.wait.duration", Unit::Seconds, "Time spent queued");
            describe_histogram!(
                "dlock.hold.duration",
                Unit::Seconds,
                "From the grant to the release or the loss"
            );
            describe_counter!("dlock.lease.lost", "Leases lost, by reason");
            describe_counter!(
                "dlock.lease.suspect",
                "Leases whose renewal went unacknowledged for a renewal interval"
            );
            describe_counter!("dlock.rate.allowed", "Cells admitted by a rate limiter");
            describe_counter!("dlock.rate.limited", "Cells refused by a rate limiter");
            describe_histogram!(
                "dlock.rate.wait",
                Unit::Seconds,
                "How long an acquire slept until its slot"
            );
            describe_counter!(
                "dlock.release.requested",
                "Holders that learnt someone asked them to release the lock"
            );
            describe_counter!(
                "dlock.lease.recovered",
                "Suspect leases whose renewal was then acknowledged"
            );
            describe_gauge!("dlock.held", "Leases held now");
            describe_gauge!("dlock.waiting", "Acquire calls queued now");
            describe_counter!(
                "dlock.wake.fallback",
                "Waiters woken by their fallback timer rather than a push"
            );
            describe_counter!("dlock.renewals", "Leases renewed by the watchdog");
            describe_histogram!(
                "dlock.renewal.duration",
                Unit::Seconds,
                "One renewal request (a batch of leases)"
            );
            describe_histogram!(
                "dlock.renewal.margin",
                Unit::Seconds,
                "Lease certainly left when its renewal was sent"
            );
        }
    }

    pub(crate) fn acquire(
        kind: &'static str,
        lock: &str,
        outcome: Outcome,
        contended: bool,
        took: Duration,
    ) {
        histogram!(
            "dlock.acquire.duration",
            "kind" => kind,
            "lock" => lock_label(lock),
            "outcome" => outcome.as_str(),
            "contended" => if contended { "true" } else { "false" },
        )
        .record(took.as_secs_f64());
    }

    pub(crate) fn fallback_wake(kind: &'static str, lock: &str) {
        counter!("dlock.wake.fallback", "kind" => kind, "lock" => lock_label(lock)).increment(1);
    }

    pub(crate) fn held(kind: &'static str, lock: &str) {
        gauge!("dlock.held", "kind" => kind, "lock" => lock_label(lock)).increment(1.0);
    }

    pub(crate) fn settled(
        kind: &'static str,
        lock: &str,
        held_for: Duration,
        reason: Option<&'static str>,
    ) {
        gauge!("dlock.held", "kind" => kind, "lock" => lock_label(lock)).decrement(1.0);
        histogram!("dlock.hold.duration", "kind" => kind, "lock" => lock_label(lock))
            .record(held_for.as_secs_f64());
        if let Some(reason) = reason {
            counter!(
                "dlock.lease.lost",
                "kind" => kind,
                "lock" => lock_label(lock),
                "reason" => reason,
            )
            .increment(1);
        }
    }

    pub(crate) fn rate(limiter: &str, outcome: RateOutcome, cells: u32) {
        match outcome {
            RateOutcome::Allowed => counter!("dlock.rate.allowed", "limiter" => limiter.to_owned(), "unchecked" => "false")
                .increment(u64::from(cells)),
            RateOutcome::Unchecked => counter!("dlock.rate.allowed", "limiter" => limiter.to_owned(), "unchecked" => "true")
                .increment(u64::from(cells)),
            RateOutcome::Limited => counter!("dlock.rate.limited", "limiter" => limiter.to_owned())
                .increment(u64::from(cells)),
        }
    }

    pub(crate) fn rate_wait(limiter: &str, waited: Duration) {
        histogram!("dlock.rate.wait", "limiter" => limiter.to_owned()).record(waited.as_secs_f64());
    }

    pub(crate) fn release_requested(kind: &'static str, lock: &str) {
        counter!("dlock.release.requested", "kind" => kind, "lock" => lock_label(lock))
            .increment(1);
    }

    pub(crate) fn suspicion(kind: &'static str, lock: &str, which: Suspicion) {
        counter!(which.metric(), "kind" => kind, "lock" => lock_label(lock)).increment(1);
    }

    pub(crate) fn renewed(margin: Duration) {
        counter!("dlock.renewals").increment(1);
        histogram!("dlock.renewal.margin").record(margin.as_secs_f64());
    }

    pub(crate) fn renewal_request(took: Duration) {
        histogram!("dlock.renewal.duration").record(took.as_secs_f64());
    }

    /// An acquire call queued: counted in `dlock.waiting` until dropped, then its time queued
    /// goes to `dlock.wait.duration`.
    pub(crate) struct Waiting {
        kind: &'static str,
        lock: String,
        since: Instant,
    }

    impl Waiting {
        pub(crate) fn start(kind: &'static str, lock: &str) -> Self {
            gauge!("dlock.waiting", "kind" => kind, "lock" => lock_label(lock)).increment(1.0);
            Self {
                kind,
                lock: lock_label(lock),
                since: Instant::now(),
            }
        }
    }

    impl Drop for Waiting {
        fn drop(&mut self) {
            gauge!("dlock.waiting", "kind" => self.kind, "lock" => self.lock.clone())
                .decrement(1.0);
            histogram!("dlock.wait.duration", "kind" => self.kind, "lock" => self.lock.clone())
                .record(self.since.elapsed().as_secs_f64());
        }
    }
}

#[cfg(feature = "metrics")]
pub(crate) use on::{
    Waiting, acquire, describe, fallback_wake, held, rate, rate_wait, release_requested,
    renewal_request, renewed, settled, suspicion,
};

#[cfg(not(feature = "metrics"))]
mod off {
    use std::time::Duration;

    use super::Outcome;

    #[inline(always)]
    pub(crate) fn describe() {}
    #[inline(always)]
    pub(crate) fn acquire(_: &'static str, _: &str, _: Outcome, _: bool, _: Duration) {}
    #[inline(always)]
    pub(crate) fn fallback_wake(_: &'static str, _: &str) {}
    #[inline(always)]
    pub(crate) fn held(_: &'static str, _: &str) {}
    #[inline(always)]
    pub(crate) fn settled(_: &'static str, _: &str, _: Duration, _: Option<&'static str>) {}
    #[inline(always)]
    pub(crate) fn rate(_: &str, _: super::RateOutcome, _: u32) {}
    #[inline(always)]
    pub(crate) fn rate_wait(_: &str, _: Duration) {}
    #[inline(always)]
    pub(crate) fn release_requested(_: &'static str, _: &str) {}
    #[inline(always)]
    pub(crate) fn suspicion(_: &'static str, _: &str, _: super::Suspicion) {}
    #[inline(always)]
    pub(crate) fn renewed(_: Duration) {}
    #[inline(always)]
    pub(crate) fn renewal_request(_: Duration) {}

    /// Zero-sized without the feature.
    pub(crate) struct Waiting;

    impl Waiting {
        #[inline(always)]
        pub(crate) fn start(_: &'static str, _: &str) -> Self {
            Self
        }
    }
}

#[cfg(not(feature = "metrics"))]
pub(crate) use off::{
    Waiting, acquire, describe, fallback_wake, held, rate, rate_wait, release_requested,
    renewal_request, renewed, settled, suspicion,
};

/// What a rate limiter decided, counted in `dlock.rate.allowed` / `dlock.rate.limited`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RateOutcome {
    /// Admitted by the server.
    Allowed,
    /// Admitted without a decision (failing open).
    Unchecked,
    /// Refused.
    Limited,
}

/// A change of a lease's suspicion, counted in `dlock.lease.suspect` / `dlock.lease.recovered`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suspicion {
    /// The lease became suspect.
    Suspect,
    /// A suspect lease's renewal was acknowledged.
    Recovered,
}

impl Suspicion {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn metric(self) -> &'static str {
        match self {
            Self::Suspect => "dlock.lease.suspect",
            Self::Recovered => "dlock.lease.recovered",
        }
    }
}

/// Whether a duration is worth measuring: computing `Instant::now()` costs ~20 ns, which the
/// uncontended path does not pay without the feature.
pub(crate) const ENABLED: bool = cfg!(feature = "metrics");

/// The time since `started` when metrics are on, zero otherwise (no clock read).
#[inline(always)]
pub(crate) fn since(started: std::time::Instant) -> Duration {
    if ENABLED {
        started.elapsed()
    } else {
        Duration::ZERO
    }
}
