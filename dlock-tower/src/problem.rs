//! Error responses as RFC 9457 problem details (`application/problem+json`), with
//! `Retry-After` where a retry can succeed: the shape the idempotency draft's error scenarios
//! use, shared by both layers. Each carries a stable `code` member (an RFC 9457 extension
//! member) for programs: `missing_key`, `bad_key`, `too_large`, `bad_body`, `in_progress`,
//! `key_reused`, `unavailable`, `internal`, `body_failed`, `rate_limited`; an application whose
//! own errors carry a `code` (its "in progress, retry" 409) can answer with the same one.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};

/// A problem-details response: `status`, a stable `code`, a short `title` and a `detail` for
/// people; with `Retry-After` (whole seconds, at least 1) when `retry_after` is given.
pub(crate) fn problem(
    status: StatusCode,
    code: &str,
    title: &str,
    detail: &str,
    retry_after: Option<Duration>,
) -> Response<Body> {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
        "code": code,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if let Some(wait) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(delay_seconds(wait)));
    }
    response
}

/// `wait` as HTTP delay-seconds: rounded up, at least 1 (a `Retry-After: 0` invites a retry
/// that would meet the same answer).
pub(crate) fn delay_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_seconds_round_up_and_never_say_zero() {
        assert_eq!(delay_seconds(Duration::ZERO), 1);
        assert_eq!(delay_seconds(Duration::from_millis(1)), 1);
        assert_eq!(delay_seconds(Duration::from_millis(1_001)), 2);
        assert_eq!(delay_seconds(Duration::from_secs(3)), 3);
    }
}
