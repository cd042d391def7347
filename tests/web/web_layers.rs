//! The `web` example's dlock-tower layers, replicas as separate processes on one Redis.
//! `POST /orders/{id}/pay` behind the IdempotencyLayer, across three replicas: 1,000 POSTs for
//! 200 keys, sent at once and retried, charge each order once (in Redis, and in PostgreSQL:
//! one payment row per order); each answer is the first
//! attempt's (a replay marked `Idempotent-Replayed: true`) or the one kind of "retry" 409
//! (`code: "in_progress"`, `Retry-After: 1`); a key reused for another order gets 422
//! `key_reused`. A replica paused (SIGSTOP) past its leases mid-payment, or killed (SIGKILL):
//! the retry runs again on another replica and its answer is the one replayed; the paused
//! one's late payment is refused by the store's fence. `GET /orders?ids=…` behind the RateLimitLayer: one budget per client address
//! across two replicas, then 429 with `Retry-After` and the `RateLimit` fields.

use std::time::Duration;

use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper::body::Bytes;
use redis::AsyncCommands;
use serde_json::Value;

use super::web_pay::{Http, Replica, create_order, http};

/// The search's burst (examples/web/src/routes.rs, `search_quota`).
const SEARCH_BURST: usize = 10;
use crate::support::{eventually, raw, redis};

const ORDERS: u64 = 200;
/// Per order, the same key, spread over the replicas: 1,000 POSTs in all.
const REQUESTS_PER_KEY: usize = 5;

/// One answer, with the headers the contract names.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    replayed: bool,
    body: Value,
}

async fn pay_with_key(http: &Http, base: &str, id: u64, key: &str, body: &str) -> Answer {
    let request = hyper::Request::builder()
        .method(Method::POST)
        .uri(format!("{base}/orders/{id}/pay"))
        .header("idempotency-key", format!("\"{key}\""))
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = http.request(request).await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (retry_after, replayed) = (header("retry-after"), header("idempotent-replayed"));
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        retry_after,
        replayed: replayed.as_deref() == Some("true"),
        body: serde_json::from_slice(&bytes).unwrap(),
    }
}

fn is_retry_later(answer: &Answer) -> bool {
    answer.status == 409 && answer.body["code"] == "in_progress"
}

/// 1,000 POSTs, 200 keys (one per order, 5 requests each, spread over three replicas), all at
/// once and each key retried until it is stored: every order is charged and recorded once,
/// each answer is the first attempt's or the one kind of "retry" 409, a key reused for another
/// order or with another body gets 422. Returns the server, for the store's own checks.
async fn keys_charge_once(store_args: &[&str]) -> dlock_testkit::RedisServer {
    let server = redis();
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|name| Replica::start(&server, name, store_args))
        .collect();
    let bases: Vec<&str> = replicas.iter().map(|r| r.base.as_str()).collect();
    let http = http();
    for id in 1..=ORDERS {
        create_order(&http, bases[id as usize % 3], id, 1000 + id).await;
    }

    let requests = (1..=ORDERS).flat_map(|id| (0..REQUESTS_PER_KEY).map(move |n| (id, n % 3)));
    // 200 in flight at a time (each a connection: the file-descriptor limit of the test).
    let answers: Vec<(u64, Answer)> = futures_util::stream::iter(requests.map(|(id, r)| {
        let (http, base) = (&http, bases[r]);
        async move {
            (
                id,
                pay_with_key(http, base, id, &format!("k-{id}"), "").await,
            )
        }
    }))
    .buffer_unordered(200)
    .collect()
    .await;
    assert_eq!(answers.len(), 1_000);

    let mut con = raw(&server).await;
    for id in 1..=ORDERS {
        let mine: Vec<&Answer> = answers
            .iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, a)| a)
            .collect();
        check_key(&http, bases[id as usize % 3], id, &mine).await;
        let charges: Vec<String> = con
            .lrange(format!("provider:charges:{{{id}}}"), 0, -1)
            .await
            .unwrap();
        assert_eq!(charges.len(), 1, "order {id} charged {charges:?}");
    }

    // The key of order 1, reused for order 2, or for order 1 with a body: 422, nothing charged.
    for (id, body) in [(2, ""), (1, "{\"tip\":1}")] {
        let reused = pay_with_key(&http, bases[0], id, "k-1", body).await;
        assert_eq!(
            (reused.status, &reused.body["code"]),
            (422, &Value::from("key_reused"))
        );
    }
    // Without a key the route answers as before: already paid, final.
    let plain = super::web_pay::pay(&http, bases[1], 1).await;
    assert_eq!(
        (plain.status, &plain.body["code"]),
        (409, &Value::from("already_paid"))
    );

    for replica in replicas {
        assert!(replica.terminate().success(), "a clean exit on SIGTERM");
    }
    server
}

/// One key's answers: the one kind of "retry" 409, or the first attempt's 200 (itself, or
/// replayed); then retried until stored, its replay.
async fn check_key(http: &Http, base: &str, id: u64, mine: &[&Answer]) {
    for answer in mine {
        if is_retry_later(answer) {
            assert_eq!(answer.retry_after.as_deref(), Some("1"), "{answer:?}");
        } else {
            assert_eq!(answer.status, 200, "order {id}: {answer:?}");
        }
    }
    let first: Vec<&&Answer> = mine
        .iter()
        .filter(|a| a.status == 200 && !a.replayed)
        .collect();
    assert!(
        first.len() <= 1,
        "order {id}: the handler answered twice: {mine:#?}"
    );
    let replay = eventually(
        Duration::from_secs(20),
        "the key's answer is stored",
        || async move {
            let answer = pay_with_key(http, base, id, &format!("k-{id}"), "").await;
            (!is_retry_later(&answer)).then_some(answer)
        },
    )
    .await;
    assert!(replay.replayed, "order {id}: {replay:?}");
    assert_eq!(replay.status, 200);
    for answer in mine.iter().filter(|a| a.status == 200) {
        assert_eq!(
            answer.body, replay.body,
            "order {id}: two different answers for one key"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_charge_once_across_three_replicas() {
    keys_charge_once(&[]).await;
}

/// The same with the orders in PostgreSQL: one payment row per order (the handler writes under
/// the order lock's fence, checked by the SQL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_charge_once_with_postgres() {
    let Some(pg) = super::web_postgres::postgres("idempotency_keys_charge_once_with_postgres")
    else {
        return;
    };
    let url = pg.url();
    let _server = keys_charge_once(&super::web_postgres::on_postgres(&url, &[])).await;
    let db = super::web_postgres::sql(&pg).await;
    let rows = db
        .query(
            "SELECT order_id::text, count(*) FROM payments GROUP BY order_id",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len() as u64, ORDERS);
    for row in rows {
        let (order, count): (String, i64) = (row.get(0), row.get(1));
        assert_eq!(count, 1, "order {order} has {count} payment rows");
    }
}

/// `GET {base}{path}`: status, the named headers, the JSON body.
async fn get(http: &Http, url: &str) -> (u16, [Option<String>; 3], Value) {
    let request = hyper::Request::get(url)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = http.request(request).await.unwrap();
    let headers = ["retry-after", "ratelimit", "ratelimit-policy"].map(|name| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    });
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_is_rate_limited_per_client_across_replicas() {
    let server = redis();
    let replicas = [
        Replica::start(&server, "a", &[]),
        Replica::start(&server, "b", &[]),
    ];
    let http = http();
    for id in 1..=2 {
        create_order(&http, &replicas[0].base, id, 1000 + id).await;
    }
    let bad = get(&http, &format!("{}/orders?ids=1,x", replicas[0].base)).await;
    assert_eq!((bad.0, &bad.2["code"]), (400, &Value::from("invalid_ids")));

    // The burst, alternating replicas: one budget for this client's address.
    for n in 1..SEARCH_BURST {
        let (status, [_, limit, policy], body) = get(
            &http,
            &format!("{}/orders?ids=1,2,99", replicas[n % 2].base),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(body.as_array().map(Vec::len), Some(2), "{body}");
        assert_eq!(policy.as_deref(), Some("\"search\";q=1;w=2"));
        let remaining = (SEARCH_BURST - 1 - n).to_string();
        assert!(
            limit
                .unwrap()
                .starts_with(&format!("\"search\";r={remaining};t="))
        );
    }
    // Then, well before the budget refills (one every 2 s), a 429 with its fields.
    let mut limited = None;
    for n in 0..20 {
        let answer = get(&http, &format!("{}/orders?ids=1", replicas[n % 2].base)).await;
        if answer.0 == 429 {
            limited = Some(answer);
            break;
        }
    }
    let (_, [retry_after, limit, policy], body) = limited.expect("no 429 after the burst");
    let wait: u64 = retry_after.unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    assert_eq!(
        limit.as_deref(),
        Some(format!("\"search\";r=0;t={wait}").as_str())
    );
    assert_eq!(policy.as_deref(), Some("\"search\";q=1;w=2"));
    assert_eq!(body["code"], "rate_limited");

    for replica in replicas {
        assert!(replica.terminate().success(), "a clean exit on SIGTERM");
    }
}

/// Whether a lock of the idempotency layer is still in Redis (its key, whatever its scope).
async fn layer_lock_held(con: &mut redis::aio::MultiplexedConnection) -> bool {
    let keys: Vec<String> = con.keys("dlock:{idem:web-pay:*").await.unwrap();
    !keys.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_paused_or_killed_mid_payment_is_retried_on_another() {
    let server = redis();
    // Replica a charges slowly (3 s); leases are 1 s (the order's lock and the key's).
    let mut slow = Replica::start(
        &server,
        "a",
        &["--provider-latency-ms", "3000", "--lock-ttl-ms", "1000"],
    );
    let other = Replica::start(&server, "b", &["--lock-ttl-ms", "1000"]);
    let http = http();
    let locks = crate::support::client(&server);
    let mut con = raw(&server).await;
    for id in 1..=2 {
        create_order(&http, &other.base, id, 1000 + id).await;
    }
    let holding = |id: u64| {
        let locks = locks.clone();
        async move { locks.inspect(&format!("order:{id}")).await.ok().flatten() }
    };

    // SIGSTOP while it charges order 1, until both its leases ran out.
    let first = tokio::spawn({
        let (http, base) = (http.clone(), slow.base.clone());
        async move { pay_with_key(&http, &base, 1, "p-1", "").await }
    });
    eventually(Duration::from_secs(10), "replica a charges order 1", || {
        holding(1)
    })
    .await;
    let paused = slow.child.process().pause().unwrap();
    eventually(
        Duration::from_secs(10),
        "replica a's leases ran out",
        || {
            let mut con = con.clone();
            let held = holding(1);
            async move { (held.await.is_none() && !layer_lock_held(&mut con).await).then_some(()) }
        },
    )
    .await;
    let retry = pay_with_key(&http, &other.base, 1, "p-1", "").await;
    assert_eq!((retry.status, retry.replayed), (200, false), "{retry:?}");
    assert_eq!(retry.body["paid_by"], "b");
    paused.resume().unwrap();
    // Resumed, replica a finishes its charge, but the store refuses its record (fenced out):
    // its answer is "retry", never stored; the key replays b's payment.
    let late = first.await.unwrap();
    assert!(is_retry_later(&late), "{late:?}");
    let replay = pay_with_key(&http, &slow.base, 1, "p-1", "").await;
    assert!(replay.replayed, "{replay:?}");
    assert_eq!(replay.body, retry.body);
    let records: Vec<String> = con.lrange("order:{1}:payments", 0, -1).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");

    // SIGKILL while it charges order 2: the retry runs again on b.
    let killed = tokio::spawn({
        let (http, base) = (http.clone(), slow.base.clone());
        async move {
            let request = hyper::Request::post(format!("{base}/orders/2/pay"))
                .header("idempotency-key", "k-2")
                .body(Full::new(Bytes::new()))
                .unwrap();
            http.request(request).await.is_err()
        }
    });
    eventually(Duration::from_secs(10), "replica a charges order 2", || {
        holding(2)
    })
    .await;
    slow.child.process_mut().kill();
    assert!(killed.await.unwrap(), "the killed replica answered");
    let retry = eventually(Duration::from_secs(20), "the key's retry runs", || {
        let (http, base) = (&http, other.base.as_str());
        async move {
            let answer = pay_with_key(http, base, 2, "k-2", "").await;
            (!is_retry_later(&answer)).then_some(answer)
        }
    })
    .await;
    assert_eq!((retry.status, retry.replayed), (200, false), "{retry:?}");
    assert_eq!(retry.body["paid_by"], "b");
    let replay = pay_with_key(&http, &other.base, 2, "k-2", "").await;
    assert_eq!((replay.replayed, &replay.body), (true, &retry.body));
    assert!(other.terminate().success());
}
