//! A waiter's re-ask after its fallback timer does not scan the queue (acquire.lua and
//! shared_acquire.lua mode "again", issue #29): with 10,000 waiters each scan cost ~100 µs of
//! Redis time, and a holder that dies makes every waiter re-ask within the same few milliseconds. And the one case the
//! scan was there for — an entry that left the queue without its waiter hearing of it — is
//! still covered: a waiter whose queue someone deleted rejoins it at that same re-ask.

use std::time::{Duration, Instant};

use dlock_core::MutexOptions;
use redis::AsyncCommands;
use tokio::task::JoinHandle;

use crate::support::{Backend, Worker, backend_tests, eventually};

const WAITERS: usize = 20;
const QUEUE: &str = "dlock:{reask}:queue";

/// Waits until the list at `queue` holds `n` entries, failing the test after `limit`.
async fn queue_reaches(backend: &Backend, queue: &str, n: usize, limit: Duration, what: &str) {
    let con = backend.raw().await;
    eventually(limit, what, || {
        let mut con = con.clone();
        async move {
            let len: usize = con.llen(queue).await.ok()?;
            (len == n).then_some(())
        }
    })
    .await;
}

/// Once the [`WAITERS`] `tasks` are queued at `queue`, SIGKILLs `holder` (whose lease is not
/// renewed) and waits for every task to take its turn; returns the `LPOS` calls the servers ran
/// meanwhile (the re-asks when every fallback timer fires at the end of the holder's lease).
async fn scans_after_the_holder_dies(
    backend: &Backend,
    mut holder: Worker,
    queue: &str,
    tasks: Vec<JoinHandle<dlock_core::Result<()>>>,
) -> u64 {
    let limit = Duration::from_secs(10);
    queue_reaches(backend, queue, WAITERS, limit, "every waiter queued").await;
    // Each waiter's first attempt queued it; from here on, the re-asks after the holder's
    // lease ran out must not scan.
    let before = backend.calls("lpos").await;
    holder.child_mut().kill();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    backend.calls("lpos").await - before
}

backend_tests!(
    /// Issue #44: a waiting acquire's first attempt ("join") queues its new entry without a
    /// scan, for a mutex and a semaphore alike: 20 waiters of each queue behind a holder and no
    /// `LPOS` runs. (A mutex's join scanned the last 128 entries, and a semaphore's first
    /// attempt the whole queue, which made filling it quadratic.)
    async fn waiters_join_the_queue_without_scanning(backend: Backend) {
        let holders = backend.client();
        let held = holders.mutex("join-scan").unwrap().acquire().await.unwrap();
        let permit = holders
            .semaphore("join-scan", 1)
            .unwrap()
            .acquire(1)
            .await
            .unwrap();
        let before = backend.calls("lpos").await;
        let waiters = backend.client();
        let lock = waiters.mutex("join-scan").unwrap();
        let sem = waiters.semaphore("join-scan", 1).unwrap();
        let mut tasks: Vec<JoinHandle<dlock_core::Result<()>>> = Vec::new();
        for _ in 0..WAITERS {
            let lock = lock.clone();
            tasks.push(tokio::spawn(async move {
                let guard = lock.acquire_timeout(Duration::from_secs(30)).await?;
                guard.release().await.map(|_| ())
            }));
            let sem = sem.clone();
            tasks.push(tokio::spawn(async move {
                let permit = sem.acquire_timeout(1, Duration::from_secs(30)).await?;
                permit.release().await.map(|_| ())
            }));
        }
        let limit = Duration::from_secs(10);
        queue_reaches(
            &backend,
            "dlock:{join-scan}:queue",
            WAITERS,
            limit,
            "mutex waiters queued",
        )
        .await;
        let queue = "dlock:{join-scan}:sem:queue";
        queue_reaches(&backend, queue, WAITERS, limit, "semaphore requests queued").await;
        let scans = backend.calls("lpos").await - before;
        held.release().await.unwrap();
        permit.release().await.unwrap();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(
            scans, 0,
            "{scans} queue scans (LPOS) by {WAITERS} mutex waiters and {WAITERS} semaphore \
             requests joining their queues"
        );
    }

    /// 20 waiters queue behind a holder, which dies (its lease of 1.5 s is not renewed): the
    /// re-asks when every waiter's fallback timer fires as that lease runs out run no `LPOS`
    /// ("again"; the old "wait" ran one scan per re-ask).
    async fn waiters_reask_without_scanning_when_the_holder_dies(backend: Backend) {
        let holder = Worker::spawn(&[
            "hold".into(),
            backend.worker_arg(),
            "name=reask".into(),
            "ttl_ms=1500".into(),
        ]);
        assert!(
            holder
                .line(Duration::from_secs(30))
                .starts_with("acquired ")
        );
        let client = backend.client();
        let lock = client.mutex("reask").unwrap();
        let tasks: Vec<_> = (0..WAITERS)
            .map(|_| {
                let lock = lock.clone();
                tokio::spawn(async move {
                    let guard = lock.acquire_timeout(Duration::from_secs(30)).await?;
                    guard.release().await.map(|_| ())
                })
            })
            .collect();
        let scans = scans_after_the_holder_dies(&backend, holder, QUEUE, tasks).await;
        assert_eq!(
            scans, 0,
            "{scans} queue scans (LPOS) by {WAITERS} waiters re-asking after their holder died"
        );
        let mut con = backend.raw().await;
        let left: usize = con.llen(QUEUE).await.unwrap();
        assert_eq!(
            left, 0,
            "the queue is empty after every waiter took its turn"
        );
    }

    /// The same for a semaphore's waiters (shared_acquire.lua): its one permit's holder dies
    /// with 20 requests queued.
    async fn semaphore_waiters_reask_without_scanning_when_the_holder_dies(backend: Backend) {
        let holder = Worker::spawn(&[
            "shared".into(),
            backend.worker_arg(),
            "name=reask-sem".into(),
            "kind=sem".into(),
            "take=1".into(),
            "ttl_ms=1500".into(),
        ]);
        assert!(
            holder
                .line(Duration::from_secs(30))
                .starts_with("acquired ")
        );
        let client = backend.client();
        let sem = client.semaphore("reask-sem", 1).unwrap();
        let tasks: Vec<_> = (0..WAITERS)
            .map(|_| {
                let sem = sem.clone();
                tokio::spawn(async move {
                    let permit = sem.acquire_timeout(1, Duration::from_secs(30)).await?;
                    permit.release().await.map(|_| ())
                })
            })
            .collect();
        let queue = "dlock:{reask-sem}:sem:queue";
        let scans = scans_after_the_holder_dies(&backend, holder, queue, tasks).await;
        assert_eq!(
            scans, 0,
            "{scans} queue scans (LPOS) by {WAITERS} requests re-asking after the holder died"
        );
    }

    /// Someone deletes the queue under a waiter: its next re-ask ("again", no scan) finds the
    /// queue empty and rejoins it, so the holder's release hands the lock straight to it. (A
    /// re-ask that trusted its entry blindly would rejoin only one fallback nap later.)
    async fn a_waiter_rejoins_a_queue_deleted_under_it_at_its_next_reask(backend: Backend) {
        let holders = backend.client();
        // Renewed every second: the waiter's naps (the holder's remaining lease) stay 2–3 s.
        let options = MutexOptions::new().ttl(Duration::from_secs(3)).watchdog();
        let held = holders
            .mutex_with("reask", options)
            .unwrap()
            .acquire()
            .await
            .unwrap();
        let waiters = backend.client();
        let lock = waiters.mutex("reask").unwrap();
        let waiter = tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(30)).await?;
            let at = Instant::now();
            guard.release().await.map(|_| at)
        });
        queue_reaches(
            &backend,
            QUEUE,
            1,
            Duration::from_secs(10),
            "the waiter queued",
        )
        .await;
        let mut con = backend.raw().await;
        let nap: i64 = con.pttl("dlock:{reask}").await.unwrap();
        let deleted = Instant::now();
        let _: () = con.del(QUEUE).await.unwrap();
        // The waiter's first re-ask comes after `nap`; the holder's lease is renewed meanwhile,
        // so a second one would come at least 2 s later.
        let nap = Duration::from_millis(u64::try_from(nap).unwrap());
        let limit = nap + Duration::from_millis(1_500);
        let what = format!("the waiter rejoined its queue at its re-ask due after {nap:?}");
        queue_reaches(
            &backend,
            QUEUE,
            1,
            limit.saturating_sub(deleted.elapsed()),
            &what,
        )
        .await;
        let released = Instant::now();
        held.release().await.unwrap();
        let acquired = waiter.await.unwrap().unwrap();
        assert!(
            acquired.duration_since(released) < Duration::from_secs(1),
            "the release handed the lock over at once, not after a fallback nap ({:?})",
            acquired.duration_since(released)
        );
    }
);
