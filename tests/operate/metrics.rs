//! Metrics (dlock-core's `metrics` feature): a scripted sequence of acquisitions, a refusal, a
//! timeout, a queued wait, a lease that runs out, watchdog renewals and a semaphore permit, with
//! every number checked in a debugging recorder; and no label carries a lock name. The
//! scheduler counts a run by its outcome and records how late it started.
//!
//! Standalone server only: the numbers are counted in the client, the same on both backends.
//! A current-thread runtime inside a thread-local recorder: every task of the client (the
//! watchdog's included) records into it, and no other test's numbers mix in.

use std::collections::HashMap;
use std::time::Duration;

use dlock_core::{MutexOptions, Wait};
use dlock_scheduler::{Job, Scheduler};
use dlock_testkit::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::support::client;

/// One search per user per minute.
#[dlock_core::rate_limited(key = "search:{user}", rate = "1/m", client = client)]
async fn per_user(client: &dlock_core::Client, user: u64) -> Result<u64, dlock_core::Error> {
    Ok(user)
}

/// Everything recorded so far. A snapshot of the debugging recorder *consumes* what it reports
/// (counters and gauges start again from 0, histograms empty), so the deltas are summed here;
/// dlock only ever increments and decrements its gauges.
#[derive(Default)]
struct Seen {
    values: HashMap<String, f64>,
    histograms: HashMap<String, Vec<f64>>,
}

impl Seen {
    fn update(&mut self, snapshotter: &Snapshotter) {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let (_, key) = key.into_parts();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            match value {
                DebugValue::Histogram(values) => self
                    .histograms
                    .entry(name)
                    .or_default()
                    .extend(values.into_iter().map(|v| v.into_inner())),
                DebugValue::Counter(n) => *self.values.entry(name).or_default() += n as f64,
                DebugValue::Gauge(g) => *self.values.entry(name).or_default() += g.into_inner(),
            }
        }
    }

    fn counter(&self, name: &str) -> f64 {
        self.values.get(name).copied().unwrap_or_default()
    }

    fn gauge(&self, name: &str) -> f64 {
        self.counter(name)
    }

    fn histogram(&self, name: &str) -> &[f64] {
        self.histograms.get(name).map_or(&[], Vec::as_slice)
    }

    fn names(&self) -> Vec<&String> {
        self.values.keys().chain(self.histograms.keys()).collect()
    }
}

/// Polls the recorder (yielding to the runtime) until `check` holds.
async fn until(
    seen: &mut Seen,
    snapshotter: &Snapshotter,
    what: &str,
    check: impl Fn(&Seen) -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        seen.update(snapshotter);
        if check(seen) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A debugging recorder, its snapshotter, and a current-thread runtime whose tasks all record
/// into it (the recorder is installed thread-locally around `block_on`).
struct Recording {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
    runtime: tokio::runtime::Runtime,
}

impl Recording {
    fn new() -> Self {
        let recorder = DebuggingRecorder::new();
        Self {
            snapshotter: recorder.snapshotter(),
            recorder,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    }
}

const ACQUIRED: &str =
    "dlock.acquire.duration{contended=false,kind=mutex,lock=billing,outcome=acquired}";
const CONTENDED: &str =
    "dlock.acquire.duration{contended=true,kind=mutex,lock=billing,outcome=acquired}";
const BUSY: &str = "dlock.acquire.duration{contended=false,kind=mutex,lock=billing,outcome=busy}";
const TIMEOUT: &str =
    "dlock.acquire.duration{contended=true,kind=mutex,lock=billing,outcome=timeout}";
const HELD: &str = "dlock.held{kind=mutex,lock=billing}";
const WAITING: &str = "dlock.waiting{kind=mutex,lock=billing}";

#[test]
fn a_scripted_sequence_gives_the_right_numbers() {
    let server = RedisServer::start().unwrap();
    let Recording {
        recorder,
        snapshotter,
        runtime,
    } = Recording::new();
    let mut seen = Seen::default();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let client = client(&server);
            let options = MutexOptions::new().label("billing");
            let lock = client.mutex_with("order:1", options.clone()).unwrap();

            // Uncontended: acquired, held 1.
            let guard = lock.acquire().await.unwrap();
            seen.update(&snapshotter);
            assert_eq!(seen.histogram(ACQUIRED).len(), 1);
            assert_eq!(seen.gauge(HELD), 1.0);

            // Refused at once, then a wait that runs out.
            assert!(lock.try_acquire().await.unwrap().is_none());
            let err = lock
                .acquire_timeout(Duration::from_millis(100))
                .await
                .unwrap_err();
            assert!(err.is_busy());
            seen.update(&snapshotter);
            assert_eq!(seen.histogram(BUSY).len(), 1);
            let timeouts = seen.histogram(TIMEOUT).to_vec();
            assert_eq!(timeouts.len(), 1);
            assert!(timeouts[0] >= 0.1, "{timeouts:?}");

            // A queued waiter: waiting 1 while it waits, then acquired (contended) on release.
            let waiter = {
                let lock = lock.clone();
                tokio::spawn(async move { lock.acquire().await.unwrap() })
            };
            until(&mut seen, &snapshotter, "one waiting", |s| s.gauge(WAITING) == 1.0).await;
            guard.release().await.unwrap();
            let second = waiter.await.unwrap();
            seen.update(&snapshotter);
            assert_eq!(seen.gauge(WAITING), 0.0);
            assert_eq!(seen.histogram(CONTENDED).len(), 1);
            assert_eq!(
                seen.histogram("dlock.wait.duration{kind=mutex,lock=billing}").len(),
                2,
                "the timed-out wait and this one"
            );
            assert_eq!(seen.gauge(HELD), 1.0, "one released, one taken");
            second.release().await.unwrap();
            seen.update(&snapshotter);
            assert_eq!(seen.gauge(HELD), 0.0);
            assert_eq!(
                seen.histogram("dlock.hold.duration{kind=mutex,lock=billing}").len(),
                2
            );

            // A fixed lease that runs out: one loss, reason expired.
            let short = client
                .mutex_with("order:2", options.clone().ttl(Duration::from_millis(200)))
                .unwrap();
            let lost = short.acquire().await.unwrap();
            lost.lost().await;
            seen.update(&snapshotter);
            assert_eq!(
                seen.counter("dlock.lease.lost{kind=mutex,lock=billing,reason=expired}"),
                1.0
            );
            drop(lost);

            // Watchdog renewals, each with the lease left when it was sent.
            let renewed = client
                .mutex_with(
                    "order:3",
                    options.clone().ttl(Duration::from_secs(1)).watchdog(),
                )
                .unwrap();
            let held = renewed.acquire().await.unwrap();
            until(&mut seen, &snapshotter, "two renewals", |s| {
                s.counter("dlock.renewals{}") >= 2.0
            })
            .await;
            held.release().await.unwrap();
            seen.update(&snapshotter);
            let margins = seen.histogram("dlock.renewal.margin{}");
            assert!(margins.len() >= 2, "{margins:?}");
            assert!(
                margins.iter().all(|m| *m > 0.0 && *m <= 1.0),
                "margins {margins:?}"
            );
            assert!(!seen.histogram("dlock.renewal.duration{}").is_empty());

            // A release request heard with a renewal; a renewal unanswered for an interval
            // (Redis frozen), then answered: one suspicion, one recovery.
            let asked = client
                .mutex_with(
                    "order:4",
                    options.clone().ttl(Duration::from_secs(3)).watchdog(),
                )
                .unwrap()
                .acquire()
                .await
                .unwrap();
            assert_eq!(client.request_release("order:4").await.unwrap(), 1);
            until(&mut seen, &snapshotter, "the request heard", |s| {
                s.counter("dlock.release.requested{kind=mutex,lock=billing}") == 1.0
            })
            .await;
            server.pause().unwrap();
            until(&mut seen, &snapshotter, "a suspicion", |s| {
                s.counter("dlock.lease.suspect{kind=mutex,lock=billing}") == 1.0
            })
            .await;
            server.resume().unwrap();
            until(&mut seen, &snapshotter, "a recovery", |s| {
                s.counter("dlock.lease.recovered{kind=mutex,lock=billing}") == 1.0
            })
            .await;
            assert!(asked.release().await.unwrap().was_held());
            seen.update(&snapshotter);
            assert_eq!(
                seen.counter("dlock.lease.suspect{kind=mutex,lock=billing}"),
                1.0,
                "one suspicion"
            );

            // A rate limiter: cells admitted and refused under the limiter's name (never a key).
            let limiter = client
                .keyed_rate_limiter("api", dlock_core::Quota::per_minute(2))
                .unwrap();
            assert!(limiter.try_acquire("user:7", 2).await.unwrap().is_allowed());
            assert!(!limiter.try_acquire("user:7", 1).await.unwrap().is_allowed());
            seen.update(&snapshotter);
            assert_eq!(
                seen.counter("dlock.rate.allowed{limiter=api,unchecked=false}"),
                2.0
            );
            assert_eq!(seen.counter("dlock.rate.limited{limiter=api}"), 1.0);
            // `#[rate_limited]` counts under its key template, never the rendered key.
            assert!(per_user(&client, 7).await.is_ok());
            assert!(per_user(&client, 7).await.unwrap_err().is_rate_limited());
            assert!(per_user(&client, 8).await.is_ok());
            seen.update(&snapshotter);
            assert_eq!(
                seen.counter("dlock.rate.allowed{limiter=search:{user},unchecked=false}"),
                2.0
            );
            assert_eq!(seen.counter("dlock.rate.limited{limiter=search:{user}}"), 1.0);
            assert!(
                seen.values.keys().all(|series| !series.contains("search:7")),
                "a rendered key is never a label"
            );

            // A semaphore permit, under its own kind.
            let sem = client.semaphore_with("exports", 2, options.clone()).unwrap();
            sem.with_permits(1, Wait::Forever, |_| async {}).await.unwrap();
            seen.update(&snapshotter);
            assert_eq!(
                seen.histogram(
                    "dlock.acquire.duration{contended=false,kind=semaphore,lock=billing,outcome=acquired}"
                )
                .len(),
                1
            );
            assert_eq!(seen.gauge("dlock.held{kind=semaphore,lock=billing}"), 0.0);
        });
    });
    // Lock names never become labels.
    for name in seen.names() {
        for lock in [
            "order:1", "order:2", "order:3", "order:4", "exports", "user:7",
        ] {
            assert!(!name.contains(lock), "{name} carries the lock name {lock}");
        }
    }
}

#[test]
fn a_scheduler_run_is_counted_with_its_fire_delay() {
    let server = RedisServer::start().unwrap();
    let Recording {
        recorder,
        snapshotter,
        runtime,
    } = Recording::new();
    let mut seen = Seen::default();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            // A yearly job: only `run_now` runs it during the test.
            let job = Job::new("report", "0 0 1 1 *", "UTC", |_| async {
                Ok::<(), String>(())
            })
            .unwrap();
            let failing = Job::new("broken", "0 0 1 1 *", "UTC", |_| async {
                Err::<(), String>("no".into())
            })
            .unwrap();
            let scheduler = Scheduler::builder(client(&server))
                .job(job)
                .job(failing)
                .build()
                .unwrap();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let running = scheduler.run_until(
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
            );
            let scripted = async {
                let admin = Scheduler::builder(client(&server)).build().unwrap();
                // Forced: the replica may not have registered its jobs yet.
                admin.force_run_now("report").await.unwrap();
                admin.force_run_now("broken").await.unwrap();
                until(&mut seen, &snapshotter, "both runs ended", |s| {
                    s.counter("dlock.scheduler.occurrences{job=report,outcome=succeeded}") == 1.0
                        && s.counter("dlock.scheduler.occurrences{job=broken,outcome=failed}")
                            == 1.0
                })
                .await;
                let _ = stop.send(());
            };
            tokio::join!(running, scripted);
        });
    });
    seen.update(&snapshotter);
    let delays = seen.histogram("dlock.scheduler.fire.delay{job=report}");
    assert_eq!(delays.len(), 1, "{delays:?}");
    assert!(delays[0] >= 0.0 && delays[0] < 10.0, "{delays:?}");
    // The run's own lock is a mutex of the lock metrics, too.
    assert!(
        seen.names()
            .iter()
            .any(|n| n.starts_with("dlock.acquire.duration{") && n.contains("kind=mutex")),
        "{:?}",
        seen.names()
    );
}

/// A client registers the label-free series and the fixed kind × outcome set at zero when it
/// is built (a scrape lists them before any traffic), and a lock without a label is counted
/// under the documented placeholder `lock="(none)"`, never an empty label.
#[test]
fn series_exist_before_traffic_and_an_unlabelled_lock_is_none() {
    let server = RedisServer::start().unwrap();
    let Recording {
        recorder,
        snapshotter,
        runtime,
    } = Recording::new();
    let mut seen = Seen::default();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let client = client(&server);
            seen.update(&snapshotter);
            let names = seen.names();
            for expected in [
                "dlock.renewals{}",
                "dlock.renewal.duration{}",
                "dlock.held{kind=mutex,lock=(none)}",
                "dlock.waiting{kind=rwlock,lock=(none)}",
                "dlock.lease.lost{kind=semaphore,lock=(none),reason=expired}",
                "dlock.lease.suspect{kind=mutex,lock=(none)}",
                "dlock.lease.recovered{kind=rwlock,lock=(none)}",
                "dlock.release.requested{kind=semaphore,lock=(none)}",
                "dlock.acquire.duration{contended=false,kind=mutex,lock=(none),outcome=acquired}",
                "dlock.acquire.duration{contended=true,kind=mutex,lock=(none),outcome=timeout}",
            ] {
                assert!(
                    names.iter().any(|n| n.as_str() == expected),
                    "{expected} not registered: {names:?}"
                );
            }
            assert_eq!(seen.gauge("dlock.held{kind=mutex,lock=(none)}"), 0.0);

            let guard = client.mutex("order:9").unwrap().acquire().await.unwrap();
            seen.update(&snapshotter);
            assert_eq!(
                seen.histogram(
                    "dlock.acquire.duration{contended=false,kind=mutex,lock=(none),outcome=acquired}"
                )
                .len(),
                1
            );
            assert_eq!(seen.gauge("dlock.held{kind=mutex,lock=(none)}"), 1.0);
            assert!(
                seen.names().iter().all(|n| !n.contains("lock=}") && !n.contains("lock=,")),
                "an empty lock label: {:?}",
                seen.names()
            );
            guard.release().await.unwrap();
        });
    });
}
