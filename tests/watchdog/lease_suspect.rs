//! Suspect before lost: a watchdog lease whose renewal goes unacknowledged for one renewal
//! interval, while it still stands, reports `Suspect`; an acknowledged renewal makes it `Held`
//! again; a lease that runs out meanwhile is `Lost`, after `Suspect`, never before. A healthy
//! run never reports a suspicion.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use dlock_core::{Lease, LeaseState, LostReason, MutexOptions};
use tokio::task::JoinHandle;

use crate::support::{Backend, LogCapture, backend_tests, client, eventually, redis};

/// Records every state a lease's watch receiver sees, in order, until the lease ends.
fn record_states(lease: &Lease) -> (Arc<StdMutex<Vec<LeaseState>>>, JoinHandle<()>) {
    let seen = Arc::new(StdMutex::new(Vec::new()));
    let mut states = lease.states();
    let log = seen.clone();
    let task = tokio::spawn(async move {
        while states.changed().await.is_ok() {
            let state = *states.borrow_and_update();
            log.lock().unwrap().push(state);
            if !state.is_held() {
                return;
            }
        }
    });
    (seen, task)
}

backend_tests!(
    /// Redis (the lock's node) frozen until the lease is suspect, then thawed, well within the
    /// lease: suspect, then held again; the lock was never lost. The client's requests time
    /// out after 200 ms, so the renewal fails and is retried meanwhile: suspicion counts from
    /// the first unacknowledged send, not from the latest retry. On a current-thread runtime,
    /// so that the log capture sees the watchdog's lines.
    #[flavor = "current_thread"]
    async fn a_short_redis_pause_makes_the_lease_suspect_then_held_again(backend: Backend) {
        let logs = LogCapture::start();
        let c = backend
            .builder()
            .command_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        // Renewed every second: suspect at most 2 s after the last acknowledged renewal (one
        // interval to the next send, one unacknowledged), safe for ~3 s.
        let options = MutexOptions::new().ttl(Duration::from_secs(3)).watchdog();
        let guard = c
            .mutex_with("suspect:short", options)
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let lease = guard.lease();
        assert_eq!(lease.state(), LeaseState::Held);
        let (seen, recorder) = record_states(&lease);

        let server = backend.server_of("dlock:{suspect:short}");
        server.pause().unwrap();
        let paused_at = Instant::now();
        let state = tokio::time::timeout(Duration::from_secs(3), lease.suspect())
            .await
            .expect("suspect within two renewal intervals of the pause");
        let suspect_after = paused_at.elapsed();
        server.resume().unwrap();
        assert_eq!(state, LeaseState::Suspect);
        assert!(
            Instant::now() < lease.safe_until(),
            "suspect after {suspect_after:?}, but no time left to act on it"
        );

        eventually(Duration::from_secs(5), "the lease held again", || async {
            (lease.state() == LeaseState::Held).then_some(())
        })
        .await;
        assert_eq!(
            *seen.lock().unwrap(),
            [LeaseState::Suspect, LeaseState::Held],
            "suspect, then recovered"
        );
        assert_eq!(
            logs.matching("lease suspect").len(),
            1,
            "one line per suspicion"
        );
        logs.wait_for("lease no longer suspect", Duration::from_secs(1))
            .await;
        assert!(guard.release().await.unwrap().was_held(), "never lost");
        recorder.await.unwrap();
        assert_eq!(
            seen.lock().unwrap().last(),
            Some(&LeaseState::Lost(LostReason::Released))
        );
    }

    /// Redis frozen for longer than the lease, with a command timeout longer still (the renewal
    /// round is awaited the whole time): suspect one interval after the renewal was sent, then
    /// lost — in that order — and lost at its safe-until, while the renewal is still awaited.
    async fn a_pause_longer_than_the_lease_gives_suspect_then_lost(backend: Backend) {
        let c = backend
            .builder()
            .command_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(1_500))
            .watchdog();
        let guard = c
            .mutex_with("suspect:long", options)
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let lease = guard.lease();
        let token = guard.cancellation_token();
        let (seen, recorder) = record_states(&lease);

        let server = backend.server_of("dlock:{suspect:long}");
        server.pause().unwrap();
        let lost = tokio::time::timeout(Duration::from_secs(5), token.cancelled()).await;
        let lost_at = Instant::now();
        server.resume().unwrap();
        lost.expect("the token is cancelled while Redis is still frozen");
        assert!(
            lost_at < lease.safe_until() + Duration::from_millis(500),
            "declared lost {:?} after its safe-until",
            lost_at - lease.safe_until()
        );
        recorder.await.unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            [
                LeaseState::Suspect,
                LeaseState::Lost(LostReason::Unreachable)
            ]
        );
        assert_eq!(
            lease.suspect().await,
            lease.state(),
            "resolves at once once lost"
        );
    }
);

/// A minute of healthy renewals (a 3 s lease renewed every second, 20 leases): no lease is ever
/// suspect, and nothing says so.
#[tokio::test(flavor = "current_thread")]
async fn a_healthy_minute_of_renewals_is_never_suspect() {
    let server = redis();
    let logs = LogCapture::start();
    let c = client(&server);
    let options = MutexOptions::new().ttl(Duration::from_secs(3)).watchdog();
    let mut guards = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..20 {
        let guard = c
            .mutex_with(&format!("healthy:{i}"), options.clone())
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        receivers.push(guard.lease().states());
        guards.push(guard);
    }
    let lease = guards[0].lease();
    let first = lease.suspect();
    tokio::pin!(first);
    let end = tokio::time::sleep(Duration::from_secs(60));
    tokio::pin!(end);
    tokio::select! {
        state = &mut first => panic!("a healthy lease became {state}"),
        () = &mut end => {}
    }
    for (i, rx) in receivers.iter().enumerate() {
        assert!(
            !rx.has_changed().unwrap(),
            "lease {i} changed state: {}",
            *rx.borrow()
        );
    }
    assert!(
        logs.matching("suspect").is_empty(),
        "{:?}",
        logs.matching("suspect")
    );
    for guard in guards {
        assert!(guard.release().await.unwrap().was_held());
    }
}

/// A scheduled run whose handler ends while its lease is suspect (Redis frozen under it) is
/// recorded so: `RunRecord::finished_while_suspect`, shown by `dlock runs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_while_its_lease_is_suspect_is_recorded_so() {
    use dlock_scheduler::{Job, JobContext, RunOutcome, Scheduler};
    use std::sync::atomic::{AtomicBool, Ordering};

    let server = Arc::new(redis());
    let (ended_tx, mut ended_rx) = tokio::sync::mpsc::unbounded_channel::<LeaseState>();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let first = Arc::new(AtomicBool::new(true));
    let job = Job::new(
        "suspect-run",
        "* * * * * *",
        "UTC",
        move |ctx: JobContext| {
            let (ended, started, first) = (ended_tx.clone(), started_tx.clone(), first.clone());
            async move {
                if first.swap(false, Ordering::SeqCst) {
                    let _ = started.send(());
                    // Ends as soon as the lease is in danger.
                    let _ = ended.send(ctx.suspect().await);
                }
                Ok::<(), String>(())
            }
        },
    )
    .unwrap()
    .lease(Duration::from_secs(3));
    let scheduler = Scheduler::builder(client(&server))
        .job(job)
        .build()
        .unwrap();
    let observer = scheduler.clone();
    let freezer = server.clone();
    let recorded = async move {
        tokio::time::timeout(Duration::from_secs(20), started_rx.recv())
            .await
            .expect("the first run starts")
            .unwrap();
        freezer.pause().unwrap();
        let state = tokio::time::timeout(Duration::from_secs(5), ended_rx.recv())
            .await
            .expect("the handler sees the lease suspect");
        // The record of the run's end waits for Redis; thaw it.
        freezer.resume().unwrap();
        assert_eq!(state, Some(LeaseState::Suspect));
        let record = eventually(
            Duration::from_secs(10),
            "the run's end recorded",
            || async {
                observer
                    .history("suspect-run")
                    .await
                    .ok()?
                    .into_iter()
                    .find(|r| r.outcome == RunOutcome::Succeeded && r.finished_while_suspect)
            },
        )
        .await;
        assert!(record.fencing_token.is_some(), "{record:?}");
    };
    scheduler.run_until(recorded, Duration::from_secs(5)).await;
    let others = scheduler.history("suspect-run").await.unwrap();
    assert_eq!(
        others.iter().filter(|r| r.finished_while_suspect).count(),
        1,
        "only the run that ended while suspect: {others:?}"
    );
}
