//! The scheduler dashboard (feature `web`): an [`axum::Router`] that an application mounts
//! where it likes, showing one server-rendered page of every job — cron expression, time
//! zone, next fire (in the job's zone, and in the viewer's once the page's small inline script
//! ran), paused state, the replicas running it, its last runs (replica, outcome, duration,
//! fencing token) and the runs per replica — with buttons to pause, resume and run a job now;
//! then the handlers of one-off jobs (their hidden job `once:<handler>`, paused or not, queued,
//! next due, live replicas, with pause and resume) and each one's first pending one-off jobs
//! (id, due time, attempt, idempotency key, who enqueued it, arguments). Times are in each job's
//! zone, or all in UTC with `?utc=1` (a link on the page switches); one-off jobs have no zone
//! and are shown in UTC.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use dlock_scheduler::Scheduler;
//!
//! let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
//! // The replica's own scheduler (a clone shares it), or one without jobs in an admin app.
//! let scheduler = Scheduler::builder(client).build()?;
//! let app = axum::Router::new().nest("/jobs", dlock_scheduler::web::router(scheduler));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! # Where it is mounted
//! The page is the router's root (`/`, so `/jobs` above) and its forms post back to the page's
//! own address, so it works under any path, behind `Router::nest`, and behind a proxy that
//! strips a prefix; after a POST it answers `303 See Other` to the page (a relative
//! `Location`, so also through such a proxy). No external asset: the CSS and the script are
//! inline, the page works offline.
//!
//! # What a POST must carry (cross-site request forgery)
//! A POST changes something only when the browser says it comes from the dashboard's own
//! origin; otherwise it gets `403 Forbidden` and changes nothing:
//! * with a `Sec-Fetch-Site` header (every current browser sends one), it must be
//!   `same-origin`;
//! * without it, the `Origin` header's host and port must equal the `Host` header's (the scheme
//!   is not compared: behind a TLS-terminating proxy the server cannot know it; keep the proxy
//!   passing `Host` through);
//! * a POST with neither is refused: browsers send at least one with every form.
//!
//! The page also forbids being framed (`frame-ancestors 'none'`), loading anything from
//! elsewhere and running any script but its own (`Content-Security-Policy`).
//!
//! # Authentication is the application's
//! The dashboard lets whoever reaches it pause and run jobs: put it behind the application's
//! own authentication, as a layer on the router. With a bearer token in a header, say:
//!
//! ```no_run
//! # fn demo(scheduler: dlock_scheduler::Scheduler) {
//! use axum::{extract::Request, http::StatusCode, middleware::{self, Next}, response::Response};
//!
//! async fn operators_only(request: Request, next: Next) -> Result<Response, StatusCode> {
//!     let expected = std::env::var("DASHBOARD_TOKEN").map_err(|_| StatusCode::FORBIDDEN)?;
//!     let given = request.headers().get("authorization").and_then(|v| v.to_str().ok());
//!     if given.and_then(|v| v.strip_prefix("Bearer ")) == Some(expected.as_str()) {
//!         Ok(next.run(request).await)
//!     } else {
//!         Err(StatusCode::UNAUTHORIZED)
//!     }
//! }
//!
//! let dashboard = dlock_scheduler::web::router(scheduler)
//!     .layer(middleware::from_fn(operators_only));
//! let app: axum::Router = axum::Router::new().nest("/jobs", dashboard);
//! # let _ = app; }
//! ```
//!
//! (A real check compares in constant time, and a browser-facing one would rather use the
//! application's session cookie or single sign-on: the forms carry whatever the browser sends.)
//!
//! # What it reads
//! [`Scheduler::overview`] at every page load: the job registry (each job that a running
//! replica registered, plus the handle's own jobs; replicas that stalled are marked), then per job whether it is paused and its
//! ledger — two requests per job; then [`Scheduler::one_off_handlers`] and, per handler,
//! [`Scheduler::pending_one_offs`] (its first ten) — three requests per handler. The page
//! lists each job's last ten runs; the counts per replica cover the whole ledger
//! ([`crate::SchedulerBuilder::history`] runs).

mod csrf;
mod one_offs;
mod page;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::{Error, ErrorKind};
use crate::scheduler::Scheduler;

/// The dashboard of `scheduler`'s jobs — and of every job that a running replica under the
/// same client prefix registered — as a router to mount (`Router::nest`) or serve as is. The
/// handle can be the replica's own scheduler (a clone: it shares everything) or one built
/// without jobs for an admin application. See [the module docs](self) for the page, its
/// forms' cross-site rule and how to add authentication.
///
/// ```no_run
/// # fn demo(scheduler: dlock_scheduler::Scheduler) {
/// let app: axum::Router = axum::Router::new()
///     .nest("/admin/jobs", dlock_scheduler::web::router(scheduler));
/// # let _ = app; }
/// ```
///
/// # Errors
/// Answered over HTTP, as plain text saying why: the page and the POSTs answer
/// `503 Service Unavailable` when Redis fails (or holds data this version did not write); a
/// POST answers `400 Bad Request` for a missing or invalid job name or an unknown action,
/// `404 Not Found` for a job that is not known (no replica registered it, no ledger entries,
/// no pause record: see [`Scheduler::pause`]; the text names close names),
/// `403 Forbidden` when it is not same-origin (see the module docs), and `303 See Other`
/// back to the page when done.
pub fn router<S>(scheduler: Scheduler) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/", get(show).post(act))
        .with_state(scheduler)
}

/// `GET /` (`?utc=1`: every time in UTC): the page.
async fn show(State(scheduler): State<Scheduler>, uri: Uri) -> Response {
    let zones = page::Zones {
        utc: uri.query().is_some_and(|q| {
            form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "utc" && v == "1")
        }),
    };
    match read(&scheduler).await {
        Ok((jobs, handlers)) => {
            let now = scheduler.shared.clock.now();
            let mut one_offs_html = String::new();
            one_offs::section(&mut one_offs_html, &handlers);
            let mut response = page::render(&jobs, &one_offs_html, zones, now).into_response();
            let headers = response.headers_mut();
            set(headers, CONTENT_TYPE, "text/html; charset=utf-8");
            set(headers, CONTENT_SECURITY_POLICY, page::CSP);
            set(headers, CACHE_CONTROL, "no-store");
            set(headers, X_FRAME_OPTIONS, "DENY");
            set(headers, X_CONTENT_TYPE_OPTIONS, "nosniff");
            set(headers, REFERRER_POLICY, "same-origin");
            response
        }
        Err(e) => failure(&e),
    }
}

/// What the page shows: the jobs, and the handlers of one-off jobs with their first pending
/// ones.
async fn read(
    scheduler: &Scheduler,
) -> Result<(Vec<crate::JobOverview>, Vec<one_offs::HandlerView>), Error> {
    let jobs = scheduler.overview().await?;
    let mut handlers = Vec::new();
    for handler in scheduler.one_off_handlers().await? {
        let pending = scheduler
            .pending_one_offs(&handler.name, one_offs::PENDING_SHOWN)
            .await?;
        handlers.push((handler, pending));
    }
    Ok((jobs, handlers))
}

/// `POST /` with a form body `job=<name>&action=pause|resume|run-now`: checks the origin,
/// acts, and sends the browser back to the page. A handler's one-off jobs are paused and
/// resumed through the same form (`job=once:<handler>`).
async fn act(
    State(scheduler): State<Scheduler>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = csrf::check(&headers, uri.authority().map(|a| a.as_str())) {
        return (StatusCode::FORBIDDEN, refused.0).into_response();
    }
    let mut job = None;
    let mut action = None;
    for (key, value) in form_urlencoded::parse(&body) {
        match &*key {
            "job" => job = Some(value.into_owned()),
            "action" => action = Some(value.into_owned()),
            _ => {}
        }
    }
    let Some(job) = job else {
        return (StatusCode::BAD_REQUEST, "the form has no `job` field").into_response();
    };
    let done = match action.as_deref() {
        Some("pause") => scheduler.pause(&job).await,
        Some("resume") => scheduler.resume(&job).await,
        Some("run-now") => scheduler.run_now(&job).await,
        Some(other) => {
            let msg = format!(
                "unknown action `{other}`: the dashboard's actions are pause, resume and run-now"
            );
            return (StatusCode::BAD_REQUEST, msg).into_response();
        }
        None => {
            let msg = "the form has no `action` field: the dashboard's actions are pause, \
                       resume and run-now";
            return (StatusCode::BAD_REQUEST, msg).into_response();
        }
    };
    match done {
        Ok(()) => (StatusCode::SEE_OTHER, [(LOCATION, back_to_page(&uri))]).into_response(),
        Err(e) => failure(&e),
    }
}

/// A relative reference from the page's address to itself: `./` when it ends in a slash,
/// else `./<last segment>` (relative, so that it holds behind a proxy that strips a prefix).
fn back_to_page(uri: &Uri) -> String {
    let path = uri.path();
    match path.rsplit_once('/') {
        Some((_, "")) | None => "./".to_owned(),
        Some((_, last)) => format!("./{last}"),
    }
}

/// An error as a plain-text answer: 400 for a bad job name, 404 for a job that is not known,
/// 503 for Redis.
fn failure(e: &Error) -> Response {
    let status = match e.kind() {
        ErrorKind::InvalidJob | ErrorKind::InvalidSchedule => StatusCode::BAD_REQUEST,
        ErrorKind::UnknownJob => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, e.to_string()).into_response()
}

fn set(headers: &mut HeaderMap, name: axum::http::HeaderName, value: &'static str) {
    headers.insert(name, axum::http::HeaderValue::from_static(value));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_goes_back_to_the_page_wherever_it_is_mounted() {
        let back = |p: &str| back_to_page(&p.parse().unwrap());
        assert_eq!(back("/jobs"), "./jobs");
        assert_eq!(back("/admin/jobs/"), "./");
        assert_eq!(back("/"), "./");
        assert_eq!(back("/a:b"), "./a:b");
    }
}
