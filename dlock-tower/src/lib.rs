//! Tower layers for axum on dlock: the front door of a web app that runs as several replicas.
//!
//! | item | what it does |
//! |---|---|
//! | [`IdempotencyLayer`] | the `Idempotency-Key` header of draft-ietf-httpapi-idempotency-key-header **revision 07**: one execution per key at a time, the response stored and replayed |
//! | [`RateLimitLayer`] | a rate limit shared by every replica (dlock-core's GCRA on the Redis server's clock), with the `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers **revision 10** |
//! | [`SingleFlightExt::single_flight`] | one replica computes, the others receive its result |
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{Router, routing::{get, post}};
//! use dlock_core::{Client, Quota};
//! use dlock_tower::{IdempotencyLayer, KeyBy, RateLimitLayer, TrustedProxies};
//!
//! let client = Client::builder("redis://127.0.0.1:6379/").connect().await?;
//! let pay = Router::new()
//!     .route("/orders/{id}/pay", post(|| async { "paid" }))
//!     .route_layer(IdempotencyLayer::builder(client.clone(), "payments").required(true).build()?);
//! let search = Router::new()
//!     .route("/search", get(|| async { "results" }))
//!     .route_layer(
//!         RateLimitLayer::builder(client, "public")
//!             .key(KeyBy::ClientIp(TrustedProxies::new(["10.0.0.0/8"])?))
//!             .default_quota(Quota::per_second(20).burst(5))
//!             .build()?,
//!     );
//! let app: Router = pay.merge(search);
//! # let _ = app; Ok(()) }
//! ```
//!
//! # IdempotencyLayer
//! **Where it sits:** after authentication. Records are scoped by the principal, which the
//! layer reads from the request's parts ([`IdempotencyBuilder::principal`]) as the
//! authentication middleware left them; without a principal every client shares one scope.
//! Use `route_layer` (or `Router::layer`) so that the matched route is known: records are
//! scoped by the route pattern (`/orders/{id}/pay`), the method and the key.
//!
//! **The key:** `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"` (a Structured Field
//! String, as the draft has it) or the same without quotes, up to 255 bytes. Optional by
//! default (a request without it passes unprotected), or required ([`IdempotencyBuilder::required`]).
//!
//! **The fingerprint** covers the method, the path and query, the SHA-256 of the body and the
//! request headers you choose ([`IdempotencyBuilder::fingerprint_headers`]).
//!
//! | the request | the answer |
//! |---|---|
//! | POST or PATCH without the key, key required | `400`, problem details (`application/problem+json`), `code: "missing_key"` |
//! | a malformed key, or two | `400` |
//! | a body over the limit (1 MiB) | `413` |
//! | the first with its key | the handler runs under the key's lock; its response is stored |
//! | the same key and fingerprint, completed | the stored status, chosen headers and body, with `Idempotent-Replayed: true` |
//! | the same key, another fingerprint (completed or in progress) | `422` |
//! | the same key while a request with it runs | `409` with `Retry-After` |
//! | Redis unreachable | `503` with `Retry-After` (fail closed, default), or the handler runs unprotected ([`IdempotencyBuilder::fail_open`]) |
//! | a record this version cannot read (another format version) | `500`; the record is left as it is |
//!
//! **How a first request runs:** the layer takes the key's dlock mutex with a watchdog lease
//! (never waiting: a held key is a 409), marks the record `running` with a guarded write under
//! that lease, runs the handler with [`Idempotency`] in the request's extensions (the lease, a
//! fencing token, whether this is a recovery), then stores the response **by a guarded write
//! under the same lease** ([`dlock_core::GuardedWrite`]: the ownership check and the write in
//! one script) and only then releases the lock. A holder whose lease was lost (a pause, a
//! partition) stores nothing, whatever it computed; its client still receives its response.
//!
//! **A lost lease** leaves the record `running` with its lock free: the next request with the
//! key finds it recoverable and runs again, under a new, larger fencing token
//! ([`Idempotency::recovered`], [`Idempotency::fence`]). The same for a request whose client
//! hung up (hyper drops the request's future: the handler stops where it was, the lock is
//! released in the background), a handler that panicked, and a replica that died.
//!
//! **Expiry:** a record lives 24 h from its request's start ([`IdempotencyBuilder::expiry`]);
//! a retry after that runs as a new request.
//!
//! **5xx responses** are not stored by default: the record is removed and a retry runs again
//! ([`IdempotencyBuilder::store_server_errors`]). Nor is any response with `Retry-After` (the
//! handler's own "in progress, retry" or "rate limited"): replaying "retry later" for a day
//! would contradict it.
//!
//! **Problem bodies** carry a stable `code` member besides RFC 9457's: `missing_key`,
//! `bad_key`, `too_large`, `in_progress` (409), `key_reused` (422), `unavailable` (503),
//! `internal`; the rate limit's 429 is `rate_limited`. A service whose own "in progress,
//! retry" 409 says `code: "in_progress"` with `Retry-After` shows its clients one kind of 409.
//!
//! **Streaming bodies.** The request body is read whole before the handler runs (its digest is
//! part of the fingerprint), up to `max_request_body`: the layer is for API calls, not uploads.
//! The response body is read up to `max_response_body` (1 MiB) before it is stored and sent;
//! a longer one (a stream, a download) is sent on as it comes, after what was read, and its
//! record keeps the status and headers only: a replay has an empty body and
//! `Idempotency-Body-Omitted: <length>`. Trailers are not stored.
//!
//! **The record** is one Redis string per scope, `idempotency:{idem:<layer>:<scope digest>}`,
//! in the cluster slot of its lock; its format is versioned (`dlock-idempotency/1`, see the
//! source of `idempotency/record.rs`) and a reader refuses any other version.
//!
//! **What it promises:** one execution at a time per key; no response stored by a holder that
//! lost its lease; a stored response never replaced (only the lock's holder writes, after
//! finding no completed record under the lock). **What it cannot promise:** that a handler's
//! effect happens once. A holder paused past its lease, or killed after its effect committed,
//! is retried. Exactly-once effects need the handler to record the key and write under the
//! request's fence ([`Idempotency::fence`]) in one transaction of its own store.
//!
//! # RateLimitLayer
//! Each request spends one cell of its key's budget in its route group
//! ([`RateLimitBuilder::group`], [`RateLimitBuilder::default_quota`]); the budget is dlock-core's
//! [`dlock_core::KeyedRateLimiter`], decided in one script on the Redis server's clock, so every
//! replica shares it exactly. Keys: [`KeyBy`] (client IP with a trusted-proxy rule, a header,
//! the principal, the route). Admitted responses carry `RateLimit-Policy` and `RateLimit`;
//! a spent budget is `429` with `Retry-After` and both fields; Redis down is `503` or, failing
//! open, admitted without the fields. Metrics (feature `metrics`):
//! `dlock_tower_rate_limit_requests_total{limiter, outcome}`, never labelled by key.
//!
//! # Single-flight
//! [`SingleFlightExt::single_flight`] on a [`dlock_core::Client`]: see its docs and
//! [`SingleFlightOptions`].
//!
//! # Features
//! | feature | default | adds |
//! |---|---|---|
//! | `metrics` | no | counters through the `metrics` facade: `dlock_tower_idempotency_requests_total{layer, outcome}`, `dlock_tower_rate_limit_requests_total{limiter, outcome}` |
//!
//! # Layout
//! From the top floor down; an import points into its own floor or a lower one
//! (`scripts/check-module-cycles.py`).
//!
//! | floor | modules |
//! |---|---|
//! | the layers | `idempotency/` (the layer, the key header, the record's wire format, the request flow), `rate_limit/` (the layer, keys, the RateLimit fields), `single_flight.rs` |
//! | what they share | `problem.rs` (RFC 9457 responses with `Retry-After`), `metrics.rs` (counters labelled by name) |
//! | the ground | `error.rs` ([`Error`], [`ErrorKind`]) |

#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
mod idempotency;
mod metrics;
mod problem;
mod rate_limit;
mod single_flight;

pub use error::{Error, ErrorKind, Result};
pub use idempotency::{
    IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, Idempotency, IdempotencyBuilder, IdempotencyLayer,
    IdempotencyService,
};
pub use rate_limit::{
    KeyBy, RATELIMIT, RATELIMIT_POLICY, RateLimitBuilder, RateLimitLayer, RateLimitService,
    TrustedProxies,
};
pub use single_flight::{SingleFlightExt, SingleFlightOptions};
