//! `Client::shutdown`: a process that shuts its client down leaves no lock, queue entry or
//! subscription behind, and a waiter in another process gets the lock at once; afterwards the
//! client acquires nothing and live guards learn their lease is gone; guards dropped just
//! before are released before it returns.

use std::time::Duration;

use dlock_core::{ErrorKind, LostReason, MutexOptions};
use futures_util::StreamExt;
use redis::AsyncCommands;

use crate::support::sched_delay;
use crate::support::{Backend, Worker, backend_tests, eventually, field};

backend_tests!(
    async fn a_process_that_shuts_down_leaves_nothing_behind(backend: Backend) {
        // The test holds `other`, for which the worker will queue.
        let other = backend
            .client()
            .mutex("sd-other")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let mut worker = Worker::spawn(&[
            "shutdown".into(),
            backend.worker_arg(),
            "name=sd".into(),
            "other=sd-other".into(),
        ]);
        assert_eq!(worker.line(Duration::from_secs(30)), "ready");
        let mut con = backend.raw().await;
        let queued = |key: &'static str, want: usize| {
            let con = con.clone();
            async move {
                eventually(Duration::from_secs(10), key, || {
                    let mut con = con.clone();
                    async move {
                        let n: usize = con.llen(key).await.ok()?;
                        (n == want).then_some(())
                    }
                })
                .await;
            }
        };
        queued("dlock:{sd-other}:queue", 1).await;

        // A waiter in this process for the worker's lock, which the worker holds with a 30 s
        // watchdog lease: only the shutdown can free it within the 20 s this waiter waits.
        let waiter = backend.client().mutex("sd").unwrap();
        let waiting =
            tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
        queued("dlock:{sd}:queue", 1).await;

        let () = con.set("sd:go", 1).await.unwrap();
        let report = worker.line(Duration::from_secs(30));
        assert_eq!(
            (
                field(&report, "released"),
                field(&report, "dequeued"),
                field(&report, "unsubscribed"),
                field(&report, "failures")
            ),
            (1, 1, 1, 0),
            "{report}"
        );
        let handed = waiting
            .await
            .unwrap()
            .expect("the waiter got the lock at once");
        // The worker is still running and connected: what it left is only what it failed to remove.
        assert!(
            worker
                .child_mut()
                .wait_timeout(Duration::ZERO)
                .unwrap()
                .is_none(),
            "worker still alive"
        );
        let left: usize = con.llen("dlock:{sd-other}:queue").await.unwrap();
        assert_eq!(left, 0, "the worker's queue entry is gone");
        let channels = backend.wake_channels(&mut con, "dlock:*").await;
        assert!(
            channels.iter().all(|c| !c.starts_with("dlock:{sd-other}")),
            "the worker's wake subscription is gone: {channels:?}"
        );
        handed.release().await.unwrap();
        other.release().await.unwrap();
        let keys: Vec<String> = con.keys("dlock:*").await.unwrap();
        let locks: Vec<&String> = keys
            .iter()
            .filter(|k| !k.starts_with("dlock:fence:"))
            .collect();
        assert!(locks.is_empty(), "left behind: {locks:?}");
    }

    async fn guards_dropped_right_before_shutdown_are_released_before_it_returns(backend: Backend) {
        // A process that drops its guards and shuts down as it exits: the releases of the
        // dropped guards run in the background, and the runtime (dropped right after the
        // shutdown, as at process exit) would cancel them. A current-thread runtime runs
        // nothing in the background until the shutdown yields, so none of them happens unless
        // the shutdown waits for them.
        let names: Vec<String> = (0..20).map(|i| format!("sd-drop-{i}")).collect();
        let client = backend.client();
        let held = names.clone();
        let report = tokio::task::spawn_blocking(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let report = runtime.block_on(async {
                let options = MutexOptions::new().ttl(Duration::from_secs(30));
                let mut guards = Vec::new();
                for name in &held {
                    let lock = client.mutex_with(name, options.clone()).unwrap();
                    guards.push(lock.try_acquire().await.unwrap().expect("free"));
                }
                drop(guards);
                client.shutdown(Duration::from_secs(5)).await
            });
            drop(runtime);
            report
        })
        .await
        .unwrap();
        assert!(report.is_complete(), "{report}");
        assert_eq!(report.background, names.len(), "{report}");
        let mut con = backend.raw().await;
        for name in &names {
            let left: bool = con.exists(format!("dlock:{{{name}}}")).await.unwrap();
            assert!(!left, "`{name}` still locked after the shutdown: {report}");
        }
    }

    async fn a_shutdown_with_redis_down_reports_what_it_left_by_its_deadline(mut backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new().ttl(Duration::from_secs(30)).watchdog();
        let guard = c
            .mutex_with("sd-down", options)
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        backend.kill("dlock:{sd-down}");
        let deadline = Duration::from_millis(500);
        let started = std::time::Instant::now();
        let report = c.shutdown(deadline).await;
        let took = started.elapsed();
        assert!(!report.is_complete(), "{report}");
        assert_eq!(report.released, 0, "{report}");
        let names: Vec<&str> = report.failures.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["sd-down"], "{report}");
        assert!(
            report.to_string().contains("`sd-down` not cleaned up"),
            "the report names what it left: {report}"
        );
        // Bounded by the deadline, not by the 2 s command timeout of the client.
        sched_delay::assert_on_time(took < Duration::from_millis(1_500), || {
            format!("took {took:?}: {report}")
        })
        .await;
        // The guard learns its lease ended with the shutdown, whatever the server did.
        assert_eq!(guard.lost().await.reason(), LostReason::Shutdown);
    }

    async fn a_shut_down_client_acquires_nothing_and_its_guards_learn_it(backend: Backend) {
        let c = backend.client();
        let lock = c
            .mutex_with(
                "sd-in",
                MutexOptions::new().ttl(Duration::from_secs(30)).watchdog(),
            )
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let report = c.shutdown(Duration::from_secs(5)).await;
        assert!(report.is_complete(), "{report}");
        assert_eq!(report.released, 1);
        let lost = tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("the guard learns its lease ended");
        assert_eq!(lost.reason(), LostReason::Shutdown);
        assert!(!guard.lease().is_held());
        let err = lock.try_acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Shutdown, "{err}");
        let err = c.mutex("another").unwrap().acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Shutdown, "{err}");
        // Another client finds the lock free at once.
        assert!(
            backend
                .client()
                .mutex("sd-in")
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_some()
        );
        drop(guard);
        // Shutting down again has nothing left to do.
        let again = c.shutdown(Duration::from_secs(1)).await;
        assert_eq!(
            (again.released, again.dequeued, again.failures.len()),
            (0, 0, 0)
        );
    }

    /// Many held locks and a short command timeout: the releases go a few hundred at a time,
    /// so none waits behind the others past the timeout (all at once, half of 100,000 timed
    /// out at the default 2 s; issue 29, W6). Here: 20,000 locks, 250 ms (all at once, every one
    /// timed out).
    async fn a_shutdown_with_many_held_locks_releases_every_one(backend: Backend) {
        const LOCKS: usize = 20_000;
        let c = backend
            .builder()
            .command_timeout(Duration::from_millis(250))
            .build()
            .unwrap();
        let names: Vec<String> = (0..LOCKS).map(|i| format!("sd-many:{i}")).collect();
        let guards: Vec<_> = futures_util::stream::iter(&names)
            .map(|name| {
                let lock = c.mutex(name).unwrap();
                async move { lock.try_acquire().await.unwrap().expect("free") }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        assert_eq!(guards.len(), LOCKS);
        let report = c.shutdown(Duration::from_secs(60)).await;
        assert!(
            report.is_complete(),
            "{} of {LOCKS} failed, the first: {:?}",
            report.failures.len(),
            report.failures.first()
        );
        assert_eq!(report.released, LOCKS);
        let mut con = backend.raw().await;
        let left: Vec<String> = con.keys("dlock:{sd-many:*").await.unwrap();
        assert!(left.is_empty(), "{} lock keys left", left.len());
    }
);
