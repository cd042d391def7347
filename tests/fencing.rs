//! Fencing tokens strictly increase per lock name: across acquire/release cycles, expiries,
//! clients, and a Redis restart that lost every key.

use std::time::Duration;

use dlock_core::{FencingToken, MutexOptions};

use crate::support::{client, redis};

#[tokio::test]
async fn tokens_increase_across_release_expiry_and_clients() {
    let server = redis();
    let (a, b) = (client(&server), client(&server));
    let short = || MutexOptions::new().ttl(Duration::from_millis(20));
    let mut seen: Vec<FencingToken> = Vec::new();
    for round in 0..10 {
        let lock = if round % 2 == 0 { &a } else { &b }
            .mutex("fenced")
            .unwrap();
        let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
        seen.push(guard.fencing_token());
        guard.release().await.unwrap();
    }
    for _ in 0..3 {
        // Let the lease run out instead of releasing.
        let lock = a.mutex_with("fenced", short()).unwrap();
        let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
        seen.push(guard.fencing_token());
        std::mem::forget(guard);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

#[tokio::test]
async fn tokens_keep_increasing_after_a_restart_that_lost_the_counter() {
    let mut server = redis();
    let lock = client(&server).mutex("restart").unwrap();
    let before = lock.try_acquire().await.unwrap().expect("free lock");
    let old = before.fencing_token();
    before.release().await.unwrap();

    server.restart().expect("restart");
    let fresh = client(&server).mutex("restart").unwrap();
    let after =
        crate::support::eventually(Duration::from_secs(10), "acquire after restart", || async {
            fresh.try_acquire().await.ok().flatten()
        })
        .await;
    assert!(
        after.fencing_token() > old,
        "a counter reset must not issue a smaller token ({} after {})",
        after.fencing_token(),
        old
    );
}
