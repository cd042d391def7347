//! A measurement, not a check (`#[ignore]`): what the idempotency layer adds to a POST, the
//! groundwork of the benchmark's W10. Run it in release:
//! `cargo test -p dlock-tower --release --test layers -- --ignored --nocapture cost::`.
//! It prints the median and 99th percentile of sequential in-process POSTs with and without
//! the layer (first requests, each with a new key; and replays), and the Redis commands each
//! costs (`INFO commandstats` before and after, on a server of its own).

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::routing::post;
use dlock_testkit::RedisServer;
use dlock_tower::IdempotencyLayer;

use crate::support::{replica, send};

const N: usize = 2_000;

/// `INFO commandstats`: calls per command (commands run by scripts count too).
fn commands(server: &RedisServer) -> Vec<(String, u64)> {
    let mut con = server.connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((name.to_owned(), rest.split(',').next()?.parse().ok()?))
        })
        .collect()
}

/// Calls per request of each command between `before` and `after` (the INFO calls left out).
fn per_request(before: &[(String, u64)], after: &[(String, u64)]) -> String {
    let mut out = Vec::new();
    for (name, calls) in after {
        let earlier = before
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, c)| *c);
        let delta = calls - earlier - u64::from(name == "info");
        if delta > 0 {
            out.push(format!("{name} {:.2}", delta as f64 / N as f64));
        }
    }
    out.join(", ")
}

async fn run(
    server: &RedisServer,
    app: &Router,
    key: impl Fn(usize) -> Option<String>,
) -> (Duration, Duration, String) {
    let before = commands(server);
    let mut took = Vec::with_capacity(N);
    for i in 0..N {
        let mut request = Request::post("/pay");
        if let Some(key) = key(i) {
            request = request.header("idempotency-key", key);
        }
        let request = request.body(Body::from("{\"amount\":5}")).unwrap();
        let start = Instant::now();
        let answer = send(app, request).await;
        took.push(start.elapsed());
        assert!(answer.status == 200, "{}", answer.status);
    }
    let commands = per_request(&before, &commands(server));
    took.sort();
    (took[N / 2], took[N * 99 / 100], commands)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
async fn the_layers_cost_per_post() {
    let server = RedisServer::start().unwrap();
    let client = replica(&server.url()).await;
    let handler = || async { "paid" };
    let plain: Router = Router::new().route("/pay", post(handler));
    let layer = IdempotencyLayer::builder(client, "bench").build().unwrap();
    let guarded: Router = Router::new()
        .route("/pay", post(handler))
        .route_layer(layer);
    let rows = [
        ("without the layer", run(&server, &plain, |_| None).await),
        (
            "first request (new key)",
            run(&server, &guarded, |i| Some(format!("k-{i}"))).await,
        ),
        (
            "replay (used key)",
            run(&server, &guarded, |i| Some(format!("k-{i}"))).await,
        ),
    ];
    for (what, (p50, p99, commands)) in rows {
        println!("{what:>24}: p50 {p50:?}, p99 {p99:?}; per request: {commands}");
    }
}
