//! The RateLimit header fields of draft-ietf-httpapi-ratelimit-headers **revision 10**: both
//! Structured Field Lists of one Item, a String naming the policy, with parameters.
//!
//! * `RateLimit-Policy: "<policy>";q=<quota>;w=<window>`: the quota `q` per window of `w`
//!   seconds. A GCRA quota is a rate (one cell per interval) and a burst; it is advertised as
//!   its rate over a whole number of seconds: `w` is the interval rounded up to a second (at
//!   least 1), `q` how many intervals fit in it (`Quota::per_second(200)`: `q=200;w=1`). The
//!   burst is not advertised; `RateLimit`'s `r` shows it.
//! * `RateLimit: "<policy>";r=<remaining>;t=<seconds>`: cells that would be admitted now, and
//!   when the quota is whole again (admitted) or when the next cell conforms (limited), in
//!   seconds rounded up.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use dlock_core::Quota;

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The `RateLimit-Policy` value of `policy` (a name of letters, digits and `-_.:`, so it needs
/// no escaping in an sf-string).
pub(crate) fn policy(policy: &str, quota: &Quota) -> Option<HeaderValue> {
    let interval = quota.interval().as_secs_f64();
    let window = interval.ceil().max(1.0);
    let q = (window / interval).floor().max(1.0);
    HeaderValue::from_str(&format!("\"{policy}\";q={q};w={window}")).ok()
}

/// The `RateLimit` value: `remaining` cells now, the quota whole again (or the next cell) in
/// `reset`.
pub(crate) fn limit(policy: &str, remaining: u32, reset: Duration) -> Option<HeaderValue> {
    let t = reset.as_secs() + u64::from(reset.subsec_nanos() > 0);
    HeaderValue::from_str(&format!("\"{policy}\";r={remaining};t={t}")).ok()
}

/// How long until a bucket with `remaining` of `quota`'s burst left is whole again.
pub(crate) fn refill(quota: &Quota, remaining: u32) -> Duration {
    let missing = quota.burst_size().saturating_sub(remaining);
    quota.interval().saturating_mul(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_their_rate_over_whole_seconds() {
        let p = |q: Quota| policy("api", &q).unwrap().to_str().unwrap().to_owned();
        assert_eq!(p(Quota::per_second(200).burst(20)), "\"api\";q=200;w=1");
        assert_eq!(p(Quota::per_minute(30)), "\"api\";q=1;w=2");
        assert_eq!(p(Quota::per_hour(1)), "\"api\";q=1;w=3600");
    }

    #[test]
    fn limits_round_the_reset_up() {
        let v = limit("api", 3, Duration::from_millis(1_200)).unwrap();
        assert_eq!(v.to_str().unwrap(), "\"api\";r=3;t=2");
        assert_eq!(
            limit("api", 0, Duration::ZERO).unwrap().to_str().unwrap(),
            "\"api\";r=0;t=0"
        );
        let q = Quota::per_second(10).burst(5);
        assert_eq!(refill(&q, 5), Duration::ZERO);
        assert_eq!(refill(&q, 2), Duration::from_millis(300));
    }
}
