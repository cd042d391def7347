//! Redis down: every call fails with a clear error within the command timeout instead of
//! hanging, waiting acquires end, and the same client works again once Redis is back.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::support::{Backend, acquired_within, backend_tests, eventually, take_and_release};

const TIMEOUT: Duration = Duration::from_millis(500);

backend_tests!(
    async fn errors_within_the_timeout_and_recovers(mut backend: Backend) {
        let c = backend
            .builder()
            .command_timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .build()
            .unwrap();
        let lock = c.mutex("down").unwrap();
        take_and_release(&lock).await;

        backend.kill("dlock:{down}");
        for _ in 0..3 {
            let started = Instant::now();
            let err = lock.try_acquire().await.unwrap_err();
            assert!(err.is_connection() || err.is_timeout(), "{err}");
            assert!(err.may_have_taken_effect());
            // Generous margin over the configured timeout: this checks "no hang", not speed.
            assert!(
                started.elapsed() < TIMEOUT * 4,
                "took {:?}",
                started.elapsed()
            );
        }
        let waiting = tokio::time::timeout(Duration::from_secs(10), lock.acquire()).await;
        assert!(
            matches!(waiting, Ok(Err(_))),
            "a waiting acquire must fail, not hang"
        );

        backend.restart("dlock:{down}");
        let guard = acquired_within(&lock, Duration::from_secs(15), "client recovers").await;
        guard.release().await.unwrap();
    }

    async fn a_waiter_stops_waiting_when_redis_dies(mut backend: Backend) {
        let holder = backend.client();
        let _held = holder
            .mutex("dies")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let waiter = backend
            .builder()
            .command_timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .build()
            .unwrap();
        let lock = waiter.mutex("dies").unwrap();
        let waiting = tokio::spawn(async move { lock.acquire().await });
        let con = backend.raw().await;
        eventually(Duration::from_secs(10), "the waiter queued", || {
            let mut con = con.clone();
            async move {
                let n: usize = con.llen("dlock:{dies}:queue").await.ok()?;
                (n == 1).then_some(())
            }
        })
        .await;
        backend.kill("dlock:{dies}");
        let result = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiter must not hang")
            .unwrap();
        let err = result.unwrap_err();
        assert!(err.is_connection() || err.is_timeout(), "{err}");
    }
);
