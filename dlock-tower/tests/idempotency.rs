//! IdempotencyLayer on real Redis, across replicas: the draft's status codes and headers (400,
//! 409 + Retry-After, 422, replays marked `Idempotent-Replayed`), 5xx not stored, a holder that
//! lost its lease storing nothing, Redis down (503 or fail open), records of another version.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path};
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use dlock_core::Client;
use dlock_testkit::RedisServer;
use dlock_tower::{Idempotency, IdempotencyBuilder, IdempotencyLayer};
use redis::Commands;
use tokio::sync::{Semaphore, mpsc};

use crate::support::{Answer, replica, send};

/// One replica of the app: `POST /orders/{id}/pay` answers 201 with the run number.
struct App {
    router: Router,
    /// Handler runs of this replica.
    runs: Arc<AtomicUsize>,
    /// Each run, as it starts: its `Idempotency` context.
    entered: mpsc::UnboundedReceiver<Idempotency>,
    /// With `gated`, each run waits for a permit here.
    proceed: Arc<Semaphore>,
    /// The next run answers 500.
    fail_next: Arc<AtomicBool>,
}

/// Handler runs across every replica of a test, numbering the responses.
type Total = Arc<AtomicUsize>;

fn app(
    client: Client,
    total: &Total,
    gated: bool,
    configure: impl FnOnce(IdempotencyBuilder) -> IdempotencyBuilder,
) -> App {
    let layer = configure(
        IdempotencyLayer::builder(client, "payments").principal(|parts| {
            parts
                .headers
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(String::from)
        }),
    )
    .build()
    .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let (tx, entered) = mpsc::unbounded_channel();
    let proceed = Arc::new(Semaphore::new(0));
    let fail_next = Arc::new(AtomicBool::new(false));
    let state = (
        runs.clone(),
        total.clone(),
        tx,
        proceed.clone(),
        fail_next.clone(),
    );
    let handler =
        move |Path(id): Path<u32>, context: Option<Extension<Idempotency>>, body: String| {
            let (runs, total, tx, proceed, fail_next) = state.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let run = total.fetch_add(1, Ordering::SeqCst) + 1;
                if let Some(Extension(context)) = &context {
                    let _ = tx.send(context.clone());
                }
                if gated {
                    proceed.acquire().await.unwrap().forget();
                }
                if fail_next.swap(false, Ordering::SeqCst) {
                    return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
                }
                if body == "busy" {
                    // The handler's own "in progress, retry": never stored.
                    return (StatusCode::CONFLICT, [("retry-after", "1")], "busy").into_response();
                }
                let reply = serde_json::json!({ "order": id, "run": run, "body": body });
                (
                    StatusCode::CREATED,
                    [
                        ("location", format!("/orders/{id}/payments/{run}")),
                        ("content-type", "application/json".to_owned()),
                    ],
                    reply.to_string(),
                )
                    .into_response()
            }
        };
    let router = Router::new()
        .route("/orders/{id}/pay", post(handler))
        .route_layer(layer);
    App {
        router,
        runs,
        entered,
        proceed,
        fail_next,
    }
}

fn pay(key: Option<&str>, user: &str, body: &str) -> Request<Body> {
    let mut request = Request::post("/orders/42/pay").header("x-user", user);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.body(Body::from(body.to_owned())).unwrap()
}

fn is_problem(answer: &Answer, status: u16) {
    assert_eq!(
        answer.status,
        status,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(answer.json()["status"], status);
    let codes = match status {
        400 => &["missing_key", "bad_key"][..],
        409 => &["in_progress"],
        413 => &["too_large"],
        422 => &["key_reused"],
        503 => &["unavailable"],
        _ => &["internal"],
    };
    let code = answer.json()["code"].as_str().unwrap().to_owned();
    assert!(codes.contains(&code.as_str()), "{:?}", answer.json());
}

/// The keys the layer stored records under.
fn records(server: &RedisServer) -> Vec<String> {
    let mut con = server.connection().unwrap();
    con.keys("idempotency:*").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_on_another_replica_replays_the_stored_response() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let a = app(replica(&server.url()).await, &total, false, |b| {
        b.expiry(Duration::from_secs(3_600))
    });
    let b = app(replica(&server.url()).await, &total, false, |b| b);

    let first = send(&a.router, pay(Some("\"k-1\""), "ann", "{\"amount\":5}")).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.json()["run"], 1);
    assert_eq!(first.header("idempotent-replayed"), None);

    // The bare form names the same key.
    let again = send(&b.router, pay(Some("k-1"), "ann", "{\"amount\":5}")).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(again.header("content-type"), Some("application/json"));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        (a.runs.load(Ordering::SeqCst), b.runs.load(Ordering::SeqCst)),
        (1, 0)
    );

    // The record expires with the configured expiry.
    let keys = records(&server);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ttl: i64 = server.connection().unwrap().pttl(&keys[0]).unwrap();
    assert!(ttl > 3_500_000 && ttl <= 3_600_000, "{ttl}");

    // Another principal's equal key is another record: it runs.
    let other = send(&b.router, pay(Some("k-1"), "bob", "{\"amount\":5}")).await;
    assert_eq!((other.status, other.json()["run"].as_u64()), (201, Some(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_key_with_another_request_gets_422() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let a = app(replica(&server.url()).await, &total, false, |b| b);
    assert_eq!(
        send(&a.router, pay(Some("k"), "ann", "{\"amount\":5}"))
            .await
            .status,
        201
    );
    let other_body = send(&a.router, pay(Some("k"), "ann", "{\"amount\":6}")).await;
    is_problem(&other_body, 422);
    assert_eq!(a.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_duplicate_gets_409_with_retry_after() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let mut a = app(replica(&server.url()).await, &total, true, |b| b);
    let b = app(replica(&server.url()).await, &total, false, |b| {
        b.retry_after(Duration::from_millis(1_500))
    });

    let router = a.router.clone();
    let first = tokio::spawn(async move { send(&router, pay(Some("k"), "ann", "{}")).await });
    let context = a.entered.recv().await.unwrap();
    assert!(!context.recovered());

    let duplicate = send(&b.router, pay(Some("k"), "ann", "{}")).await;
    is_problem(&duplicate, 409);
    assert_eq!(duplicate.header("retry-after"), Some("2"));
    // A different request with the key in progress: 422, not 409.
    is_problem(
        &send(&b.router, pay(Some("k"), "ann", "{\"x\":1}")).await,
        422,
    );

    a.proceed.add_permits(1);
    let first = first.await.unwrap();
    assert_eq!(first.status, 201);
    let replay = send(&b.router, pay(Some("k"), "ann", "{}")).await;
    assert_eq!((replay.status, replay.body), (201, first.body));
    assert_eq!(total.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_and_malformed_keys_get_400() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let required = app(replica(&server.url()).await, &total, false, |b| {
        b.required(true)
    });
    let optional = app(replica(&server.url()).await, &total, false, |b| b);

    let missing = send(&required.router, pay(None, "ann", "{}")).await;
    is_problem(&missing, 400);
    assert!(
        missing.json()["title"]
            .as_str()
            .unwrap()
            .contains("missing")
    );
    for bad in ["\"open", "a b", "a,b", "\"\""] {
        is_problem(
            &send(&optional.router, pay(Some(bad), "ann", "{}")).await,
            400,
        );
    }
    let two = Request::post("/orders/42/pay")
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .body(Body::empty())
        .unwrap();
    is_problem(&send(&optional.router, two).await, 400);
    assert_eq!(total.load(Ordering::SeqCst), 0);

    // Optional: without a key the request runs, every time, and nothing is stored.
    for _ in 0..2 {
        assert_eq!(
            send(&optional.router, pay(None, "ann", "{}")).await.status,
            201
        );
    }
    assert_eq!(optional.runs.load(Ordering::SeqCst), 2);
    assert!(records(&server).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_not_stored_unless_asked() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let a = app(replica(&server.url()).await, &total, false, |b| b);
    a.fail_next.store(true, Ordering::SeqCst);
    assert_eq!(
        send(&a.router, pay(Some("k"), "ann", "{}")).await.status,
        500
    );
    assert!(records(&server).is_empty(), "a 5xx left a record");
    let retry = send(&a.router, pay(Some("k"), "ann", "{}")).await;
    assert_eq!(
        (retry.status, retry.header("idempotent-replayed")),
        (201, None)
    );
    assert_eq!(a.runs.load(Ordering::SeqCst), 2);

    // A response that says "retry later" (Retry-After) is not stored either.
    for _ in 0..2 {
        let busy = send(&a.router, pay(Some("kb"), "ann", "busy")).await;
        assert_eq!(
            (busy.status, busy.header("idempotent-replayed")),
            (409, None)
        );
    }
    assert_eq!(a.runs.load(Ordering::SeqCst), 4);

    let stores = app(replica(&server.url()).await, &total, false, |b| {
        b.store_server_errors(true)
    });
    stores.fail_next.store(true, Ordering::SeqCst);
    assert_eq!(
        send(&stores.router, pay(Some("k5"), "ann", "{}"))
            .await
            .status,
        500
    );
    let replay = send(&stores.router, pay(Some("k5"), "ann", "{}")).await;
    assert_eq!(
        (replay.status, replay.header("idempotent-replayed")),
        (500, Some("true"))
    );
    assert_eq!(stores.runs.load(Ordering::SeqCst), 1);
}

/// The first request's lease is lost while its handler runs (`expire_lock`, as a pause past the
/// lease would); a retry on another replica runs again under a larger fence and stores its
/// response; the first handler's late response is refused by the guarded write, and the
/// retry's response is the one replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_lost_its_lease_stores_nothing() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let mut a = app(replica(&server.url()).await, &total, true, |b| b);
    let mut b = app(replica(&server.url()).await, &total, false, |b| b);

    let router = a.router.clone();
    let first = tokio::spawn(async move { send(&router, pay(Some("k"), "ann", "{}")).await });
    let stale = a.entered.recv().await.unwrap();
    assert_eq!(server.expire_lock(stale.lease().name()).unwrap(), 1);

    let retry = send(&b.router, pay(Some("k"), "ann", "{}")).await;
    assert_eq!((retry.status, retry.json()["run"].as_u64()), (201, Some(2)));
    let successor = b.entered.recv().await.unwrap();
    assert!(
        successor.recovered(),
        "the running record was not seen as recoverable"
    );
    assert!(successor.fence() > stale.fence());

    // The stale holder finishes: its client still gets its answer, but nothing is stored.
    a.proceed.add_permits(1);
    let late = first.await.unwrap();
    assert_eq!(late.json()["run"], 1);
    assert!(!stale.lease().is_held());
    stale.lease().lost().await; // resolved: the refused write reported the loss

    let replay = send(&a.router, pay(Some("k"), "ann", "{}")).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.body, retry.body,
        "the stale holder's response replaced the successor's"
    );
    assert_eq!(total.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_503_or_runs_unprotected() {
    let mut server = RedisServer::start().unwrap();
    let total = Total::default();
    let closed = app(replica(&server.url()).await, &total, false, |b| b);
    let open = app(replica(&server.url()).await, &total, false, |b| {
        b.fail_open(true)
    });
    server.kill();

    let refused = send(&closed.router, pay(Some("k"), "ann", "{}")).await;
    is_problem(&refused, 503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(closed.runs.load(Ordering::SeqCst), 0);

    assert_eq!(
        send(&open.router, pay(Some("k"), "ann", "{}")).await.status,
        201
    );
    assert_eq!(open.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_another_version_is_refused_and_kept() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let a = app(replica(&server.url()).await, &total, false, |b| b);
    assert_eq!(
        send(&a.router, pay(Some("k"), "ann", "{}")).await.status,
        201
    );
    let key = records(&server).pop().unwrap();
    let newer = b"dlock-idempotency/2\n{\"state\":\"done\"}\nbody".to_vec();
    let mut con = server.connection().unwrap();
    let _: () = con.set(&key, &newer).unwrap();

    is_problem(&send(&a.router, pay(Some("k"), "ann", "{}")).await, 500);
    let kept: Vec<u8> = con.get(&key).unwrap();
    assert_eq!(kept, newer);
    assert_eq!(a.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limits() {
    let server = RedisServer::start().unwrap();
    let total = Total::default();
    let a = app(replica(&server.url()).await, &total, false, |b| {
        b.max_response_body(16).max_request_body(64)
    });
    // The response (a JSON object longer than 16 bytes) reaches the client whole ...
    let first = send(&a.router, pay(Some("k"), "ann", "{}")).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.json()["run"], 1);
    // ... and is replayed without its body, saying its length.
    let replay = send(&a.router, pay(Some("k"), "ann", "{}")).await;
    assert_eq!((replay.status, replay.body.len()), (201, 0));
    assert_eq!(
        replay.header("idempotency-body-omitted"),
        Some(first.body.len().to_string().as_str())
    );
    assert_eq!(replay.header("location"), first.header("location"));

    is_problem(
        &send(&a.router, pay(Some("k2"), "ann", &"x".repeat(65))).await,
        413,
    );
    assert_eq!(a.runs.load(Ordering::SeqCst), 1);
}
