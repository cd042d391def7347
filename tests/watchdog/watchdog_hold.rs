//! The watchdog keeps a lock held for as long as its holder lives — many times its lease — and
//! a holder that dies frees it within one lease.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::support::{Backend, Worker, backend_tests};

const LEASE: Duration = Duration::from_millis(600);

backend_tests!(
    async fn a_live_holder_keeps_the_lock_and_a_killed_one_frees_it_within_a_lease(
        backend: Backend,
    ) {
        let mut holder = Worker::spawn(&[
            "hold".into(),
            backend.worker_arg(),
            "name=wd".into(),
            format!("ttl_ms={}", LEASE.as_millis()),
            "watchdog=1".into(),
        ]);
        let line = holder.line(Duration::from_secs(30));
        let fence: u64 = line["acquired ".len()..].parse().unwrap();
        let held_since = Instant::now();

        let other = backend.client().mutex("wd").unwrap();
        let mut con = backend.raw().await;
        while held_since.elapsed() < LEASE * 4 {
            assert!(
                other.try_acquire().await.unwrap().is_none(),
                "another process took a lock whose holder is alive after {:?}",
                held_since.elapsed()
            );
            let pttl: i64 = con.pttl("dlock:{wd}").await.unwrap();
            assert!(
                pttl > 0 && pttl <= 600,
                "the watchdog keeps a {LEASE:?} lease: PTTL {pttl}"
            );
            tokio::time::sleep(LEASE / 6).await;
        }

        holder.child_mut().kill();
        // The key carries at most one lease when the holder dies, so it is free within one lease.
        let pttl: i64 = con.pttl("dlock:{wd}").await.unwrap();
        assert!(pttl <= 600, "PTTL {pttl} exceeds one lease");
        let guard = other
            .acquire_timeout(Duration::from_secs(10))
            .await
            .unwrap();
        assert!(guard.fencing_token().await.unwrap().get() > fence);
        guard.release().await.unwrap();
    }
);
