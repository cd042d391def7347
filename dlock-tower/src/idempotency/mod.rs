//! [`IdempotencyLayer`]: the `Idempotency-Key` header of draft-ietf-httpapi-idempotency-key-header
//! (revision 07) on a dlock mutex per key, with the response stored by a guarded write under
//! the request's lease.
//!
//! * [`key`]: the header's value (a Structured Field String, or bare).
//! * [`record`]: the record in Redis, its versioned wire format, the fingerprint and scope.
//! * [`service`]: what one request goes through (read, lock, run, store, release).
//! * [`response`]: the stored response: collected within a limit, replayed.

mod key;
mod record;
mod response;
mod service;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderName, Method};
use dlock_core::{Client, FencingToken, Lease};

use crate::error::{Error, Result};

pub use service::IdempotencyService;

/// The header that marks a replayed response: `Idempotent-Replayed: true` (the name Stripe's
/// API uses; the draft defines none).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The request header the draft defines.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// How the layer finds who is asking: from the request's parts (after the authentication
/// middleware put its result in the extensions). `None` is the anonymous principal.
type PrincipalFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// What the handler of a first (or recovered) request can read from the request's extensions
/// (`axum::Extension<Idempotency>`): the lease it runs under, its fencing token, and whether a
/// previous attempt with the key lost its lease or died (the record was recoverable).
///
/// Exactly-once effects need the handler to write under [`Idempotency::fence`] in its own
/// store, in the transaction that records the key: the layer's promise stops at Redis.
#[derive(Clone)]
pub struct Idempotency {
    lease: Lease,
    fence: FencingToken,
    key: String,
    recovered: bool,
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

/// A tower [`Layer`](tower_layer::Layer) that makes POST and PATCH requests with an
/// `Idempotency-Key` safe to retry, across every replica that shares the Redis; see the crate
/// docs for the behaviour, status codes and promises. Made by [`IdempotencyLayer::builder`].
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_tower::Error> {
/// use axum::{Router, routing::post};
/// use dlock_tower::IdempotencyLayer;
///
/// let idempotency = IdempotencyLayer::builder(client, "payments")
///     .required(true)
///     // after authentication: the principal comes from what it put in the extensions
///     .principal(|parts| parts.headers.get("x-user").and_then(|v| v.to_str().ok()).map(String::from))
///     .build()?;
/// let app: Router = Router::new()
///     .route("/orders/{id}/pay", post(|| async { "paid" }))
///     .route_layer(idempotency);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    config: Arc<Config>,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl<S> tower_layer::Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService::new(self.config.clone(), inner)
    }
}

/// The settings of an [`IdempotencyLayer`], checked by [`IdempotencyBuilder::build`].
#[must_use = "nothing is checked or built until `build` is called"]
pub struct IdempotencyBuilder {
    config: Config,
}

impl fmt::Debug for IdempotencyBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyBuilder")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl IdempotencyLayer {
    /// The settings of a layer named `name` (in its locks' names, its logs and metrics; one
    /// name per API whose keys must not meet another's) on `client`, with the defaults: key
    /// optional, POST and PATCH, anonymous principal, records kept 24 h, a 30 s lease renewed
    /// by the watchdog, request bodies up to 1 MiB, stored response bodies up to 1 MiB, 5xx
    /// not stored, Redis down answered 503, `Retry-After: 1`.
    pub fn builder(client: Client, name: impl Into<String>) -> IdempotencyBuilder {
        IdempotencyBuilder {
            config: Config {
                client,
                name: name.into(),
                required: false,
                methods: vec![Method::POST, Method::PATCH],
                principal: None,
                fingerprint_headers: Vec::new(),
                replay_headers: vec![
                    HeaderName::from_static("content-type"),
                    HeaderName::from_static("location"),
                ],
                expiry: Duration::from_secs(24 * 3_600),
                lease: Duration::from_secs(30),
                max_request_body: 1 << 20,
                max_response_body: 1 << 20,
                store_server_errors: false,
                fail_open: false,
                retry_after: Duration::from_secs(1),
                record_prefix: "idempotency:".into(),
            },
        }
    }
}

impl IdempotencyBuilder {
    /// Whether a request without the header is refused with 400 (`true`) or passes through
    /// without protection (`false`, the default).
    pub fn required(mut self, required: bool) -> Self {
        self.config.required = required;
        self
    }

    /// The methods the layer applies to (default POST and PATCH); others pass through.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config.methods = methods.into_iter().collect();
        self
    }

    /// Who is asking, from the request's parts: records are scoped by it, so two users' equal
    /// keys never meet. Put the layer after the authentication middleware and read what it
    /// stored (an extension, a verified header). `None` is the anonymous principal.
    pub fn principal(
        mut self,
        principal: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.config.principal = Some(Arc::new(principal));
        self
    }

    /// Request headers that are part of the fingerprint besides the method, the path and query
    /// and the body (e.g. `content-type`, a tenant header). Default none.
    pub fn fingerprint_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.config.fingerprint_headers = names.into_iter().collect();
        self
    }

    /// Response headers stored and replayed (default `content-type` and `location`). Values
    /// that are not visible ASCII are not stored.
    pub fn replay_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.config.replay_headers = names.into_iter().collect();
        self
    }

    /// How long a record is kept after the request started (default 24 h): a retry after that
    /// runs as a new request.
    pub fn expiry(mut self, expiry: Duration) -> Self {
        self.config.expiry = expiry;
        self
    }

    /// The lease of a key's lock while its request runs, renewed by the watchdog every third
    /// (default 30 s): a replica that dies mid-request blocks its key's retries this long.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// The largest request body read (default 1 MiB; larger: 413). The body is read whole
    /// before the handler runs: the fingerprint needs its digest.
    pub fn max_request_body(mut self, bytes: usize) -> Self {
        self.config.max_request_body = bytes;
        self
    }

    /// The largest response body stored (default 1 MiB). A larger one is streamed to the
    /// client as it comes, and stored without its body: a replay has the status and headers,
    /// an empty body and `Idempotency-Body-Omitted: <length>`.
    pub fn max_response_body(mut self, bytes: usize) -> Self {
        self.config.max_response_body = bytes;
        self
    }

    /// Whether 5xx responses are stored and replayed (default `false`: the record is removed,
    /// and a retry runs again).
    pub fn store_server_errors(mut self, store: bool) -> Self {
        self.config.store_server_errors = store;
        self
    }

    /// When Redis cannot be reached: `false` (default) answers 503 with `Retry-After`; `true`
    /// runs the handler without protection (logged).
    pub fn fail_open(mut self, open: bool) -> Self {
        self.config.fail_open = open;
        self
    }

    /// The `Retry-After` of a 409 (a request with the key is in progress) and of a 503
    /// (default 1 s).
    pub fn retry_after(mut self, wait: Duration) -> Self {
        self.config.retry_after = wait;
        self
    }

    /// The prefix of the record keys (default `idempotency:`); the record of a lock `L` is
    /// `<prefix>{L}`, in the lock's cluster slot. It must lie outside the client's key prefix
    /// (a guarded write never touches dlock's own keys).
    pub fn record_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.record_prefix = prefix.into();
        self
    }

    /// The layer.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a name that is empty, longer than 64 bytes or
    /// not made of letters, digits and `-_.`; an expiry under 1 s or a lease under 1 s (or
    /// longer than the expiry); a zero body limit; no methods; a record prefix with braces or
    /// under the client's key prefix.
    pub fn build(self) -> Result<IdempotencyLayer> {
        let c = &self.config;
        if c.name.is_empty()
            || c.name.len() > 64
            || !c
                .name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
        {
            return Err(Error::invalid(format!(
                "idempotency layer name {:?}: give 1 to 64 letters, digits, `-`, `_` or `.`",
                c.name
            )));
        }
        if c.expiry < Duration::from_secs(1) || c.lease < Duration::from_secs(1) {
            return Err(Error::invalid(
                "idempotency layer: the expiry and the lease must be at least 1 s",
            ));
        }
        if c.lease > c.expiry {
            return Err(Error::invalid(format!(
                "idempotency layer: the lease ({:?}) is longer than the record expiry ({:?}); a \
                 record must outlive the request that writes it",
                c.lease, c.expiry
            )));
        }
        if c.max_request_body == 0 || c.max_response_body == 0 || c.methods.is_empty() {
            return Err(Error::invalid(
                "idempotency layer: the body limits must be at least 1 byte, and at least one \
                 method must be protected",
            ));
        }
        let prefix = c.client.key_prefix();
        if c.record_prefix.contains(['{', '}'])
            || (!prefix.is_empty() && c.record_prefix.starts_with(prefix))
        {
            return Err(Error::invalid(format!(
                "idempotency layer: record prefix {:?} has braces or lies under the client's key \
                 prefix {prefix:?}, where dlock keeps its own keys; choose another",
                c.record_prefix
            )));
        }
        Ok(IdempotencyLayer {
            config: Arc::new(self.config),
        })
    }
}
