//! [`IdempotencyService`]: what one request goes through.
//!
//! 1. No key: 400 when required, else through unprotected. A malformed key: 400.
//! 2. The body is read (413 over the limit); the fingerprint and the record's scope are made.
//! 3. The record is read: a completed one is replayed (same fingerprint) or refused with 422.
//! 4. The key's mutex is tried (never waited for): held by another request, 409 with
//!    `Retry-After` (422 if that request's fingerprint differs).
//! 5. Under the lock, the record is read again (a request may have completed in between), then
//!    marked `running` by a guarded write. A `running` record found with the lock free is the
//!    trace of an attempt that lost its lease or died: recoverable, this attempt runs again.
//! 6. The handler runs with [`Idempotency`] in its extensions; its response is collected and
//!    stored by a guarded write under the same lease, then the lock is released. A holder
//!    whose lease was lost stores nothing (the write is refused atomically).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::MatchedPath;
use axum::http::{Request, Response, StatusCode};
use dlock_core::{Guarded, MutexGuard, MutexOptions};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tower_service::Service;

use super::config::{Config, IDEMPOTENCY_KEY, Idempotency};
use super::key;
use super::record::{self, Record, Stored};
use super::response::{self, Collected};
use crate::error::Error;
use crate::metrics;
use crate::problem::problem;

/// The service an [`super::IdempotencyLayer`] wraps around the inner one.
#[derive(Clone)]
pub struct IdempotencyService<S> {
    config: Arc<Config>,
    inner: S,
}

impl<S> std::fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyService")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl<S> IdempotencyService<S> {
    pub(crate) fn new(config: Arc<Config>, inner: S) -> Self {
        Self { config, inner }
    }
}

impl<S> Service<Request<Body>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The clone that was driven to readiness serves this request (tower's rule).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move { Ok(handle(config, inner, request).await) })
    }
}

/// What the admission decided.
enum Admit {
    /// Answer this without running the handler.
    Answer(Response<Body>),
    /// Run the handler without protection (Redis down, failing open).
    Unprotected,
    /// Run the handler under the key's lock.
    Run {
        guard: MutexGuard,
        fence: u64,
        recovered: bool,
    },
}

/// One request's names: the lock, the record key, the fingerprint.
struct Names {
    key: String,
    lock: String,
    record: String,
    fingerprint: String,
}

async fn handle<S>(config: Arc<Config>, mut inner: S, request: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    if !config.methods.contains(request.method()) {
        return call(&mut inner, request).await;
    }
    let key = match key_of(&config, &request) {
        Ok(Some(key)) => key,
        Ok(None) => return call(&mut inner, request).await,
        Err(refused) => return *refused,
    };
    let (parts, body) = request.into_parts();
    let body = match read_body(&config, body).await {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let names = names(&config, &parts, key, &body);
    let mut request = Request::from_parts(parts, Body::from(body));
    match admit(&config, &names).await {
        Admit::Answer(response) => response,
        Admit::Unprotected => call(&mut inner, request).await,
        Admit::Run {
            guard,
            fence,
            recovered,
        } => {
            request.extensions_mut().insert(Idempotency {
                lease: guard.lease(),
                fence: dlock_core::FencingToken::new(fence),
                key: names.key.clone(),
                recovered,
            });
            let response = call(&mut inner, request).await;
            store(&config, &names, guard, fence, response).await
        }
    }
}

/// Step 1: the request's key; `None` (no header, not required) runs it unprotected; `Err` is
/// the 400 to answer.
fn key_of(config: &Config, request: &Request<Body>) -> Result<Option<String>, Box<Response<Body>>> {
    let malformed = |why: &str| {
        Box::new(refuse(
            config,
            "bad_key",
            StatusCode::BAD_REQUEST,
            "Idempotency-Key is malformed",
            why,
        ))
    };
    let mut values = request.headers().get_all(IDEMPOTENCY_KEY).iter();
    match (values.next(), values.next()) {
        (None, _) if config.required => Err(Box::new(refuse(
            config,
            "missing_key",
            StatusCode::BAD_REQUEST,
            "Idempotency-Key is missing",
            "this operation requires an Idempotency-Key header \
             (draft-ietf-httpapi-idempotency-key-header-07)",
        ))),
        (None, _) => Ok(None),
        (Some(_), Some(_)) => Err(malformed("send one Idempotency-Key header, with one key")),
        (Some(value), None) => key::parse(value.as_bytes())
            .map(Some)
            .map_err(|key::BadKey(why)| malformed(&why)),
    }
}

/// Step 2: the request body, read whole within the limit; `Err` is the 413 or 400 to answer.
async fn read_body(config: &Config, body: Body) -> Result<Bytes, Box<Response<Body>>> {
    match Limited::new(body, config.max_request_body).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(Box::new(refuse(
            config,
            "too_large",
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body too large",
            &format!(
                "an idempotent request's body is read whole (its digest is part of the \
                 fingerprint); the limit is {} bytes",
                config.max_request_body
            ),
        ))),
        Err(_) => Err(Box::new(refuse(
            config,
            "bad_body",
            StatusCode::BAD_REQUEST,
            "Request body unreadable",
            "the request body ended with an error",
        ))),
    }
}

async fn call<S>(inner: &mut S, request: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    match inner.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn names(config: &Config, parts: &axum::http::request::Parts, key: String, body: &Bytes) -> Names {
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_owned(), |m| m.as_str().to_owned());
    let principal = config
        .principal
        .as_ref()
        .and_then(|principal| principal(parts))
        .unwrap_or_default();
    let scope = record::scope(&principal, &parts.method, &route, &key);
    let lock = format!("idem:{}:{scope}", config.name);
    let record = format!("{}{{{lock}}}", config.record_prefix);
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let fingerprint = record::fingerprint(
        &parts.method,
        target,
        &parts.headers,
        &config.fingerprint_headers,
        body,
    );
    Names {
        key,
        lock,
        record,
        fingerprint,
    }
}

/// Steps 3 to 5 of the module docs.
async fn admit(config: &Config, names: &Names) -> Admit {
    match read(config, &names.record).await {
        Err(e) => return failed(config, &e),
        Ok(Some(Record::Done(stored))) => return Admit::Answer(completed(config, names, &stored)),
        Ok(_) => {}
    }
    let options = MutexOptions::new()
        .ttl(config.lease)
        .watchdog()
        .reentrant(false)
        .fenced();
    let taken = match config.client.mutex_with(&names.lock, options) {
        Ok(mutex) => mutex.try_acquire().await,
        Err(e) => Err(e),
    };
    let guard = match taken {
        Err(e) => return failed(config, &e.into()),
        Ok(Some(guard)) => guard,
        Ok(None) => return Admit::Answer(in_progress(config, names).await),
    };
    // Under the lock now: a request may have completed between the first read and the lock.
    let recovered = match read(config, &names.record).await {
        Err(e) => {
            release(guard).await;
            return failed(config, &e);
        }
        Ok(Some(Record::Done(stored))) => {
            release(guard).await;
            return Admit::Answer(completed(config, names, &stored));
        }
        Ok(Some(running)) if running.fingerprint() != names.fingerprint => {
            release(guard).await;
            return Admit::Answer(mismatch(config));
        }
        Ok(running) => running.is_some(),
    };
    let fence = guard.issued_fencing_token().map_or(0, |f| f.get());
    let running = record::encode_running(&names.fingerprint, fence);
    let marked = guard
        .guarded()
        .cmd("SET", &names.record, (running, "PX", millis(config.expiry)))
        .exec()
        .await;
    match marked {
        Ok(Guarded::Applied(_)) => Admit::Run {
            guard,
            fence,
            recovered,
        },
        // Lost already (a pause right after the acquire): as if another request held the key.
        Ok(_) => Admit::Answer(in_progress(config, names).await),
        Err(e) => {
            release(guard).await;
            failed(config, &e.into())
        }
    }
}

/// Step 6: the handler's response stored under the lease, then the lock released.
async fn store(
    config: &Config,
    names: &Names,
    guard: MutexGuard,
    fence: u64,
    response: Response<Body>,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    if !storable(config, &parts) {
        // Removed, so that a retry runs again as a first request (not as a recovery).
        let _ = guard.guarded().del(&names.record).exec().await;
        release(guard).await;
        metrics::idempotency(&config.name, "not_stored");
        return Response::from_parts(parts, body);
    }
    let (kept, omitted_len, body) = match response::collect(body, config.max_response_body).await {
        Collected::Whole(bytes) => (Some(bytes.clone()), 0, Body::from(bytes)),
        Collected::Over { body, read } => (None, read, body),
        Collected::Failed(e) => {
            let _ = guard.guarded().del(&names.record).exec().await;
            release(guard).await;
            tracing::warn!(layer = %config.name, error = %e,
                "idempotency: the handler's response body failed; nothing stored");
            return refuse(
                config,
                "body_failed",
                StatusCode::INTERNAL_SERVER_ERROR,
                "Response failed",
                "the handler's response body ended with an error; retry with the same key",
            );
        }
    };
    let stored = Stored {
        fingerprint: names.fingerprint.clone(),
        status: parts.status.as_u16(),
        headers: response::kept_headers(&parts.headers, &config.replay_headers),
        body: kept,
        omitted_len,
    };
    let done = record::encode_done(&stored, fence);
    let written = guard
        .guarded()
        .cmd("SET", &names.record, (done, "PX", millis(config.expiry)))
        .exec()
        .await;
    match written {
        Ok(Guarded::Applied(_)) => metrics::idempotency(&config.name, "executed"),
        Ok(refused) => {
            // The lease was lost while the handler ran: a successor may hold the key, or have
            // stored its response already. Nothing is stored; the client gets this response.
            metrics::idempotency(&config.name, "not_stored_lost");
            tracing::warn!(layer = %config.name, lock = %names.lock, ?refused,
                "idempotency: the lease was lost before the response was stored; not stored");
        }
        Err(e) => {
            metrics::idempotency(&config.name, "not_stored_error");
            tracing::warn!(layer = %config.name, lock = %names.lock, error = %e,
                "idempotency: the response could not be stored; a retry runs again");
        }
    }
    release(guard).await;
    Response::from_parts(parts, body)
}

/// Whether a response is stored: not a 5xx (unless asked), and not an answer that tells the
/// client to retry later (it carries `Retry-After`: "in progress", "rate limited"), whose
/// retry must run again rather than replay "retry later" for the record's lifetime.
fn storable(config: &Config, parts: &axum::http::response::Parts) -> bool {
    let retry_later = parts.headers.contains_key(axum::http::header::RETRY_AFTER);
    !retry_later && (config.store_server_errors || !parts.status.is_server_error())
}

async fn release(guard: MutexGuard) {
    if let Err(e) = guard.release().await {
        // Owner-checked: at worst the lock runs out by itself after its lease.
        tracing::debug!(error = %e, "idempotency: release failed; the lease runs out by itself");
    }
}

/// Reads the record.
async fn read(config: &Config, key: &str) -> Result<Option<Record>, Error> {
    let cmd = dlock_core::redis::cmd("GET").arg(key).clone();
    let value: Option<Vec<u8>> =
        dlock_core::ext::query(&config.client, &cmd, "read an idempotency record").await?;
    value.map(|bytes| record::decode(key, &bytes)).transpose()
}

/// A completed record: replayed for the same fingerprint, 422 for another.
fn completed(config: &Config, names: &Names, stored: &Stored) -> Response<Body> {
    if stored.fingerprint != names.fingerprint {
        return mismatch(config);
    }
    metrics::idempotency(&config.name, "replayed");
    response::replay(stored)
}

/// Another request holds the key: 409, or 422 when its fingerprint differs (or a completed
/// record, if it finished meanwhile).
async fn in_progress(config: &Config, names: &Names) -> Response<Body> {
    match read(config, &names.record).await {
        Ok(Some(Record::Done(stored))) => completed(config, names, &stored),
        Ok(Some(running)) if running.fingerprint() != names.fingerprint => mismatch(config),
        _ => refuse(
            config,
            "in_progress",
            StatusCode::CONFLICT,
            "A request is outstanding for this Idempotency-Key",
            "a request with this key is being processed; retry after the time in Retry-After",
        ),
    }
}

fn mismatch(config: &Config) -> Response<Body> {
    refuse(
        config,
        "key_reused",
        StatusCode::UNPROCESSABLE_ENTITY,
        "Idempotency-Key is already used",
        "this key was used with another request (method, path, body or fingerprinted headers); use a new key",
    )
}

/// Redis could not answer (or answered what this version cannot read).
fn failed(config: &Config, e: &Error) -> Admit {
    if e.is_unavailable() {
        if config.fail_open {
            metrics::idempotency(&config.name, "unprotected");
            tracing::warn!(layer = %config.name, error = %e,
                "idempotency: Redis unavailable, running the request unprotected (fail open)");
            return Admit::Unprotected;
        }
        return Admit::Answer(refuse(
            config,
            "unavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            "Service unavailable",
            "the idempotency store cannot be reached; retry after the time in Retry-After",
        ));
    }
    tracing::error!(layer = %config.name, error = %e, "idempotency: refused");
    Admit::Answer(refuse(
        config,
        "internal",
        StatusCode::INTERNAL_SERVER_ERROR,
        "Idempotency record unusable",
        "the idempotency record of this key cannot be used; the server's log says why",
    ))
}

/// A problem response, counted under `outcome`, which is also its `code`; 409 and 503 carry
/// `Retry-After`.
fn refuse(
    config: &Config,
    outcome: &'static str,
    status: StatusCode,
    title: &str,
    detail: &str,
) -> Response<Body> {
    metrics::idempotency(&config.name, outcome);
    let retry = matches!(
        status,
        StatusCode::CONFLICT | StatusCode::SERVICE_UNAVAILABLE
    )
    .then_some(config.retry_after);
    problem(status, outcome, title, detail, retry)
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
