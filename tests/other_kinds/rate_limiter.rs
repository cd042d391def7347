//! The rate limiter (GCRA on the server's clock): a burst then the steady rate; no window of
//! the decisions' server times admits more than rate × window + burst; keyed budgets apart,
//! each key gone once its bucket is full again; a dropped `acquire` gives its slot back; bad
//! quotas and cell counts are `InvalidInput`; data dlock did not write is refused; Redis down
//! is `Err` (closed) or `Unchecked` (open). `#[rate_limited]` on the same budgets: a limited
//! call is `RateLimited` with its `retry_after` and its body never runs; a waiting one sleeps
//! until its slot within its bound and reserves nothing beyond it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use dlock_core::{Client, Decision, Error, ErrorKind, Quota, rate_limited};
use redis::AsyncCommands;

use crate::support::sched_delay;
use crate::support::{Backend, LogCapture, Worker, backend_tests, eventually};

/// Two calls at once per user, then one every 100 ms; `ran` counts the bodies that ran.
#[rate_limited(key = "rl:macro:{user}", rate = "10/s", burst = 2, client = client)]
async fn per_user(client: &Client, user: u64, ran: &AtomicUsize) -> Result<u64, Error> {
    ran.fetch_add(1, Ordering::SeqCst);
    Ok(user)
}

/// One at a time, one every 100 ms; waits up to 1 s for its slot.
#[rate_limited(key = "rl:macro-wait", rate = "10/s", burst = 1, on_limited = "wait", wait = "1s", client = client)]
async fn patient(client: &Client) -> Result<(), Error> {
    Ok(())
}

/// The same budget as `patient`, but waits at most 20 ms.
#[rate_limited(key = "rl:macro-wait", rate = "10/s", burst = 1, on_limited = "wait", wait = "20ms", client = client)]
async fn hurried(client: &Client) -> Result<(), Error> {
    Ok(())
}

/// Closed (the default) and open, on a budget of one a second.
#[rate_limited(key = "rl:macro-down", rate = "1/s", client = client)]
async fn closed(client: &Client) -> Result<(), Error> {
    Ok(())
}

#[rate_limited(key = "rl:macro-down", rate = "1/s", fail_open = true, client = client)]
async fn open(client: &Client, ran: &AtomicUsize) -> Result<(), Error> {
    ran.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn server_time(decision: &Decision) -> SystemTime {
    match decision {
        Decision::Allowed { decided_at, .. } | Decision::Limited { decided_at, .. } => *decided_at,
        other => panic!("no server time in {other:?}"),
    }
}

backend_tests!(
    /// The burst runs, the next call is `RateLimited` with the wait until its slot and its body
    /// does not run; another user's budget is apart; the budget is the one a `RateLimiter`
    /// named like the rendered key uses.
    async fn the_attribute_limits_before_the_body_runs(backend: Backend) {
        let c = backend.client();
        let ran = AtomicUsize::new(0);
        assert_eq!(per_user(&c, 1, &ran).await.unwrap(), 1);
        assert_eq!(per_user(&c, 1, &ran).await.unwrap(), 1);
        let err = per_user(&c, 1, &ran).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::RateLimited, "{err}");
        let retry = err
            .retry_after()
            .expect("a limited call says when to retry");
        assert!(
            !retry.is_zero() && retry <= Duration::from_millis(100),
            "{retry:?}"
        );
        assert!(err.to_string().contains("rl:macro:1"), "{err}");
        assert_eq!(ran.load(Ordering::SeqCst), 2, "the limited body never ran");
        assert_eq!(per_user(&c, 2, &ran).await.unwrap(), 2, "user 2 is apart");
        let same = c
            .rate_limiter("rl:macro:1", Quota::per_second(10).burst(2))
            .unwrap();
        assert!(
            !same.try_acquire(1).await.unwrap().is_allowed(),
            "one budget"
        );
    }

    /// `on_limited = "wait"`: the second call sleeps until its slot (one interval after the
    /// first); a call whose slot is beyond its `wait` fails at once and reserves nothing, so
    /// the slot after it is still free once its `retry_after` has passed.
    async fn the_attribute_waits_within_its_bound_and_reserves_nothing_beyond(backend: Backend) {
        let c = backend.client();
        patient(&c).await.unwrap();
        let started = std::time::Instant::now();
        patient(&c).await.unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(50),
            "the second call waited for its slot: {:?}",
            started.elapsed()
        );
        let started = std::time::Instant::now();
        let err = hurried(&c).await.unwrap_err();
        let took = started.elapsed();
        assert!(err.is_rate_limited(), "{err}");
        sched_delay::assert_on_time(took < Duration::from_millis(90), || {
            format!("refused at once, not after a wait: {took:?}")
        })
        .await;
        let retry = err.retry_after().unwrap();
        assert!(retry > Duration::from_millis(20), "{retry:?}");
        tokio::time::sleep(retry).await;
        let budget = c
            .rate_limiter("rl:macro-wait", Quota::per_second(10).burst(1))
            .unwrap();
        assert!(
            budget.try_acquire(1).await.unwrap().is_allowed(),
            "the refused call reserved nothing"
        );
    }

    async fn a_burst_then_the_steady_rate(backend: Backend) {
        let c = backend.client();
        let limiter = c
            .rate_limiter("rl:burst", Quota::per_second(10).burst(5))
            .unwrap();
        for left in (0..5).rev() {
            match limiter.try_acquire(1).await.unwrap() {
                Decision::Allowed { remaining, .. } => assert_eq!(remaining, left),
                other => panic!("the burst admits 5: {other:?}"),
            }
        }
        let limited = limiter.try_acquire(1).await.unwrap();
        let Decision::Limited { wait, .. } = limited else {
            panic!("the sixth waits: {limited:?}");
        };
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        // `acquire` reserves the next slot and sleeps until it: one interval after the burst.
        let admitted = limiter.acquire(1).await.unwrap();
        let gap = server_time(&admitted)
            .duration_since(server_time(&limited))
            .unwrap();
        assert!(gap <= Duration::from_millis(110), "{gap:?}");
        assert!(
            !limiter.try_acquire(1).await.unwrap().is_allowed(),
            "the next slot is taken"
        );
    }

    /// Four tasks ask as fast as they can for 2 s; on the decisions' own server times, no
    /// 1-second window admits more than rate + burst, and the whole run admits the quota.
    async fn no_window_admits_more_than_rate_plus_burst(backend: Backend) {
        const RATE: u32 = 50;
        const BURST: u32 = 10;
        let c = backend.client();
        let limiter = c
            .rate_limiter("rl:window", Quota::per_second(RATE).burst(BURST))
            .unwrap();
        let until = tokio::time::Instant::now() + Duration::from_secs(2);
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let mut admitted = Vec::new();
                    while tokio::time::Instant::now() < until {
                        let d = limiter.try_acquire(1).await.unwrap();
                        if d.is_allowed() {
                            admitted.push(server_time(&d));
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mut times = Vec::new();
        for task in tasks {
            times.extend(task.await.unwrap());
        }
        times.sort();
        let window = Duration::from_secs(1);
        for (i, start) in times.iter().enumerate() {
            let inside = times[i..]
                .iter()
                .take_while(|t| t.duration_since(*start).unwrap() < window)
                .count();
            assert!(
                inside <= (RATE + BURST) as usize,
                "{inside} admitted in one second from {start:?}"
            );
        }
        let span = times.last().unwrap().duration_since(times[0]).unwrap();
        let quota = BURST as f64 + span.as_secs_f64() * f64::from(RATE);
        let admitted = times.len() as f64;
        assert!(
            (admitted - quota).abs() <= 2.0,
            "{admitted} admitted over {span:?}, the quota allows {quota:.1}"
        );
    }

    async fn keyed_budgets_are_apart_and_an_idle_key_leaves_nothing(backend: Backend) {
        let c = backend.client();
        let per_user = c
            .keyed_rate_limiter("rl:users", Quota::per_second(20).burst(2))
            .unwrap();
        assert!(per_user.try_acquire("ann", 2).await.unwrap().is_allowed());
        assert!(!per_user.try_acquire("ann", 1).await.unwrap().is_allowed());
        assert!(
            per_user.try_acquire("bob", 2).await.unwrap().is_allowed(),
            "bob's own budget"
        );
        let mut con = backend.raw().await;
        let key = "dlock:rl:{rl:users:ann}";
        let pttl: i64 = con.pttl(key).await.unwrap();
        assert!(
            (1..=100).contains(&pttl),
            "expires when the bucket is full again: {pttl}"
        );
        eventually(Duration::from_secs(5), "the idle key gone", || {
            let mut con = con.clone();
            async move {
                let exists: bool = con.exists(key).await.ok()?;
                (!exists).then_some(())
            }
        })
        .await;
        assert!(
            per_user.try_acquire("ann", 2).await.unwrap().is_allowed(),
            "full again"
        );
    }

    async fn a_dropped_acquire_gives_its_slot_back(backend: Backend) {
        let c = backend.client();
        // One cell per 10 s: a slot given back is told apart from one kept by seconds.
        let limiter = c
            .rate_limiter("rl:refund", Quota::per_minute(6).burst(1))
            .unwrap();
        assert!(limiter.try_acquire(1).await.unwrap().is_allowed());
        // Reserves the slot 10 s away, then is dropped while it sleeps.
        let dropped = tokio::time::timeout(Duration::from_millis(50), limiter.acquire(1)).await;
        assert!(dropped.is_err(), "still sleeping");
        // The refund runs in the background: the next slot is the one given back (~10 s),
        // not the one after it (~20 s).
        eventually(Duration::from_secs(2), "the slot given back", || async {
            match limiter.try_acquire(1).await.ok()? {
                Decision::Limited { wait, .. } if wait <= Duration::from_secs(11) => Some(()),
                _ => None,
            }
        })
        .await;
    }

    async fn bad_input_is_refused_and_foreign_data_left_alone(backend: Backend) {
        let c = backend.client();
        for (quota, says) in [
            (Quota::per_second(0), "rate is 0"),
            (Quota::per_second(5).burst(0), "burst is 0"),
            (Quota::per(1, Duration::ZERO), "period is 0"),
            (Quota::per_second(2_000_000), "microsecond"),
        ] {
            let err = c.rate_limiter("rl:bad", quota).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            assert!(err.to_string().contains(says), "{err}");
        }
        let limiter = c
            .rate_limiter("rl:n", Quota::per_second(5).burst(3))
            .unwrap();
        for n in [0, 4] {
            let err = limiter.try_acquire(n).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        }
        let mut con = backend.raw().await;
        let _: () = con.set("dlock:rl:{rl:foreign}", "mine").await.unwrap();
        let foreign = c.rate_limiter("rl:foreign", Quota::per_second(5)).unwrap();
        let err = foreign.try_acquire(1).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let kept: String = con.get("dlock:rl:{rl:foreign}").await.unwrap();
        assert_eq!(kept, "mine");
    }
);

/// Redis down: a closed limiter answers `Err` within the command timeout; an open one admits
/// without a decision, and says so once per outage. (Current-thread: the log capture is
/// per thread.)
#[tokio::test]
async fn redis_down_fails_closed_by_default_and_open_on_request() {
    let logs = LogCapture::start();
    let mut backend = Backend::single();
    let c = backend.client();
    let closed = c.rate_limiter("rl:down", Quota::per_second(5)).unwrap();
    let open = closed.clone().fail_open(true);
    assert!(closed.try_acquire(1).await.unwrap().is_allowed());
    backend.kill("dlock:rl:{rl:down}");
    let started = std::time::Instant::now();
    let err = closed.try_acquire(1).await.unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for _ in 0..3 {
        assert_eq!(open.try_acquire(1).await.unwrap(), Decision::Unchecked);
    }
    assert_eq!(open.acquire(1).await.unwrap(), Decision::Unchecked);
    assert_eq!(
        logs.matching("admitting without a decision").len(),
        1,
        "one line per outage"
    );
}

/// A hung Redis (SIGSTOP): an open limiter answers `Unchecked` for the first call of the
/// outage within the command timeout, not after the port probe that explains the failure
/// (which waits up to 500 ms for a port that accepts and never answers). The old answer came
/// after both, never before 200 ms + 500 ms (timers do not fire early): the bound is one it
/// could not meet, with 500 ms to spare for a loaded machine, not a speed claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_is_unchecked_within_the_command_timeout_when_open() {
    let server = crate::support::redis();
    let c = Client::builder(server.url().as_str())
        .command_timeout(Duration::from_millis(200))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let open = c
        .rate_limiter("rl:hung", Quota::per_second(5))
        .unwrap()
        .fail_open(true);
    assert!(open.try_acquire(1).await.unwrap().is_allowed());
    server.pause().unwrap();
    let started = std::time::Instant::now();
    assert_eq!(open.try_acquire(1).await.unwrap(), Decision::Unchecked);
    let took = started.elapsed();
    server.resume().unwrap();
    sched_delay::assert_on_time(took < Duration::from_millis(700), || {
        format!(
            "Unchecked after {took:?}, the command timeout is 200 ms: it waited for the port probe"
        )
    })
    .await;
}

/// `#[rate_limited]` with Redis down: closed by default (`Err` within the command timeout,
/// the body not run), open with `fail_open = true` (the body runs, one log line per outage).
#[tokio::test]
async fn the_attribute_fails_closed_by_default_and_open_as_written() {
    let logs = LogCapture::start();
    let mut backend = Backend::single();
    let c = backend.client();
    let ran = AtomicUsize::new(0);
    closed(&c).await.unwrap();
    backend.kill("dlock:rl:{rl:macro-down}");
    let started = std::time::Instant::now();
    let err = closed(&c).await.unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for _ in 0..3 {
        open(&c, &ran).await.unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    assert_eq!(
        logs.matching("admitting without a decision").len(),
        1,
        "one line per outage"
    );
}

/// The decisions of four tasks asking as fast as they can in bursts for 2 s (200/s, burst
/// 20), in the order of their server times, replayed through governor's GCRA on its fake clock at the same
/// instants: the same decisions, but for at most one cell at a boundary (decisions in the same
/// microsecond are compared as a group: their order inside it is not known).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decisions_match_governor_replayed_on_the_same_instants() {
    use governor::clock::FakeRelativeClock;
    use std::num::NonZeroU32;

    const RATE: u32 = 200;
    const BURST: u32 = 20;
    let backend = Backend::single();
    let c = backend.client();
    let limiter = c
        .rate_limiter("rl:governor", Quota::per_second(RATE).burst(BURST))
        .unwrap();
    // Bursts of asking (150 ms) and quiet spells (120 ms, the bucket partly refills), so the
    // trace crosses the burst boundary many times, not only at the start.
    let began = tokio::time::Instant::now();
    let until = began + Duration::from_secs(2);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while tokio::time::Instant::now() < until {
                    let phase = began.elapsed().as_millis() % 270;
                    if phase >= 150 {
                        let quiet = u64::try_from(270 - phase).unwrap();
                        tokio::time::sleep(Duration::from_millis(quiet)).await;
                        continue;
                    }
                    let d = limiter.try_acquire(1).await.unwrap();
                    seen.push((server_time(&d), d.is_allowed()));
                }
                seen
            })
        })
        .collect();
    let mut decisions = Vec::new();
    for task in tasks {
        decisions.extend(task.await.unwrap());
    }
    decisions.sort();
    let start = decisions[0].0;

    let clock = FakeRelativeClock::default();
    let quota = governor::Quota::per_second(NonZeroU32::new(RATE).unwrap())
        .allow_burst(NonZeroU32::new(BURST).unwrap());
    let replay = governor::RateLimiter::direct_with_clock(quota, clock.clone());
    let mut at = Duration::ZERO;
    let (mut ours_total, mut theirs_total, mut differ) = (0usize, 0usize, 0usize);
    for group in decisions.chunk_by(|a, b| a.0 == b.0) {
        let offset = group[0].0.duration_since(start).unwrap();
        clock.advance(offset - at);
        at = offset;
        let ours = group.iter().filter(|(_, allowed)| *allowed).count();
        let theirs = group.iter().filter(|_| replay.check().is_ok()).count();
        differ += ours.abs_diff(theirs);
        ours_total += ours;
        theirs_total += theirs;
    }
    assert!(
        decisions.len() > 1_000,
        "{} decisions only",
        decisions.len()
    );
    assert!(
        differ <= 1,
        "{differ} decisions differ from governor's ({ours_total} admitted here, {theirs_total} \
         there, of {})",
        decisions.len()
    );
}

/// Four processes ask one limiter (200/s, burst 20) as fast as answers come for 5 s: on the
/// admitted cells' own server times, the count is the quota within 1 % (burst + rate × span),
/// and no 1-second window admits more than rate + burst.
fn four_processes_share_one_budget_exactly(backend: Backend) {
    const RATE: u32 = 200;
    const BURST: u32 = 20;
    let start = SystemTime::now() + Duration::from_millis(1_500);
    let start_us = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let args = vec![
        "rate".to_owned(),
        backend.worker_arg(),
        "name=rl:accuracy".to_owned(),
        format!("rate={RATE}"),
        format!("burst={BURST}"),
        format!("start_us={start_us}"),
        "ms=5000".to_owned(),
    ];
    let workers: Vec<Worker> = (0..4).map(|_| Worker::spawn(&args)).collect();
    let mut times: Vec<u64> = Vec::new();
    for worker in &workers {
        let summary = worker.line(Duration::from_secs(60));
        assert!(summary.starts_with("admitted "), "{summary}");
        let line = worker.line(Duration::from_secs(10));
        let list = line.strip_prefix("times ").expect("the admitted times");
        times.extend(
            list.split(',')
                .filter(|t| !t.is_empty())
                .map(|t| t.parse::<u64>().unwrap()),
        );
    }
    times.sort_unstable();
    let span_us = times.last().unwrap() - times[0];
    let quota = f64::from(BURST) + span_us as f64 / 1e6 * f64::from(RATE);
    let admitted = times.len() as f64;
    assert!(
        (admitted - quota).abs() <= quota * 0.01,
        "{admitted} admitted in {span_us} µs; the quota allows {quota:.1} (±1 %)"
    );
    for (i, from) in times.iter().enumerate() {
        let inside = times[i..]
            .iter()
            .take_while(|t| **t - from < 1_000_000)
            .count();
        assert!(
            inside <= (RATE + BURST) as usize,
            "{inside} admitted in the second from {from} µs"
        );
    }
}

backend_tests!(
    /// Four processes, one budget: see [`four_processes_share_one_budget_exactly`].
    fn four_processes_at_200_per_second_for_5_seconds(backend: Backend) {
        four_processes_share_one_budget_exactly(backend);
    }
);

/// 100,000 keyed limiters touched once each: Redis holds their keys while their buckets
/// refill, and its memory returns to the baseline once they are idle (each key expires at its
/// TAT: nothing is left behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_idle_keys_leave_nothing_behind() {
    const KEYS: usize = 100_000;
    let backend = Backend::single();
    let c = backend.client();
    let mut con = backend.raw().await;
    let used = |con: &mut crate::support::Plain| {
        let mut con = con.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("memory")
                .query_async(&mut con)
                .await
                .unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap()
        }
    };
    // One cell of 10/s, burst 10: each key refills (and expires) 100 ms after its touch.
    let per_user = c
        .keyed_rate_limiter("rl:many", Quota::per_second(10))
        .unwrap();
    assert!(
        per_user
            .try_acquire("warm-up", 1)
            .await
            .unwrap()
            .is_allowed()
    );
    let baseline = used(&mut con).await;
    let tasks: Vec<_> = (0..64)
        .map(|task| {
            let per_user = per_user.clone();
            tokio::spawn(async move {
                let mut peak_keys = 0;
                for i in (task..KEYS).step_by(64) {
                    let d = per_user.try_acquire(&format!("user:{i}"), 1).await.unwrap();
                    assert!(d.is_allowed());
                    peak_keys += 1;
                }
                peak_keys
            })
        })
        .collect();
    let mut touched = 0;
    for task in tasks {
        touched += task.await.unwrap();
    }
    assert_eq!(touched, KEYS);
    eventually(Duration::from_secs(30), "the idle keys expired", || {
        let mut con = con.clone();
        async move {
            let keys: u64 = redis::cmd("DBSIZE").query_async(&mut con).await.ok()?;
            (keys == 0).then_some(())
        }
    })
    .await;
    let after = used(&mut con).await;
    assert!(
        after <= baseline + 64 * 1024,
        "used_memory {after} B after the keys expired, {baseline} B before"
    );
}
