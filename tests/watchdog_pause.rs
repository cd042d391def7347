//! A holder paused (SIGSTOP) past its lease: another process takes the lock; once resumed, the
//! paused holder learns it lost the lease before its next write, and its fencing token is
//! smaller than the new holder's, so a fenced store would reject it anyway.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{Worker, client, raw, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_finds_its_lease_lost_before_writing_again() {
    let server = redis();
    let paused = Worker::spawn(&[
        "write".into(),
        format!("url={}", server.url()),
        "name=pause".into(),
        "ttl_ms=500".into(),
    ]);
    let line = paused.line(Duration::from_secs(30));
    let old_fence: u64 = line["acquired ".len()..].parse().unwrap();
    let mut con = raw(&server).await;
    // Let it write a few times, then freeze it for several leases.
    tokio::time::sleep(Duration::from_millis(200)).await;
    paused.child.stop().unwrap();

    let lock = client(&server).mutex("pause").unwrap();
    let guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    let new_fence = guard.fencing_token().get();
    assert!(
        new_fence > old_fence,
        "{new_fence} must exceed the paused holder's {old_fence}"
    );
    let () = con.set("pause:store", new_fence).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    paused.child.cont().unwrap();
    let verdict = paused.line(Duration::from_secs(10));
    assert!(
        verdict.starts_with("lost "),
        "the paused holder wrote on: {verdict}"
    );
    let stored: u64 = con.get("pause:store").await.unwrap();
    assert_eq!(stored, new_fence, "no stale write reached the store");
    assert!(guard.release().await.unwrap().was_held());
}
