//! The `web` example end to end (examples/web): two replicas of the service, as separate OS
//! processes, against one Redis. Concurrent pay requests for the same orders on both replicas
//! charge and record each order once, every other request gets the documented 409, and the
//! fencing tokens of receipt, order and payment record agree. A payment slower than the lock's
//! wait answers `in_progress` with `Retry-After`; SIGTERM lets the payment in flight finish; the
//! store rejects a stale fencing token (exactly, for every u64). `GET /metrics` counts every
//! acquire call under its outcome, in Prometheus text with unit suffixes, and lists dlock's
//! series at zero before any traffic.
//! One server only: the service takes one `--redis-url` (`Client::builder`: it has no cluster mode).
//!
//! The replicas run `dlock-test-web`, a binary of this package whose `main` is the example's
//! (`web::main()`): unlike `target/<profile>/web`, Cargo builds it, fresh, for
//! `cargo test -p dlock-tests` too, and tells the test its path (`CARGO_BIN_EXE_…`).

use std::collections::BTreeMap;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use dlock_core::FencingToken;
use dlock_testkit::{LineChild, RedisServer};
use futures_util::future::join_all;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use redis::AsyncCommands;
use serde_json::{Value, json};
use web::Receipt;
use web::store::{Claimed, Recorded, Store};

use crate::support::{client, eventually, raw, redis};

const ORDERS: u64 = 20;
/// Per order, alternating between the two replicas.
const REQUESTS_PER_ORDER: usize = 4;

pub(crate) type Http = HttpClient<HttpConnector, Full<Bytes>>;

/// One replica of the service: a child process, killed on drop unless stopped before.
pub(crate) struct Replica {
    pub(crate) child: LineChild,
    pub(crate) base: String,
}

impl Replica {
    /// Starts a replica on a free port and waits for its `listening on http://…` line.
    pub(crate) fn start(server: &RedisServer, name: &str, extra: &[&str]) -> Replica {
        Self::spawn(server, name, extra, None)
    }

    /// As [`Replica::start`], with the replica's log (its stderr) written to `log` instead of
    /// the test's stderr, for a test that awaits a line of it.
    pub(crate) fn start_logged(
        server: &RedisServer,
        name: &str,
        extra: &[&str],
        log: &std::path::Path,
    ) -> Replica {
        let file = std::fs::File::create(log).expect("the replica's log file");
        Self::spawn(server, name, extra, Some(file))
    }

    fn spawn(
        server: &RedisServer,
        name: &str,
        extra: &[&str],
        log: Option<std::fs::File>,
    ) -> Replica {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlock-test-web"));
        cmd.args(["--redis-url", &server.url(), "--listen", "127.0.0.1:0"])
            .args(["--name", name])
            .args(extra);
        if let Some(file) = log {
            cmd.stderr(file);
        }
        // Its stdout keeps being drained after the first line, so the replica never blocks on it.
        let child = LineChild::spawn(cmd).expect("spawn the web service");
        let line = child
            .line(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("replica {name} did not say where it listens: {e}"));
        let base = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("replica {name}: unexpected first line {line:?}"))
            .to_owned();
        Replica { child, base }
    }

    /// SIGTERM, then the exit status (graceful shutdown: the requests in flight finish first).
    pub(crate) fn terminate(mut self) -> ExitStatus {
        let pid = i32::try_from(self.child.process().pid()).expect("pid");
        let pid = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        self.child
            .wait(Duration::from_secs(15))
            .unwrap_or_else(|e| panic!("after SIGTERM: {e}"))
    }
}

/// One HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<String>,
    pub(crate) body: Value,
}

pub(crate) fn http() -> Http {
    HttpClient::builder(TokioExecutor::new()).build_http()
}

pub(crate) async fn call(http: &Http, method: Method, url: &str, body: Option<Value>) -> Answer {
    let mut request = hyper::Request::builder().method(method).uri(url);
    let body = match body {
        Some(json) => {
            request = request.header("content-type", "application/json");
            Full::new(Bytes::from(json.to_string()))
        }
        None => Full::new(Bytes::new()),
    };
    let response = http
        .request(request.body(body).expect("request"))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ascii header").to_owned());
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!("{url}: {status} with a non-JSON body ({e}): {bytes:?}");
    });
    Answer {
        status,
        retry_after,
        body,
    }
}

/// `GET {base}/metrics`: the Prometheus text.
async fn metrics_text(http: &Http, base: &str) -> String {
    let url = format!("{base}/metrics");
    let response = http
        .get(url.parse().expect("url"))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(response.status().as_u16(), 200);
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// The sum of the samples of `name` whose labels contain every one of `labels`.
fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| labels.iter().all(|l| line.contains(l)))
        .map(|line| {
            let value = line.rsplit(' ').next().expect("a value");
            value
                .parse::<f64>()
                .unwrap_or_else(|e| panic!("{line}: {e}"))
        })
        .sum()
}

pub(crate) async fn create_order(http: &Http, base: &str, id: u64, amount: u64) {
    let url = format!("{base}/orders/{id}");
    let created = call(http, Method::POST, &url, Some(json!({ "amount": amount }))).await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.body["status"], "unpaid");
}

pub(crate) async fn pay(http: &Http, base: &str, id: u64) -> Answer {
    call(http, Method::POST, &format!("{base}/orders/{id}/pay"), None).await
}

/// The answers of one order's concurrent requests: exactly one 200, every other one a
/// documented 409 (`already_paid` with the winner's receipt, or `in_progress` with
/// `Retry-After`). Returns the winner's receipt.
pub(crate) fn check_answers(id: u64, answers: &[Answer]) -> Value {
    assert!(
        answers.iter().all(|a| a.status == 200 || a.status == 409),
        "order {id}: only 200 and 409 are expected: {answers:#?}"
    );
    let winners: Vec<&Answer> = answers.iter().filter(|a| a.status == 200).collect();
    assert_eq!(winners.len(), 1, "order {id}: paid once: {answers:#?}");
    let receipt = winners[0].body.clone();
    assert_eq!(receipt["order_id"], id);
    assert_eq!(receipt["amount"], 1000 + id);
    assert_eq!(receipt["charge_id"], format!("ch-{id}-1"), "one charge");
    for answer in answers.iter().filter(|a| a.status == 409) {
        match answer.body["code"].as_str() {
            Some("already_paid") => {
                assert_eq!(answer.body["receipt"], receipt, "order {id}: {answer:?}");
                assert_eq!(answer.retry_after, None, "final: {answer:?}");
            }
            Some("in_progress") => {
                let error = format!("payment for order {id} in progress, retry");
                assert_eq!(answer.body["error"], error.as_str());
                assert_eq!(answer.retry_after.as_deref(), Some("1"), "{answer:?}");
            }
            _ => panic!("order {id}: undocumented 409: {answer:?}"),
        }
    }
    receipt
}

/// What Redis holds for the order: paid, one payment record and one provider charge, and the
/// fencing token of the receipt in the order's fence.
async fn check_stored(con: &mut redis::aio::MultiplexedConnection, id: u64, receipt: &Value) {
    let order: BTreeMap<String, String> = con.hgetall(format!("order:{{{id}}}")).await.unwrap();
    assert_eq!(order["status"], "paid", "order {id}: {order:?}");
    assert_eq!(order["fence"], receipt["fencing_token"].to_string());
    assert_eq!(order["paid_by"], receipt["paid_by"].as_str().unwrap());
    let stored: Value = serde_json::from_str(&order["receipt"]).unwrap();
    assert_eq!(&stored, receipt);
    let records: Vec<String> = con
        .lrange(format!("order:{{{id}}}:payments"), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        records.len(),
        1,
        "order {id}: one payment record: {records:?}"
    );
    assert_eq!(
        &serde_json::from_str::<Value>(&records[0]).unwrap(),
        receipt
    );
    let charges: Vec<String> = con
        .lrange(format!("provider:charges:{{{id}}}"), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        charges,
        [format!(
            "{} by {}",
            1000 + id,
            receipt["paid_by"].as_str().unwrap()
        )]
    );
}

/// Either replica shows the paid order with one payment; a late retry gets the same receipt.
async fn check_replicas_agree(http: &Http, bases: [&str; 2], id: u64, receipt: &Value) {
    let shown = call(
        http,
        Method::GET,
        &format!("{}/orders/{id}", bases[1]),
        None,
    )
    .await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.body["status"], "paid");
    assert_eq!(shown.body["paid_by"], receipt["paid_by"]);
    assert_eq!(
        (&shown.body["payments"], &shown.body["receipt"]),
        (&json!(1), receipt)
    );
    let again = pay(http, bases[0], id).await;
    assert_eq!(
        (again.status, &again.body["code"]),
        (409, &json!("already_paid"))
    );
    assert_eq!(&again.body["receipt"], receipt, "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_order_is_paid_once_across_two_replicas() {
    let server = redis();
    let replicas = [
        Replica::start(&server, "a", &[]),
        Replica::start(&server, "b", &[]),
    ];
    let bases = [replicas[0].base.as_str(), replicas[1].base.as_str()];
    let http = http();
    for id in 1..=ORDERS {
        create_order(&http, bases[id as usize % 2], id, 1000 + id).await;
    }

    // Every request at once: 4 per order, alternating replicas.
    let requests = (1..=ORDERS).flat_map(|id| (0..REQUESTS_PER_ORDER).map(move |n| (id, n % 2)));
    let answers = join_all(requests.map(|(id, r)| {
        let http = &http;
        async move { (id, pay(http, bases[r], id).await) }
    }))
    .await;
    let mut by_order: BTreeMap<u64, Vec<Answer>> = BTreeMap::new();
    for (id, answer) in answers {
        by_order.entry(id).or_default().push(answer);
    }

    let mut con = raw(&server).await;
    for (id, answers) in &by_order {
        let receipt = check_answers(*id, answers);
        check_stored(&mut con, *id, &receipt).await;
        check_replicas_agree(&http, bases, *id, &receipt).await;
    }
    assert_eq!(by_order.len() as u64, ORDERS);

    // `GET /metrics`: every pay request made one acquire call (the concurrent ones, and the
    // one repeat per order of `check_replicas_agree`), counted under its outcome (acquired at
    // once or after a wait, or timed out); nothing is held any more.
    let texts = join_all(bases.map(|base| metrics_text(&http, base))).await;
    let sum = |labels: &[&str]| -> f64 {
        texts
            .iter()
            .map(|t| metric_sum(t, "dlock_acquire_duration_seconds_count", labels))
            .sum()
    };
    let calls = sum(&[]);
    let requests = ORDERS as usize * (REQUESTS_PER_ORDER + 1);
    assert_eq!(calls, requests as f64, "{texts:?}");
    assert!(
        sum(&[r#"outcome="acquired""#]) >= ORDERS as f64,
        "{texts:?}"
    );
    assert_eq!(
        sum(&[r#"outcome="acquired""#]) + sum(&[r#"outcome="timeout""#]),
        calls,
        "{texts:?}"
    );
    for text in &texts {
        assert_eq!(
            metric_sum(text, "dlock_held", &[r#"kind="mutex""#]),
            0.0,
            "{text}"
        );
        assert!(
            text.contains("dlock_acquire_duration_seconds_bucket{"),
            "{text}"
        );
    }

    for replica in replicas {
        assert!(replica.terminate().success(), "a clean exit on SIGTERM");
    }
}

/// Before any request: the label-free series and the fixed kind × outcome set are listed at
/// zero (so a scrape and `rate()` see them from start-up), durations carry their unit, and an
/// unlabelled lock shows as `lock="(none)"`, never `lock=""`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_listed_at_zero_before_any_traffic_with_their_units() {
    let server = redis();
    let replica = Replica::start(&server, "a", &[]);
    let text = metrics_text(&http(), &replica.base).await;
    let none = r#"lock="(none)""#;
    for (name, labels) in [
        ("dlock_renewals", &[][..]),
        ("dlock_renewal_duration_seconds_count", &[][..]),
        ("dlock_renewal_margin_seconds_count", &[][..]),
        (
            "dlock_acquire_duration_seconds_count",
            &[r#"kind="mutex""#, none, r#"outcome="acquired""#][..],
        ),
        (
            "dlock_acquire_duration_seconds_count",
            &[r#"kind="semaphore""#, r#"outcome="timeout""#][..],
        ),
        (
            "dlock_lease_lost",
            &[r#"kind="rwlock""#, r#"reason="expired""#][..],
        ),
        ("dlock_held", &[r#"kind="mutex""#, none][..]),
        ("dlock_waiting", &[r#"kind="mutex""#, none][..]),
    ] {
        let listed = text.lines().any(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && labels.iter().all(|l| line.contains(l))
                && line.ends_with(" 0")
        });
        assert!(listed, "{name} {labels:?} is not listed at 0:\n{text}");
    }
    assert!(!text.contains(r#"lock="""#), "{text}");
    assert!(!text.contains("dlock_acquire_duration_count"), "{text}");
    assert!(replica.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_slower_than_the_wait_answers_in_progress_and_survives_sigterm() {
    let server = redis();
    // The provider takes 4 s; a second request waits 1 s for the lock, then answers busy.
    let replica = Replica::start(&server, "slow", &["--provider-latency-ms", "4000"]);
    let http = http();
    create_order(&http, &replica.base, 7, 1007).await;
    let first = tokio::spawn({
        let (http, base) = (http.clone(), replica.base.clone());
        async move { pay(&http, &base, 7).await }
    });
    let locks = client(&server);
    eventually(
        Duration::from_secs(10),
        "the first payment holds the lock",
        || async { locks.inspect("order:7").await.ok().flatten() },
    )
    .await;

    let second = pay(&http, &replica.base, 7).await;
    assert_eq!(second.status, 409, "{second:?}");
    assert_eq!(second.body["code"], "in_progress");
    assert_eq!(
        second.body["error"],
        "payment for order 7 in progress, retry"
    );
    assert_eq!(second.retry_after.as_deref(), Some("1"));

    // SIGTERM while the first payment is in flight: it completes, then the replica exits 0.
    let stopped = tokio::task::spawn_blocking(move || replica.terminate());
    let first = first.await.unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    assert!(stopped.await.unwrap().success());
    let mut con = raw(&server).await;
    check_stored(&mut con, 7, &first.body).await;
}

/// Issue 47: `GET /orders/{id}/receipt`, an axum handler taking `Path(order_id): Path<u64>` and
/// locked with `#[distributed_lock(key = "order:{order_id}")]`, runs: 404 for no order, 409
/// `unpaid` before the payment, and during a payment in flight (which holds the same lock) it
/// waits for it and answers its receipt, never "unpaid".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_locked_on_its_path_extractor_waits_for_the_payment_in_flight() {
    let server = redis();
    // The provider takes 1 s: the receipt request waits up to 2 s for the order's lock.
    let replica = Replica::start(&server, "r", &["--provider-latency-ms", "1000"]);
    let http = http();
    let receipt_of = |id: u64| {
        let (http, url) = (
            http.clone(),
            format!("{}/orders/{id}/receipt", replica.base),
        );
        async move { call(&http, Method::GET, &url, None).await }
    };
    let missing = receipt_of(404).await;
    assert_eq!(
        (missing.status, &missing.body["code"]),
        (404, &json!("not_found"))
    );
    create_order(&http, &replica.base, 5, 1005).await;
    let unpaid = receipt_of(5).await;
    assert_eq!(
        (unpaid.status, &unpaid.body["code"]),
        (409, &json!("unpaid"))
    );

    let paying = tokio::spawn({
        let (http, base) = (http.clone(), replica.base.clone());
        async move { pay(&http, &base, 5).await }
    });
    let locks = client(&server);
    eventually(
        Duration::from_secs(10),
        "the payment holds the order's lock",
        || async { locks.inspect("order:5").await.ok().flatten() },
    )
    .await;
    let during = receipt_of(5).await;
    let paid = paying.await.unwrap();
    assert_eq!(paid.status, 200, "{paid:?}");
    assert_eq!(
        during.status, 200,
        "the receipt did not wait for the payment: {during:?}"
    );
    assert_eq!(during.body, paid.body);
    assert!(replica.terminate().success());
}

/// A receipt of order `order_id` under `token`, for writing to the store directly.
pub(crate) fn receipt(order_id: u64, token: FencingToken, by: &str) -> Receipt {
    Receipt {
        order_id,
        amount: 900,
        charge_id: format!("ch-{order_id}-1"),
        fencing_token: token.get(),
        paid_by: by.to_owned(),
    }
}

/// The fence checks of a store, whatever its backend (`web_postgres.rs` runs them on
/// PostgreSQL): two successive holds of order 9's lock, the older token smaller. The newer
/// holder's claim refuses the older one's payment while the order is still unpaid (only the
/// fence can refuse it then), and after the payment too; a retry of the recorded write is
/// already paid, with its receipt.
pub(crate) async fn check_stale_tokens_are_refused(store: &Store, locks: &dlock_core::Client) {
    let lock = locks.mutex("order:9").unwrap();
    let old = lock.acquire().await.unwrap();
    let old_token = old.fencing_token().await.unwrap();
    old.release().await.unwrap();
    let new = lock.acquire().await.unwrap();
    let new_token = new.fencing_token().await.unwrap();
    assert!(old_token < new_token);

    assert!(store.create(9, 900).await.unwrap());
    assert!(!store.create(9, 901).await.unwrap(), "the id is taken");
    let unpaid = Claimed::Unpaid { amount: 900 };
    assert_eq!(store.claim(9, old_token).await.unwrap(), unpaid);
    assert_eq!(store.claim(9, new_token).await.unwrap(), unpaid);
    assert_eq!(store.claim(9, new_token).await.unwrap(), unpaid, "a retry");
    // The old holder cannot take its claim back (its later write would then pass).
    let claimed = Claimed::Stale { last: new_token };
    assert_eq!(store.claim(9, old_token).await.unwrap(), claimed);
    // The old holder, paused past its lease, wakes up and writes: fenced out, although the
    // order is unpaid still.
    let stale = receipt(9, old_token, "old");
    let fenced = Recorded::Stale { last: new_token };
    assert_eq!(store.record_payment(&stale).await.unwrap(), fenced);
    let order = store.get(9).await.unwrap().unwrap();
    assert_eq!((order.status.as_str(), order.payments), ("unpaid", 0));

    let newer = receipt(9, new_token, "new");
    assert_eq!(store.record_payment(&newer).await.unwrap(), Recorded::Done);
    assert_eq!(store.record_payment(&stale).await.unwrap(), fenced);
    assert_eq!(
        store.claim(9, old_token).await.unwrap(),
        Claimed::Stale { last: new_token }
    );
    // A retry of the recorded write, and a claim by its holder: already paid, with its receipt.
    let paid = Recorded::AlreadyPaid(newer.clone());
    assert_eq!(store.record_payment(&newer).await.unwrap(), paid);
    let paid = Claimed::AlreadyPaid(newer.clone());
    assert_eq!(store.claim(9, new_token).await.unwrap(), paid);
    let order = store.get(9).await.unwrap().unwrap();
    assert_eq!(order.status, "paid");
    assert_eq!(order.paid_by.as_deref(), Some("new"));
    assert_eq!((order.payments, order.receipt), (1, Some(newer)));
    new.release().await.unwrap();

    assert_eq!(store.claim(404, new_token).await.unwrap(), Claimed::Missing);
    let missing = store.record_payment(&receipt(404, new_token, "new")).await;
    assert_eq!(missing.unwrap(), Recorded::Missing);
    assert_eq!(store.get(404).await.unwrap(), None);
}

/// Tokens compare exactly across the whole u64 range: past 2^53 (where a double loses
/// integers: Lua's numbers), and at the top (past i64, where a `bigint` column stops).
pub(crate) async fn check_tokens_compare_exactly(store: &Store) {
    for (id, top) in [(10, (1 << 53) + 1), (11, u64::MAX)] {
        assert!(store.create(id, 900).await.unwrap());
        let top = FencingToken::new(top);
        let done = store.record_payment(&receipt(id, top, "top")).await;
        assert_eq!(done.unwrap(), Recorded::Done);
        let below = FencingToken::new(top.get() - 1);
        let stale = store.record_payment(&receipt(id, below, "below")).await;
        assert_eq!(stale.unwrap(), Recorded::Stale { last: top });
        let order = store.get(id).await.unwrap().unwrap();
        let fence = order.receipt.map(|r| r.fencing_token);
        assert_eq!(fence, Some(top.get()), "kept exactly");
    }
}

#[tokio::test]
async fn the_store_rejects_a_stale_fencing_token() {
    let server = redis();
    let locks = client(&server);
    check_stale_tokens_are_refused(&Store::new(locks.connection()), &locks).await;
}

#[tokio::test]
async fn the_store_compares_tokens_exactly_past_2_pow_53() {
    // Lua's numbers are doubles: 2^53 + 1 and 2^53 would compare equal as numbers.
    let server = redis();
    check_tokens_compare_exactly(&Store::new(client(&server).connection())).await;
}
