//! W10 and W11 (issue #49, `WORKLOADS.md`): dlock-tower's layers in front of an axum route,
//! called in-process (`tower::ServiceExt::oneshot` on the `Router`, no HTTP parsing or sockets:
//! the figures are the layers' own, plus Redis).
//!
//! * **W10, idempotent POST**: three replicas (a `Router` and a dlock client each), 32 callers
//!   sending `POST /orders/{id}/pay` in turn to each replica, half of them retries of a key sent
//!   before (answered from the record). The handler only formats its answer. Beside it: the
//!   same handler alone, and under the order's mutex (`try_acquire`, release: what
//!   `#[distributed_lock]` does around a body, without the layer).
//! * **W11, rate-limit layer**: a trivial route alone, behind dlock-tower's `RateLimitLayer` (a
//!   quota nobody reaches, so every request is admitted and decided in Redis), and behind
//!   tower-governor (`tower_governor`, local to the process, the same quota), at 1 and 64
//!   callers.
//!
//! Per request: latency p50/p99 (each call timed), requests/s, commands Redis ran (inner calls
//! included), server time, redis-server CPU and this process's CPU. Round trips are not counted
//! here: the layer's plain `GET`/`SET` cannot be told apart from the same commands inside
//! scripts in `INFO commandstats`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{Request, StatusCode};
use axum::routing::{get, post};
use dlock_core::{Client, Quota};
use dlock_tower::{IdempotencyLayer, KeyBy, RateLimitLayer};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tower::ServiceExt as _;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::GlobalKeyExtractor;

use crate::control::Control;
use crate::dlock::client;
use crate::redis_stats::{PerOp, Plain, measure};
use crate::report::{Entry, Section};
use crate::rt::{BoxError, multi_thread_runtime};
use crate::stats::{float, p50_p99_us};
use crate::subjects::Setting;
use crate::table::{Col, int, table_of};

/// W10's replicas and callers.
const REPLICAS: usize = 3;
const CALLERS: usize = 32;

/// One subject in one window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WebRun {
    pub(crate) label: String,
    pub(crate) requests: u64,
    pub(crate) per_s: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) per_request: PerOp,
}

/// The stage's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WebFigures {
    pub(crate) idempotent: Vec<WebRun>,
    pub(crate) rate: Vec<WebRun>,
}

/// Runs the stage.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let requests: u64 = if s.counts.quick { 1_280 } else { 12_800 };
    let runtime = multi_thread_runtime()?;
    let figures = runtime.block_on(async {
        let mut control = Control::fresh(&s.url).await?;
        let idempotent = w10(&mut control, &s.url, requests).await?;
        let rate = w11(&mut control, &s.url, requests).await?;
        Ok::<_, BoxError>(WebFigures { idempotent, rate })
    })?;
    Entry::new("web", figures)
}

/// The handler: formats its answer, nothing else.
async fn pay(Path(order): Path<u64>) -> String {
    format!("charged order {order}\n")
}

/// The handler under the order's mutex, as `#[distributed_lock]` runs a body: tried, the body,
/// released; 409 when the order is busy.
fn locked(client: Client) -> Router {
    Router::new().route(
        "/orders/{order}/pay",
        post(move |Path(order): Path<u64>| {
            let client = client.clone();
            async move {
                let Ok(lock) = client.mutex(&format!("order:{order}")) else {
                    return (StatusCode::INTERNAL_SERVER_ERROR, String::new());
                };
                match lock.try_acquire().await {
                    Ok(Some(guard)) => {
                        let answer = pay(Path(order)).await;
                        let _ = guard.release().await;
                        (StatusCode::OK, answer)
                    }
                    Ok(None) => (StatusCode::CONFLICT, String::new()),
                    Err(_) => (StatusCode::SERVICE_UNAVAILABLE, String::new()),
                }
            }
        }),
    )
}

fn plain() -> Router {
    Router::new().route("/orders/{order}/pay", post(pay))
}

fn idempotent(client: Client) -> Result<Router, BoxError> {
    let layer = IdempotencyLayer::builder(client, "w10").build()?;
    Ok(plain().route_layer(layer))
}

/// Request `i` of caller `c`: an order of its own; every odd request repeats the key of the
/// one before it (a retry, answered from the record once that one completed).
fn pay_request(c: usize, i: u64, round: &str) -> Result<Request<Body>, BoxError> {
    let key = format!("\"{round}-{c}-{}\"", i / 2);
    let order = (c as u64) * 1_000_000 + i / 2;
    Ok(Request::post(format!("/orders/{order}/pay"))
        .header("idempotency-key", key)
        .body(Body::empty())?)
}

/// Sends `requests` requests from `callers` tasks, each to the replicas in turn; every
/// latency, in ns.
async fn drive(
    replicas: &[Router],
    callers: usize,
    requests: u64,
    make: impl Fn(usize, u64) -> Result<Request<Body>, BoxError> + Send + Sync + 'static,
) -> Result<Vec<u64>, BoxError> {
    let make = Arc::new(make);
    let each = requests / callers as u64;
    let mut set = JoinSet::new();
    for c in 0..callers {
        let replicas = replicas.to_vec();
        let make = make.clone();
        set.spawn(async move {
            let mut latencies = Vec::with_capacity(usize::try_from(each)?);
            for i in 0..each {
                let router = replicas[(c + usize::try_from(i)?) % replicas.len()].clone();
                let request = make(c, i)?;
                let start = Instant::now();
                let answer = router.oneshot(request).await?;
                latencies.push(u64::try_from(start.elapsed().as_nanos())?);
                if !answer.status().is_success() {
                    return Err(format!("answered {}", answer.status()).into());
                }
            }
            Ok::<_, BoxError>(latencies)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}

async fn window(
    control: &mut Control,
    label: &str,
    work: impl Future<Output = Result<Vec<u64>, BoxError>>,
) -> Result<WebRun, BoxError> {
    let (mut latencies, window_ns, delta) = measure(control, work).await?;
    let requests = latencies.len() as u64;
    let (p50_us, p99_us) = p50_p99_us(&mut latencies);
    Ok(WebRun {
        label: label.to_owned(),
        requests,
        per_s: float(requests) / (float(window_ns) / 1e9),
        p50_us,
        p99_us,
        per_request: PerOp::of(&delta, requests.max(1), Plain::NONE),
    })
}

async fn w10(control: &mut Control, url: &str, requests: u64) -> Result<Vec<WebRun>, BoxError> {
    let clients = (0..REPLICAS)
        .map(|_| client(url))
        .collect::<Result<Vec<_>, _>>()?;
    let plain_replicas: Vec<Router> = (0..REPLICAS).map(|_| plain()).collect();
    let locked_replicas: Vec<Router> = clients.iter().cloned().map(locked).collect();
    let layered = clients
        .iter()
        .cloned()
        .map(idempotent)
        .collect::<Result<Vec<_>, _>>()?;
    // Warm: connections open, scripts loaded.
    for replicas in [&locked_replicas, &layered] {
        drive(replicas, 1, 4, |c, i| pay_request(c, i, "warm")).await?;
    }
    let mut runs = Vec::new();
    for (label, replicas, round) in [
        ("handler alone", &plain_replicas, "a"),
        ("under the order's mutex", &locked_replicas, "b"),
        ("IdempotencyLayer", &layered, "c"),
    ] {
        let work = drive(replicas, CALLERS, requests, move |c, i| {
            pay_request(c, i, round)
        });
        runs.push(window(control, label, work).await?);
    }
    Ok(runs)
}

async fn w11(control: &mut Control, url: &str, requests: u64) -> Result<Vec<WebRun>, BoxError> {
    let route = || Router::new().route("/search", get(|| async { "results" }));
    let dlock = RateLimitLayer::builder(client(url)?, "w11")
        .key(KeyBy::Route)
        .default_quota(Quota::per_second(1_000_000).burst(1_000_000))
        .build()?;
    let governor = GovernorConfigBuilder::default()
        .key_extractor(GlobalKeyExtractor)
        .period(Duration::from_micros(1))
        .burst_size(1_000_000)
        .finish()
        .ok_or("tower-governor refused its quota")?;
    let subjects = [
        ("no layer", route()),
        ("RateLimitLayer (dlock)", route().route_layer(dlock)),
        (
            "tower-governor (local)",
            route().route_layer(GovernorLayer::new(governor)),
        ),
    ];
    let search = |_: usize, _: u64| Ok(Request::get("/search").body(Body::empty())?);
    for (_, router) in &subjects {
        drive(std::slice::from_ref(router), 1, 4, search).await?;
    }
    let mut runs = Vec::new();
    for callers in [1, 64] {
        for (label, router) in &subjects {
            let work = drive(std::slice::from_ref(router), callers, requests, search);
            let label = format!(
                "{label}, {callers} caller{}",
                if callers > 1 { "s" } else { "" }
            );
            runs.push(window(control, &label, work).await?);
        }
    }
    Ok(runs)
}

const COLUMNS: [Col<WebRun>; 8] = [
    ("subject", |r| r.label.clone()),
    ("requests/s", |r| int(r.per_s)),
    ("p50 µs", |r| format!("{:.0}", r.p50_us)),
    ("p99 µs", |r| format!("{:.0}", r.p99_us)),
    ("commands in Redis", |r| {
        format!("{:.2}", r.per_request.commands)
    }),
    ("server µs", |r| format!("{:.1}", r.per_request.server_us)),
    ("redis CPU µs", |r| {
        format!("{:.1}", r.per_request.server_cpu_us)
    }),
    ("client CPU µs", |r| {
        r.per_request
            .client_cpu_us
            .map_or_else(|| "—".into(), |us| format!("{us:.1}"))
    }),
];

impl WebFigures {
    fn added(runs: &[WebRun], label: &str, base: &str) -> Option<(f64, f64)> {
        let find = |l: &str| runs.iter().find(|r| r.label == l);
        let (run, base) = (find(label)?, find(base)?);
        Some((run.p50_us - base.p50_us, run.p99_us - base.p99_us))
    }
}

impl Section for WebFigures {
    fn details(&self, out: &mut String) {
        let _ = writeln!(out, "### W10: idempotent POST (issue #49)\n");
        let _ = writeln!(
            out,
            "{REPLICAS} replicas in one process (a router and a client each), {CALLERS} callers, \
             half the requests retries of the key before; called in-process.\n"
        );
        table_of(out, "lrrrrrrr", &COLUMNS, &self.idempotent);
        for label in ["under the order's mutex", "IdempotencyLayer"] {
            if let Some((p50, p99)) = Self::added(&self.idempotent, label, "handler alone") {
                let _ = writeln!(
                    out,
                    "\n{label}: {p50:+.0} µs at p50, {p99:+.0} µs at p99 over the handler alone."
                );
            }
        }
        let _ = writeln!(out, "\n### W11: rate-limit layer (issue #49)\n");
        table_of(out, "lrrrrrrr", &COLUMNS, &self.rate);
        for n in ["1 caller", "64 callers"] {
            for label in ["RateLimitLayer (dlock)", "tower-governor (local)"] {
                let (l, b) = (format!("{label}, {n}"), format!("no layer, {n}"));
                if let Some((p50, _)) = Self::added(&self.rate, &l, &b) {
                    let _ = writeln!(out, "\n{label}, {n}: {p50:+.0} µs at p50 over no layer.");
                }
            }
        }
    }
}
