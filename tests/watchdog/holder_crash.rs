//! A holder process killed with SIGKILL: another process gets the lock once the lease runs out,
//! and not before.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::support::{Backend, Worker, backend_tests};

backend_tests!(
    async fn killed_holder_frees_the_lock_after_its_ttl(backend: Backend) {
        let mut holder = Worker::spawn(&[
            "hold".into(),
            backend.worker_arg(),
            "name=crash".into(),
            "ttl_ms=1500".into(),
        ]);
        let line = holder.line(Duration::from_secs(30));
        assert!(line.starts_with("acquired "), "{line}");

        let mut con = backend.raw().await;
        let before_pttl = Instant::now();
        let pttl: i64 = con.pttl("dlock:{crash}").await.unwrap();
        assert!(
            pttl > 0,
            "the holder's lock should have a lease, PTTL {pttl}"
        );
        holder.child_mut().kill();

        let lock = backend.client().mutex("crash").unwrap();
        assert!(
            lock.try_acquire().await.unwrap().is_none(),
            "the lease of a killed holder must still protect the lock"
        );
        let guard = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
        let waited = before_pttl.elapsed();
        // The lock can only be free once the PTTL seen before the kill has run out (ms rounding).
        assert!(
            waited + Duration::from_millis(2) >= Duration::from_millis(pttl.unsigned_abs()),
            "acquired after {waited:?}, before the holder's lease of {pttl} ms ran out"
        );
        let old: u64 = line["acquired ".len()..].parse().unwrap();
        assert!(guard.fencing_token().await.unwrap().get() > old);
        guard.release().await.unwrap();
    }
);
