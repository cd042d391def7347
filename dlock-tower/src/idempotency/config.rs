//! What every part of the idempotency layer shares: the header names, the handler's
//! [`Idempotency`] context and the layer's settings ([`Config`]), below the service and the
//! builder that use them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderName, Method};
use dlock_core::{Client, FencingToken, Lease};

/// The header that marks a replayed response: `Idempotent-Replayed: true` (the name Stripe's
/// API uses; the draft defines none).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The request header the draft defines.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// How the layer finds who is asking: from the request's parts (after the authentication
/// middleware put its result in the extensions). `None` is the anonymous principal.
pub(crate) type PrincipalFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// What the handler of a first (or recovered) request can read from the request's extensions
/// (`axum::Extension<Idempotency>`): the lease it runs under, its fencing token, and whether a
/// previous attempt with the key lost its lease or died (the record was recoverable).
///
/// Exactly-once effects need the handler to write under [`Idempotency::fence`] in its own
/// store, in the transaction that records the key: the layer's promise stops at Redis.
#[derive(Clone)]
pub struct Idempotency {
    pub(crate) lease: Lease,
    pub(crate) fence: FencingToken,
    pub(crate) key: String,
    pub(crate) recovered: bool,
}

impl Idempotency {
    /// The lease of the key's lock: [`Lease::lost`] resolves if it is lost while the handler
    /// runs (its response will not be stored then).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing token of this attempt: a retry after a lost lease runs under a larger one.
    pub fn fence(&self) -> FencingToken {
        self.fence
    }

    /// The key the client sent.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether an earlier attempt with this key ran and stored nothing (its lease was lost, or
    /// its process died): this attempt runs again, under a new fence.
    pub fn recovered(&self) -> bool {
        self.recovered
    }
}

impl fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            lease,
            fence,
            key: _,
            recovered,
        } = self;
        f.debug_struct("Idempotency")
            .field("lock", &lease.name())
            .field("fence", fence)
            .field("recovered", recovered)
            .finish_non_exhaustive()
    }
}

/// The settings every request of one layer shares.
pub(crate) struct Config {
    pub(crate) client: Client,
    pub(crate) name: String,
    pub(crate) required: bool,
    pub(crate) methods: Vec<Method>,
    pub(crate) principal: Option<Arc<PrincipalFn>>,
    pub(crate) fingerprint_headers: Vec<HeaderName>,
    pub(crate) replay_headers: Vec<HeaderName>,
    pub(crate) expiry: Duration,
    pub(crate) lease: Duration,
    pub(crate) max_request_body: usize,
    pub(crate) max_response_body: usize,
    pub(crate) store_server_errors: bool,
    pub(crate) fail_open: bool,
    pub(crate) retry_after: Duration,
    pub(crate) record_prefix: String,
}
