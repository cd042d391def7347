//! Redis down: every call fails with a clear error within the command timeout instead of
//! hanging, waiting acquires end, and the same client works again once Redis is back.

use std::time::{Duration, Instant};

use dlock_core::Client;

use crate::support::{client, eventually, redis};

const TIMEOUT: Duration = Duration::from_millis(500);

#[tokio::test]
async fn errors_within_the_timeout_and_recovers() {
    let mut server = redis();
    let c = Client::builder(server.url().as_str())
        .command_timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .build()
        .unwrap();
    let lock = c.mutex("down").unwrap();
    lock.try_acquire()
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();

    server.kill();
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

    server.restart().unwrap();
    let guard = eventually(Duration::from_secs(15), "client recovers", || async {
        lock.try_acquire().await.ok().flatten()
    })
    .await;
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_waiter_stops_waiting_when_redis_dies() {
    let mut server = redis();
    let holder = client(&server);
    let _held = holder
        .mutex("dies")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let waiter = Client::builder(server.url().as_str())
        .command_timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .build()
        .unwrap();
    let lock = waiter.mutex("dies").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill();
    let result = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter must not hang")
        .unwrap();
    let err = result.unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
}
