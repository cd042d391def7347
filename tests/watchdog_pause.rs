//! A holder paused (SIGSTOP) past its lease: another process takes the lock; once resumed, the
//! paused holder learns it lost the lease before its next write. The store it writes to is not
//! fenced, so only the holder's own check keeps a stale write out.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{Backend, Worker, backend_tests, eventually};

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
        eventually(Duration::from_secs(10), "the holder writes", || {
            let mut con = con.clone();
            async move {
                let n: usize = con.llen("pause:writes").await.ok()?;
                (n > 0).then_some(())
            }
        })
        .await;
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
