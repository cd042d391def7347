//! The `web` example with its orders in PostgreSQL (`--store postgres`), end to end: replicas as
//! separate OS processes (`dlock-test-web`, as in `web_pay.rs`, whose helpers these tests
//! share), the locks in a real redis-server, the orders in a real PostgreSQL 15 started by
//! `dlock_testkit::PostgresServer` (a temp dir, a Unix socket, run as the `postgres` OS user
//! under root).
//!
//! - A replica paused (SIGSTOP) while it charges an order, past its lease: another replica
//!   takes the lock and claims the order with a larger fencing token; the paused one resumes
//!   and tries to record its payment while the order is still unpaid — the database's `UPDATE
//!   … WHERE last_fence <= $fence` refuses it, the replica answers as fenced out, and the order
//!   ends paid once, by the newer holder.
//! - 200 concurrent pays over 3 replicas, 20 orders: each order paid once; every other answer
//!   the documented 409.
//! - The store's fence checks (`web_pay.rs`' stale-token and exact-u64 checks), on PostgreSQL.
//! - `#[ignore]`d: pays per second on Redis and on PostgreSQL, same machine and request mix
//!   (`cargo test --release -p dlock-tests --test integration -- --ignored --nocapture
//!   web_postgres::pays_per_second`).
//!
//! Without PostgreSQL (see `PostgresServer::check_requirements`; `scripts/ensure-deps.sh`
//! installs it as root on Debian) each test prints why it is skipped — on stderr, uncaptured —
//! and passes.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dlock_testkit::{PostgresServer, RedisServer};
use futures_util::future::join_all;
use redis::AsyncCommands;
use serde_json::json;
use web::store::Store;

use crate::support::{client, eventually, raw, redis};
use crate::web::web_pay::{
    Replica, check_answers, check_stale_tokens_are_refused, check_tokens_compare_exactly,
    create_order, http, pay,
};

/// Says something the person running the tests must see: straight to stderr, which libtest
/// does not capture.
fn tell(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// A PostgreSQL server for `test`, or `None` (after saying why the test is skipped) when this
/// machine cannot run one.
pub(crate) fn postgres(test: &str) -> Option<PostgresServer> {
    if let Err(missing) = PostgresServer::check_requirements() {
        tell(&format!(
            "SKIPPED web_postgres::{test}: {}",
            missing.message()
        ));
        return None;
    }
    Some(PostgresServer::start().unwrap_or_else(|e| panic!("could not start PostgreSQL: {e:?}")))
}

/// A connection for assertions on the tables.
pub(crate) async fn sql(pg: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to PostgreSQL");
    tokio::spawn(connection);
    client
}

/// The replicas' arguments for the PostgreSQL store, then `extra`.
pub(crate) fn on_postgres<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--store", "postgres", "--postgres-url", url];
    args.extend_from_slice(extra);
    args
}

/// The line of the log file `path` that contains `needle`, once one does (the replica writes
/// it in the background).
async fn log_line(path: &Path, needle: &str) -> String {
    eventually(Duration::from_secs(20), needle, || async {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().find(|l| l.contains(needle)).map(str::to_owned)
    })
    .await
}

/// The fencing token at the end of a `charging … under fencing token N` line.
fn token_in(line: &str) -> u64 {
    let token = line.rsplit(' ').next().unwrap_or_default();
    token
        .parse()
        .unwrap_or_else(|_| panic!("no token in {line:?}"))
}

/// What the database holds for order `id`: its row (status, last fence, payer) and its payment
/// records (fencing token, payer).
async fn stored(
    db: &tokio_postgres::Client,
    id: u64,
) -> (
    (String, Option<String>, Option<String>),
    Vec<(String, String)>,
) {
    let row = db
        .query_one(
            "SELECT status, last_fence::text, paid_by FROM orders WHERE order_id = $1::text::numeric",
            &[&id.to_string()],
        )
        .await
        .unwrap();
    let payments = db
        .query(
            "SELECT fencing_token::text, paid_by FROM payments WHERE order_id = $1::text::numeric",
            &[&id.to_string()],
        )
        .await
        .unwrap();
    (
        (row.get(0), row.get(1), row.get(2)),
        payments.iter().map(|r| (r.get(0), r.get(1))).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_is_refused_by_the_database_once_a_newer_holder_claimed() {
    let Some(pg) =
        postgres("a_paused_holder_is_refused_by_the_database_once_a_newer_holder_claimed")
    else {
        return;
    };
    let server = redis();
    let url = pg.url();
    let logs = tempfile::tempdir().unwrap();
    let (a_log, b_log) = (logs.path().join("a.log"), logs.path().join("b.log"));
    // A charges for 2 s under a lease of 1 s (renewed every third of it while it runs); B's
    // charge takes 3 s, so that A, resumed, writes while B has claimed the order but not paid.
    let a_args = on_postgres(
        &url,
        &["--provider-latency-ms", "2000", "--lock-ttl-ms", "1000"],
    );
    let a = Replica::start_logged(&server, "a", &a_args, &a_log);
    let b_args = on_postgres(&url, &["--provider-latency-ms", "3000"]);
    let b = Replica::start_logged(&server, "b", &b_args, &b_log);
    let http = http();
    create_order(&http, &a.base, 1, 1001).await;

    let first = tokio::spawn({
        let (http, base) = (http.clone(), a.base.clone());
        async move { pay(&http, &base, 1).await }
    });
    // A holds the lock, has its token and has claimed the order: it is in the provider call.
    let a_token =
        token_in(&log_line(&a_log, "order 1: charging 1001 cents under fencing token").await);
    a.child.process().stop().unwrap();
    // Its lease runs out in Redis (nobody renews it).
    let locks = client(&server);
    eventually(Duration::from_secs(10), "A's lease expires", || async {
        locks
            .inspect("order:1")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    let second = tokio::spawn({
        let (http, base) = (http.clone(), b.base.clone());
        async move { pay(&http, &base, 1).await }
    });
    let b_token =
        token_in(&log_line(&b_log, "order 1: charging 1001 cents under fencing token").await);
    assert!(a_token < b_token, "{a_token} < {b_token}");
    a.child.process().cont().unwrap();

    // A's provider call returns; its record is refused by the fence alone: the order is still
    // unpaid (B is charging), with B's token.
    let first = first.await.unwrap();
    let db = sql(&pg).await;
    let unpaid = ("unpaid".to_owned(), Some(b_token.to_string()), None);
    assert_eq!(
        stored(&db, 1).await,
        (unpaid, vec![]),
        "A's write left no trace"
    );
    // The answer the Redis store gives a fenced-out holder (the crate's HTTP contract).
    assert_eq!(first.status, 409, "{first:?}");
    assert_eq!(first.retry_after.as_deref(), Some("1"));
    let fenced =
        json!({ "error": "payment for order 1 in progress, retry", "code": "in_progress" });
    assert_eq!(first.body, fenced);
    let said = format!("order 1: fenced out (our token {a_token}, store holds {b_token})");
    log_line(&a_log, &said).await;

    let second = second.await.unwrap();
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(second.body["paid_by"], "b");
    assert_eq!(second.body["fencing_token"], b_token);
    let paid = (
        "paid".to_owned(),
        Some(b_token.to_string()),
        Some("b".to_owned()),
    );
    let record = vec![(b_token.to_string(), "b".to_owned())];
    assert_eq!(stored(&db, 1).await, (paid, record), "paid once, by B");
    // The provider was called by both: A's call was in flight when it paused. The fence keeps
    // the record right; a real provider call carries an idempotency key for the charge itself.
    let mut con = raw(&server).await;
    let charges: Vec<String> = con.lrange("provider:charges:{1}", 0, -1).await.unwrap();
    assert_eq!(charges, ["1001 by a", "1001 by b"]);
    assert_eq!(second.body["charge_id"], "ch-1-2");
    for replica in [a, b] {
        assert!(replica.terminate().success());
    }
}

const ORDERS: u64 = 20;
const REQUESTS: u64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_pays_over_three_replicas_charge_each_order_once() {
    let Some(pg) =
        postgres("two_hundred_concurrent_pays_over_three_replicas_charge_each_order_once")
    else {
        return;
    };
    let server = redis();
    let url = pg.url();
    let args = on_postgres(&url, &["--provider-latency-ms", "100"]);
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|name| Replica::start(&server, name, &args))
        .collect();
    let http = http();
    for id in 1..=ORDERS {
        create_order(&http, &replicas[id as usize % 3].base, id, 1000 + id).await;
    }

    // Every request at once: order `n % 20 + 1`, replica `n % 3`.
    let answers = join_all((0..REQUESTS).map(|n| {
        let (http, id) = (&http, n % ORDERS + 1);
        let base = replicas[(n % 3) as usize].base.as_str();
        async move { (id, pay(http, base, id).await) }
    }))
    .await;
    let mut by_order: BTreeMap<u64, Vec<_>> = BTreeMap::new();
    for (id, answer) in answers {
        by_order.entry(id).or_default().push(answer);
    }
    assert_eq!(by_order.len() as u64, ORDERS);

    let db = sql(&pg).await;
    let mut con = raw(&server).await;
    for (id, answers) in &by_order {
        let receipt = check_answers(*id, answers);
        let token = receipt["fencing_token"].as_u64().unwrap().to_string();
        let by = receipt["paid_by"].as_str().unwrap().to_owned();
        let paid = ("paid".to_owned(), Some(token.clone()), Some(by.clone()));
        assert_eq!(stored(&db, *id).await, (paid, vec![(token, by.clone())]));
        let key = format!("provider:charges:{{{id}}}");
        let charges: Vec<String> = con.lrange(key, 0, -1).await.unwrap();
        assert_eq!(charges, [format!("{} by {by}", 1000 + id)], "charged once");
    }
    for replica in replicas {
        assert!(replica.terminate().success());
    }
}

#[tokio::test]
async fn the_postgres_store_rejects_a_stale_fencing_token() {
    let Some(pg) = postgres("the_postgres_store_rejects_a_stale_fencing_token") else {
        return;
    };
    let server = redis();
    let locks = client(&server);
    let store = Store::postgres(&pg.url()).await.unwrap();
    check_stale_tokens_are_refused(&store, &locks).await;
}

#[tokio::test]
async fn the_postgres_store_compares_tokens_exactly_past_2_pow_53() {
    let Some(pg) = postgres("the_postgres_store_compares_tokens_exactly_past_2_pow_53") else {
        return;
    };
    let store = Store::postgres(&pg.url()).await.unwrap();
    check_tokens_compare_exactly(&store).await;
    // As the table keeps it: numeric(20,0), exact.
    let db = sql(&pg).await;
    let top: String = db
        .query_one(
            "SELECT last_fence::text FROM orders WHERE order_id = 11",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(top, u64::MAX.to_string());
}

#[tokio::test]
async fn a_store_that_cannot_connect_says_so() {
    let Some(pg) = postgres("a_store_that_cannot_connect_says_so") else {
        return;
    };
    let wrong = format!("{} user=nobody_here", pg.url());
    let error = Store::postgres(&wrong).await.unwrap_err().to_string();
    assert!(
        error.contains("role \"nobody_here\" does not exist"),
        "{error}"
    );
    let nowhere = "host=/nonexistent/dir port=5432 user=postgres";
    let error = Store::postgres(nowhere).await.unwrap_err().to_string();
    assert!(error.contains("error connecting to server: "), "{error}");
    assert!(error.contains("No such file or directory"), "{error}");
}

/// The request mix of the figure: `orders` orders, each paid by one request, `clients` at a
/// time, over the replicas in turn; provider latency 0. Returns pays per second.
async fn pays_per_second(replicas: &[Replica], orders: u64, clients: u64) -> f64 {
    let http = http();
    for id in 1..=orders {
        create_order(
            &http,
            &replicas[id as usize % replicas.len()].base,
            id,
            1000 + id,
        )
        .await;
    }
    let next = AtomicU64::new(1);
    let started = Instant::now();
    join_all((0..clients).map(|_| async {
        loop {
            let id = next.fetch_add(1, Ordering::Relaxed);
            if id > orders {
                return;
            }
            let base = &replicas[id as usize % replicas.len()].base;
            let answer = pay(&http, base, id).await;
            assert_eq!(answer.status, 200, "{answer:?}");
        }
    }))
    .await;
    orders as f64 / started.elapsed().as_secs_f64()
}

/// The web example's pays per second on Redis and on PostgreSQL (fsync off, as the harness
/// runs it, and durable): 3 replicas, provider latency 0, `WEB_BENCH_ORDERS` orders (2,000)
/// paid once each by `WEB_BENCH_CLIENTS` concurrent clients (32), `WEB_BENCH_RUNS` runs (3)
/// of each store, interleaved. Prints each run, then the median and the range. A measurement,
/// not a check: run it in release (see the file's header).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
async fn pays_per_second_on_redis_and_postgres() {
    let Some(_) = postgres("pays_per_second_on_redis_and_postgres") else {
        return;
    };
    let knob = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (orders, clients, runs) = (
        knob("WEB_BENCH_ORDERS", 2000),
        knob("WEB_BENCH_CLIENTS", 32),
        knob("WEB_BENCH_RUNS", 3),
    );
    let durable = [
        ("fsync", "on"),
        ("synchronous_commit", "on"),
        ("full_page_writes", "on"),
    ];
    // A store's name, and the PostgreSQL settings it runs with (`None`: Redis).
    type Variant<'a> = (&'a str, Option<&'a [(&'a str, &'a str)]>);
    let stores: [Variant<'_>; 3] = [
        ("redis", None),
        ("postgres (fsync off)", Some(&[])),
        ("postgres (durable)", Some(&durable)),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); stores.len()];
    for run in 1..=runs {
        for (i, (name, settings)) in stores.iter().enumerate() {
            let server: RedisServer = redis();
            let logs = tempfile::tempdir().unwrap();
            let pg = settings.map(|s| PostgresServer::start_with(s).unwrap());
            let url = pg.as_ref().map(PostgresServer::url);
            let mut args = vec!["--provider-latency-ms", "0"];
            if let Some(url) = &url {
                args = on_postgres(url, &args);
            }
            let replicas: Vec<Replica> = ["a", "b", "c"]
                .into_iter()
                .map(|n| Replica::start_logged(&server, n, &args, &logs.path().join(n)))
                .collect();
            let rate = pays_per_second(&replicas, orders, clients).await;
            tell(&format!("run {run}: {name}: {rate:.0} pays/s"));
            results[i].push(rate);
        }
    }
    for ((name, _), mut rates) in stores.iter().zip(results) {
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        let (low, high) = (rates[0], rates[rates.len() - 1]);
        tell(&format!(
            "{name}: median {median:.0} pays/s, range {low:.0}-{high:.0} ({runs} runs of \
             {orders} orders, {clients} clients, 3 replicas, provider latency 0)"
        ));
    }
}
