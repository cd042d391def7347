//! Counters of the layers through the `metrics` facade (feature `metrics`), labelled by the
//! layer's or limiter's name and an outcome: never by a key, a principal or an address, whose
//! number is unbounded. Without the feature, every call is empty.

/// Counts one request of the idempotency layer `layer` that ended in `outcome`
/// (`dlock_tower_idempotency_requests_total`).
pub(crate) fn idempotency(layer: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "dlock_tower_idempotency_requests_total",
        "layer" => layer.to_owned(),
        "outcome" => outcome
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (layer, outcome);
}
/// Counts one decision of the rate limit layer `limiter` (`dlock_tower_rate_limit_requests_total`):
/// `admitted`, `limited`, `unchecked` (Redis down, failing open) or `unavailable` (failing
/// closed).
pub(crate) fn rate_limit(limiter: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "dlock_tower_rate_limit_requests_total",
        "limiter" => limiter.to_owned(),
        "outcome" => outcome
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (limiter, outcome);
}
