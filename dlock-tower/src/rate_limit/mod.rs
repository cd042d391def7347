//! [`RateLimitLayer`]: dlock-core's GCRA limiter (`KeyedRateLimiter`, decided on the Redis
//! server's clock) in front of axum routes, one quota per route group, with 429, `Retry-After`
//! and the RateLimit header fields of draft-ietf-httpapi-ratelimit-headers revision 10.
//!
//! * [`key`]: whose budget a request spends ([`KeyBy`], [`TrustedProxies`]).
//! * [`headers`]: the `RateLimit-Policy` and `RateLimit` values.

mod headers;
mod key;

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::{HeaderMap, Request, Response, StatusCode};
use dlock_core::{Client, Decision, KeyedRateLimiter, Quota};
use tower_service::Service;

use crate::error::{Error, Result};
use crate::metrics;
use crate::problem::problem;

pub use headers::{RATELIMIT, RATELIMIT_POLICY};
pub use key::{KeyBy, TrustedProxies};

/// One route group: its routes (axum route patterns, as `MatchedPath` has them), its policy
/// name, its quota and its limiter.
struct Group {
    policy: String,
    routes: Vec<String>,
    quota: Quota,
    limiter: KeyedRateLimiter,
}

struct Config {
    name: String,
    key: KeyBy,
    groups: Vec<Group>,
    /// The group of routes no other group names (`default`), if a default quota was given.
    fallback: Option<Group>,
}

/// A tower [`Layer`](tower_layer::Layer) that admits each request against a distributed rate
/// limit shared by every replica (dlock-core's GCRA on the Redis server's clock): one quota per
/// route group, a budget per key ([`KeyBy`]). Made by [`RateLimitLayer::builder`].
///
/// * Admitted: the handler runs, with the [`Decision`] in the request's extensions (read it
///   with `Extension<dlock_core::Decision>`: the cells remaining and the server's time of the
///   decision); the response carries `RateLimit-Policy` and `RateLimit`.
/// * Limited: `429 Too Many Requests`, `Retry-After` (seconds until a cell conforms), the same
///   two fields, a problem-details body; the handler does not run.
/// * Redis down: 503 with `Retry-After` (fail closed, the default), or the request runs
///   without a decision and without the fields ([`RateLimitBuilder::fail_open`]).
/// * Routes no group names and no default quota covers pass through.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_tower::Error> {
/// use axum::{Router, routing::get};
/// use dlock_core::Quota;
/// use dlock_tower::{KeyBy, RateLimitLayer, TrustedProxies};
///
/// let limits = RateLimitLayer::builder(client, "public-api")
///     .key(KeyBy::ClientIp(TrustedProxies::new(["10.0.0.0/8"])?))
///     .group("search", ["/search"], Quota::per_second(20).burst(5))
///     .default_quota(Quota::per_second(100))
///     .build()?;
/// let app: Router = Router::new()
///     .route("/search", get(|| async { "results" }))
///     .route_layer(limits);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    config: Arc<Config>,
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("name", &self.config.name)
            .field("key", &self.config.key)
            .finish_non_exhaustive()
    }
}

/// The settings of a [`RateLimitLayer`], checked by [`RateLimitBuilder::build`].
#[must_use = "nothing is checked or built until `build` is called"]
pub struct RateLimitBuilder {
    client: Client,
    name: String,
    key: KeyBy,
    groups: Vec<(String, Vec<String>, Quota)>,
    default_quota: Option<Quota>,
    fail_open: bool,
}

impl fmt::Debug for RateLimitBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitBuilder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// The settings of a layer named `name` (its limiters are `<name>:<group>`; its metrics'
    /// `limiter` label), keyed by client IP with no trusted proxy, no group, failing closed.
    pub fn builder(client: Client, name: impl Into<String>) -> RateLimitBuilder {
        RateLimitBuilder {
            client,
            name: name.into(),
            key: KeyBy::ClientIp(TrustedProxies::none()),
            groups: Vec::new(),
            default_quota: None,
            fail_open: false,
        }
    }
}

impl RateLimitBuilder {
    /// Whose budget a request spends (default: the client IP, no trusted proxy).
    pub fn key(mut self, key: KeyBy) -> Self {
        self.key = key;
        self
    }

    /// A route group `policy` (its name in the `RateLimit` fields): the routes (as declared,
    /// `/orders/{id}`) that share `quota`, each key with its own budget.
    pub fn group<'a>(
        mut self,
        policy: impl Into<String>,
        routes: impl IntoIterator<Item = &'a str>,
        quota: Quota,
    ) -> Self {
        let routes = routes.into_iter().map(str::to_owned).collect();
        self.groups.push((policy.into(), routes, quota));
        self
    }

    /// The quota of routes no group names (policy `default`); without one they pass through.
    pub fn default_quota(mut self, quota: Quota) -> Self {
        self.default_quota = Some(quota);
        self
    }

    /// When Redis cannot be reached: `false` (default) answers 503 with `Retry-After`; `true`
    /// admits without a decision (logged once per outage by dlock-core).
    pub fn fail_open(mut self, open: bool) -> Self {
        self.fail_open = open;
        self
    }

    /// The layer.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a name or policy that is empty, longer than 64
    /// bytes or not made of letters, digits and `-_.`; a quota dlock-core refuses (a zero rate,
    /// period or burst); a route in two groups; no group and no default quota.
    pub fn build(self) -> Result<RateLimitLayer> {
        check_name("rate limit layer name", &self.name)?;
        if self.groups.is_empty() && self.default_quota.is_none() {
            return Err(Error::invalid(format!(
                "rate limit layer {:?}: no group and no default quota, so nothing is limited; \
                 add .group(…) or .default_quota(…)",
                self.name
            )));
        }
        let mut groups: Vec<Group> = Vec::new();
        for (policy, routes, quota) in self.groups {
            check_name("rate limit policy", &policy)?;
            for route in &routes {
                if let Some(other) = groups.iter().find(|g| g.routes.contains(route)) {
                    return Err(Error::invalid(format!(
                        "rate limit layer {:?}: the route {route:?} is in the groups {:?} and \
                         {policy:?}; give each route one group",
                        self.name, other.policy
                    )));
                }
            }
            groups.push(group(
                &self.client,
                &self.name,
                self.fail_open,
                policy,
                routes,
                quota,
            )?);
        }
        let fallback = self
            .default_quota
            .map(|q| {
                group(
                    &self.client,
                    &self.name,
                    self.fail_open,
                    "default".into(),
                    Vec::new(),
                    q,
                )
            })
            .transpose()?;
        Ok(RateLimitLayer {
            config: Arc::new(Config {
                name: self.name,
                key: self.key,
                groups,
                fallback,
            }),
        })
    }
}

fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(Error::invalid(format!(
            "{what} {name:?}: give 1 to 64 letters, digits, `-`, `_` or `.`"
        )));
    }
    Ok(())
}

fn group(
    client: &Client,
    name: &str,
    fail_open: bool,
    policy: String,
    routes: Vec<String>,
    quota: Quota,
) -> Result<Group> {
    let limiter = client
        .keyed_rate_limiter(&format!("{name}:{policy}"), quota)?
        .fail_open(fail_open);
    Ok(Group {
        policy,
        routes,
        quota,
        limiter,
    })
}

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            config: self.config.clone(),
            inner,
        }
    }
}

/// The service a [`RateLimitLayer`] wraps around the inner one.
#[derive(Clone)]
pub struct RateLimitService<S> {
    config: Arc<Config>,
    inner: S,
}

impl<S> fmt::Debug for RateLimitService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl<S> Service<Request<Body>> for RateLimitService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move { Ok(handle(&config, inner, request).await) })
    }
}

async fn handle<S>(config: &Config, mut inner: S, request: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    let (parts, body) = request.into_parts();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_owned(), |m| m.as_str().to_owned());
    let group = config
        .groups
        .iter()
        .find(|g| g.routes.contains(&route))
        .or(config.fallback.as_ref());
    let key = group.map(|_| config.key.key(&parts, &route));
    let request = Request::from_parts(parts, body);
    let (Some(group), Some(key)) = (group, key) else {
        return call(&mut inner, request).await;
    };
    let decision = group.limiter.try_acquire(&key, 1).await;
    match decision {
        Ok(allowed @ Decision::Allowed { remaining, .. }) => {
            metrics::rate_limit(&config.name, "admitted");
            // The handler may read its decision (`Extension<Decision>`): what remains, and the
            // server's time of the decision.
            let mut request = request;
            request.extensions_mut().insert(allowed);
            let mut response = call(&mut inner, request).await;
            let reset = headers::refill(&group.quota, remaining);
            fields(response.headers_mut(), group, remaining, reset);
            response
        }
        Ok(Decision::Limited { wait, .. }) => {
            metrics::rate_limit(&config.name, "limited");
            limited(group, wait)
        }
        Ok(_) => {
            metrics::rate_limit(&config.name, "unchecked");
            call(&mut inner, request).await
        }
        Err(e) => {
            metrics::rate_limit(&config.name, "unavailable");
            tracing::warn!(limiter = %config.name, error = %e, "rate limit: no decision");
            undecided(&e)
        }
    }
}

/// The 429 of a spent budget: `Retry-After` and the fields, a problem body.
fn limited(group: &Group, wait: Duration) -> Response<Body> {
    let mut response = problem(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "Too many requests",
        &format!(
            "the quota of policy {:?} is spent; retry after the time in Retry-After",
            group.policy
        ),
        Some(wait),
    );
    fields(response.headers_mut(), group, 0, wait);
    response
}

/// No decision (failing closed): 503 with `Retry-After` when Redis cannot be reached, 500 for
/// anything else (foreign data under the limiter's key).
fn undecided(e: &dlock_core::Error) -> Response<Body> {
    if e.is_connection() || e.is_timeout() {
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            "the rate limiter cannot be reached; retry after the time in Retry-After",
            Some(Duration::from_secs(1)),
        )
    } else {
        problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Rate limit unusable",
            "the rate limiter refused this request; the server's log says why",
            None,
        )
    }
}

fn fields(headers: &mut HeaderMap, group: &Group, remaining: u32, reset: Duration) {
    if let Some(v) = headers::policy(&group.policy, &group.quota) {
        headers.insert(RATELIMIT_POLICY, v);
    }
    if let Some(v) = headers::limit(&group.policy, remaining, reset) {
        headers.insert(RATELIMIT, v);
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
