//! Tower layers for axum on dlock: the front door of a web app that runs as several replicas.
//!
//! * [`IdempotencyLayer`]: the `Idempotency-Key` header as draft-ietf-httpapi-idempotency-key-header
//!   **revision 07** describes it, on one dlock mutex per key.
//!
//! # Layout
//! | module | what lives there |
//! |---|---|
//! | `idempotency/` | the layer, the key header, the record's wire format, the request flow |
//! | `problem` | RFC 9457 problem responses with `Retry-After` |
//! | `error` | [`Error`], [`ErrorKind`] |
//! | `metrics` | counters labelled by layer or limiter name (feature `metrics`) |

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
