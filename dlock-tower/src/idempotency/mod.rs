//! [`IdempotencyLayer`]: the `Idempotency-Key` header of draft-ietf-httpapi-idempotency-key-header
//! (revision 07) on a dlock mutex per key, with the response stored by a guarded write under
//! the request's lease.
//!
//! * [`config`]: the header names, the handler's [`Idempotency`] context, the settings.
//! * [`key`]: the header's value (a Structured Field String, or bare).
//! * [`record`]: the record in Redis, its versioned wire format, the fingerprint and scope.
//! * [`service`]: what one request goes through (read, lock, run, store, release).
//! * [`response`]: the stored response: collected within a limit, replayed.

mod config;
mod key;
mod record;
mod response;
mod service;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderName, Method};
use dlock_core::Client;

use crate::error::{Error, Result};
use config::Config;

pub use config::{IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, Idempotency};
pub use service::IdempotencyService;

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
    /// and a retry runs again). A response with `Retry-After` is never stored.
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
