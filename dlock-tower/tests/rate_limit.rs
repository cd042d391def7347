//! RateLimitLayer on real Redis across two replicas: 429 with `Retry-After` and the RateLimit
//! fields (draft revision 10) once a key's budget is spent, budgets per key and per route
//! group, client IPs behind trusted proxies, Redis down, and metrics labelled by name only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::routing::get;
use axum::{Extension, Router};
use dlock_core::{Client, Decision, Quota};
use dlock_testkit::RedisServer;
use dlock_tower::{KeyBy, RateLimitBuilder, RateLimitLayer, TrustedProxies};

use crate::support::{Answer, replica, send};

/// The handlers' runs, and the server time of each admitting decision (the layer puts the
/// decision in the request's extensions).
#[derive(Default)]
struct Runs {
    count: AtomicUsize,
    decided: Mutex<Vec<SystemTime>>,
}

impl Runs {
    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

fn app(
    client: Client,
    runs: &Arc<Runs>,
    configure: impl FnOnce(RateLimitBuilder) -> RateLimitBuilder,
) -> Router {
    let layer = configure(RateLimitLayer::builder(client, "api"))
        .build()
        .unwrap();
    let counted = |runs: Arc<Runs>| {
        move |decision: Option<Extension<Decision>>| {
            let runs = runs.clone();
            async move {
                runs.count.fetch_add(1, Ordering::SeqCst);
                if let Some(Extension(Decision::Allowed { decided_at, .. })) = decision {
                    runs.decided.lock().unwrap().push(decided_at);
                }
                "ok"
            }
        }
    };
    Router::new()
        .route("/search", get(counted(runs.clone())))
        .route("/orders/{id}", get(counted(runs.clone())))
        .route("/health", get(counted(runs.clone())))
        .route_layer(layer)
}

fn get_with(path: &str, api_key: Option<&str>) -> Request<Body> {
    let mut request = Request::get(path);
    if let Some(key) = api_key {
        request = request.header("x-api-key", key);
    }
    request.body(Body::empty()).unwrap()
}

/// A `RateLimit` or `RateLimit-Policy` value checked against the draft's syntax: one
/// sf-string item naming the policy, then `;name=integer` parameters; returns the policy and
/// the parameters.
fn field(answer: &Answer, name: &str) -> (String, Vec<(String, u64)>) {
    let value = answer.header(name).unwrap_or_else(|| panic!("no {name}"));
    let mut parts = value.split(';');
    let policy = parts.next().unwrap();
    assert!(
        policy.len() >= 2 && policy.starts_with('"') && policy.ends_with('"'),
        "{value}"
    );
    let params = parts
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or_else(|| panic!("{value}"));
            (
                k.to_owned(),
                v.parse::<u64>().unwrap_or_else(|_| panic!("{value}")),
            )
        })
        .collect();
    (policy.trim_matches('"').to_owned(), params)
}

fn param(params: &[(String, u64)], name: &str) -> u64 {
    params
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_gets_429_with_retry_after_and_the_ratelimit_fields() {
    let server = RedisServer::start().unwrap();
    let runs = Arc::new(Runs::default());
    // 3 per minute, burst 3: one cell every 20 s.
    let quota = Quota::per_minute(3).burst(3);
    let configure = |b: RateLimitBuilder| {
        b.key(KeyBy::Header("x-api-key".parse().unwrap()))
            .group("search", ["/search"], quota)
    };
    let replicas = [
        app(replica(&server.url()).await, &runs, configure),
        app(replica(&server.url()).await, &runs, configure),
    ];
    for (i, expected) in [2u64, 1, 0].into_iter().enumerate() {
        let answer = send(&replicas[i % 2], get_with("/search", Some("key-a"))).await;
        assert_eq!(answer.status, 200);
        let (policy, params) = field(&answer, "ratelimit");
        assert_eq!((policy.as_str(), param(&params, "r")), ("search", expected));
        let (policy, params) = field(&answer, "ratelimit-policy");
        assert_eq!(
            (policy.as_str(), param(&params, "q"), param(&params, "w")),
            ("search", 1, 20)
        );
    }
    let limited = send(&replicas[1], get_with("/search", Some("key-a"))).await;
    assert_eq!(limited.status, 429);
    assert_eq!(
        limited.header("content-type"),
        Some("application/problem+json")
    );
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    let (_, params) = field(&limited, "ratelimit");
    assert_eq!((param(&params, "r"), param(&params, "t")), (0, retry));
    assert_eq!(runs.count(), 3);

    // Another key has its own budget; a route in no group and without a default passes.
    assert_eq!(
        send(&replicas[0], get_with("/search", Some("key-b")))
            .await
            .status,
        200
    );
    let health = send(&replicas[0], get_with("/health", Some("key-a"))).await;
    assert_eq!((health.status, health.header("ratelimit")), (200, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_groups_have_their_own_quota_and_route_keys_share_one() {
    let server = RedisServer::start().unwrap();
    let runs = Arc::new(Runs::default());
    let router = app(replica(&server.url()).await, &runs, |b| {
        b.key(KeyBy::Route)
            .group("search", ["/search"], Quota::per_minute(1))
            .default_quota(Quota::per_minute(2))
    });
    assert_eq!(
        send(&router, get_with("/search", Some("a"))).await.status,
        200
    );
    // Keyed by route: another client shares the spent budget.
    assert_eq!(
        send(&router, get_with("/search", Some("b"))).await.status,
        429
    );
    // The default group: /orders/{id} is one route whatever the id, with quota 2.
    for (id, status) in [(1, 200), (2, 200), (3, 429)] {
        let answer = send(&router, get_with(&format!("/orders/{id}"), None)).await;
        assert_eq!(answer.status, status);
        assert_eq!(field(&answer, "ratelimit").0, "default");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_behind_trusted_proxies_are_keyed_by_their_own_address() {
    let server = RedisServer::start().unwrap();
    let runs = Arc::new(Runs::default());
    let trusted = TrustedProxies::new(["10.0.0.0/8"]).unwrap();
    let router = app(replica(&server.url()).await, &runs, |b| {
        b.key(KeyBy::ClientIp(trusted))
            .default_quota(Quota::per_minute(1))
    });
    let via = |peer: &str, forwarded: &str| {
        let mut request = Request::get("/search")
            .header("x-forwarded-for", forwarded)
            .body(Body::empty())
            .unwrap();
        let peer: SocketAddr = peer.parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    };
    assert_eq!(
        send(&router, via("10.0.0.1:5000", "198.51.100.7"))
            .await
            .status,
        200
    );
    // The same client through another proxy, forging an address on the left: still its budget.
    assert_eq!(
        send(&router, via("10.0.0.2:5000", "6.6.6.6, 198.51.100.7"))
            .await
            .status,
        429
    );
    assert_eq!(
        send(&router, via("10.0.0.2:5000", "198.51.100.8"))
            .await
            .status,
        200
    );
    // An untrusted peer is the client, whatever it forwards.
    assert_eq!(
        send(&router, via("203.0.113.1:5000", "198.51.100.9"))
            .await
            .status,
        200
    );
    assert_eq!(
        send(&router, via("203.0.113.1:5000", "198.51.100.10"))
            .await
            .status,
        429
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_503_or_admits_unchecked() {
    let mut server = RedisServer::start().unwrap();
    let runs = Arc::new(Runs::default());
    let closed = app(replica(&server.url()).await, &runs, |b| {
        b.default_quota(Quota::per_second(10))
    });
    let open = app(replica(&server.url()).await, &runs, |b| {
        b.default_quota(Quota::per_second(10)).fail_open(true)
    });
    server.kill();
    let refused = send(&closed, get_with("/search", None)).await;
    assert_eq!(
        (refused.status, refused.header("retry-after")),
        (503, Some("1"))
    );
    assert_eq!(runs.count(), 0);
    let admitted = send(&open, get_with("/search", None)).await;
    assert_eq!((admitted.status, admitted.header("ratelimit")), (200, None));
    assert_eq!(runs.count(), 1);
}

/// The layer's counters carry the limiter's name and the outcome, never the key.
#[cfg(feature = "metrics")]
#[test]
fn metrics_are_labelled_by_limiter_name_never_by_key() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let server = RedisServer::start().unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let runs = Arc::new(Runs::default());
            let router = app(replica(&server.url()).await, &runs, |b| {
                b.key(KeyBy::Header("x-api-key".parse().unwrap()))
                    .default_quota(Quota::per_minute(1))
            });
            for key in ["secret-1", "secret-1", "secret-2"] {
                send(&router, get_with("/search", Some(key))).await;
            }
        });
    });
    let mut counts = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if key.key().name() != "dlock_tower_rate_limit_requests_total" {
            continue;
        }
        let labels: Vec<(String, String)> = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        assert!(
            labels.iter().all(|(_, v)| !v.contains("secret")),
            "{labels:?}"
        );
        let DebugValue::Counter(n) = value else {
            panic!("not a counter")
        };
        counts.push((labels, n));
    }
    counts.sort();
    let label = |outcome: &str| {
        vec![
            ("limiter".to_owned(), "api".to_owned()),
            ("outcome".to_owned(), outcome.to_owned()),
        ]
    };
    assert_eq!(counts, vec![(label("admitted"), 2), (label("limited"), 1)]);
}

#[tokio::test]
async fn configurations_that_limit_nothing_or_twice_are_refused() {
    let client = Client::open("redis://127.0.0.1:1/").unwrap();
    let e = RateLimitLayer::builder(client.clone(), "api")
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), dlock_tower::ErrorKind::InvalidInput);
    let twice = RateLimitLayer::builder(client.clone(), "api")
        .group("a", ["/x"], Quota::per_second(1))
        .group("b", ["/x"], Quota::per_second(1))
        .build();
    assert!(twice.unwrap_err().to_string().contains("/x"));
    assert!(
        RateLimitLayer::builder(client, "bad name")
            .default_quota(Quota::per_second(1))
            .build()
            .is_err()
    );
}

/// Three replicas (a client each) send as fast as answers come for 5 s (the issue's span) through one group of
/// 200/s, burst 20: the requests admitted are the quota within ±1 % — burst + rate × span,
/// the span from the first admitting decision to the last by the Redis server's clock (each
/// handler reads its decision from the request's extensions); every answer carries the fields
/// of the draft, each 429 a `Retry-After` of 1 s (the next cell is 5 ms away, rounded up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_one_budget() {
    const RATE: u32 = 200;
    const BURST: u32 = 20;
    let server = RedisServer::start().unwrap();
    let runs = Arc::new(Runs::default());
    let quota = Quota::per_second(RATE).burst(BURST);
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let client = replica(&server.url()).await;
        replicas.push(app(client, &runs, |b| {
            b.key(KeyBy::Route).group("search", ["/search"], quota)
        }));
    }
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let loops = (0..12).map(|i| {
        let router = replicas[i % 3].clone();
        tokio::spawn(async move {
            let (mut admitted, mut limited) = (0u64, 0u64);
            while tokio::time::Instant::now() < until {
                let answer = send(&router, get_with("/search", None)).await;
                let (policy, params) = field(&answer, "ratelimit-policy");
                assert_eq!(
                    (policy.as_str(), param(&params, "q"), param(&params, "w")),
                    ("search", 200, 1)
                );
                let (_, params) = field(&answer, "ratelimit");
                match answer.status {
                    200 => admitted += 1,
                    429 => {
                        assert_eq!(answer.header("retry-after"), Some("1"));
                        assert_eq!(param(&params, "r"), 0);
                        limited += 1;
                    }
                    other => panic!("{other}"),
                }
            }
            (admitted, limited)
        })
    });
    let (mut admitted, mut limited) = (0, 0);
    for task in loops.collect::<Vec<_>>() {
        let (a, l) = task.await.unwrap();
        admitted += a;
        limited += l;
    }
    let decided = runs.decided.lock().unwrap().clone();
    assert_eq!(
        decided.len() as u64,
        admitted,
        "an admitted request without its decision"
    );
    let (first, last) = (decided.iter().min().unwrap(), decided.iter().max().unwrap());
    let span = last.duration_since(*first).unwrap();
    let expected = f64::from(BURST) + span.as_secs_f64() * f64::from(RATE);
    assert!(limited > 0, "the load never exceeded the rate");
    let admitted_f = admitted as f64;
    assert!(
        (admitted_f - expected).abs() <= expected * 0.01,
        "{admitted} admitted in {span:?} of server time between the first and the last \
         admitting decision; the quota allows {expected:.1} (±1 %)"
    );
    assert_eq!(runs.count() as u64, admitted);
}
