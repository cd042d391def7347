//! A holder paused (SIGSTOP) past its lease: another process takes the lock; once resumed, the
//! paused holder learns it lost the lease before its next write. The store it writes to is not
//! fenced, so only the holder's own check keeps a stale write out. A lease that runs out because
//! its process did not run (stopped, or its runtime blocked) is reported as `Paused`, not as
//! Redis being unreachable.

use std::time::Duration;

use dlock_core::{LostReason, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, Worker, backend_tests, has_written};

backend_tests!(
    async fn a_paused_holder_finds_its_lease_lost_before_writing_again(backend: Backend) {
        let paused = Worker::spawn(&[
            "write".into(),
            backend.worker_arg(),
            "name=pause".into(),
            "ttl_ms=500".into(),
            // Writes a second apart: stopped right after one, it is asleep, not between its lease
            // check and its write (a pause there is the documented limit no check can close).
            "period_ms=1000".into(),
        ]);
        let line = paused.line(Duration::from_secs(30));
        let old_fence: u64 = line["acquired ".len()..].parse().unwrap();
        let mut con = backend.raw().await;
        // It writes while it holds the lock; freeze it right after its first write.
        has_written(&con, "pause:writes").await;
        paused.child().stop().unwrap();

        let lock = backend.client().mutex("pause").unwrap();
        let guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
        let new_fence = guard.fencing_token().await.unwrap().get();
        assert!(new_fence > old_fence);
        // From here on, a write by the paused holder would overlap the new holder.
        let _: u64 = con.rpush("pause:writes", "taken").await.unwrap();

        paused.child().cont().unwrap();
        let verdict = paused.line(Duration::from_secs(10));
        assert!(
            verdict.starts_with("lost "),
            "the paused holder wrote on: {verdict}"
        );
        let writes: Vec<String> = con.lrange("pause:writes", 0, -1).await.unwrap();
        let taken = writes.iter().position(|w| w == "taken").unwrap();
        assert!(
            writes[taken + 1..].is_empty(),
            "the paused holder wrote after the lock was taken: {writes:?}"
        );
        assert!(guard.release().await.unwrap().was_held());
    }
);

backend_tests!(
    /// Stopped (SIGSTOP) right after it acquired, before its watchdog's first renewal was due,
    /// until its lease ran out and another process took the lock: resumed, the holder reports
    /// the loss as a pause (Redis answered everything it was sent).
    async fn a_stopped_holder_reports_a_pause(backend: Backend) {
        let paused = Worker::spawn(&[
            "write".into(),
            backend.worker_arg(),
            "name=stopped".into(),
            // Renewed every second; it writes 500 ms after it acquired, and is stopped right
            // after that write (asleep until the next, no request in flight), long before the
            // first renewal.
            "ttl_ms=3000".into(),
            "period_ms=500".into(),
        ]);
        let line = paused.line(Duration::from_secs(30));
        assert!(line.starts_with("acquired "), "{line}");
        let con = backend.raw().await;
        has_written(&con, "stopped:writes").await;
        paused.child().stop().unwrap();

        let lock = backend.client().mutex("stopped").unwrap();
        let guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
        paused.child().cont().unwrap();
        let verdict = paused.line(Duration::from_secs(10));
        assert_eq!(verdict, "lost Paused");
        assert!(guard.release().await.unwrap().was_held());
    }

    /// The same in one process: the runtime's only thread blocked (a blocking call in async
    /// code) past the lease, so the watchdog could not renew it.
    #[flavor = "current_thread"]
    async fn a_lease_lost_to_a_blocked_runtime_is_a_pause(backend: Backend) {
        let client = backend.client();
        let lock = client
            .mutex_with(
                "starved",
                MutexOptions::new()
                    .ttl(Duration::from_millis(900))
                    .watchdog(),
            )
            .unwrap();
        let guard = lock.acquire().await.unwrap();
        // Blocks the runtime (deliberately): no timer, no renewal runs until it returns.
        std::thread::sleep(Duration::from_millis(1500));
        let lost = guard.lost().await;
        assert_eq!(lost.reason(), LostReason::Paused, "{lost}");
        // Redis was fine all along: the lock ran out there and is free.
        let other = backend.client().mutex("starved").unwrap();
        assert!(other.try_acquire().await.unwrap().is_some());
    }
);
