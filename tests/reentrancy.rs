//! Task-scoped reentrancy: the same task re-enters (three deep, same lease and fence), releases
//! innermost first, and an out-of-order release is refused; another task is another owner; a
//! non-reentrant handle reports re-acquisition instead of waiting for itself.

use std::time::Duration;

use dlock_core::{ErrorKind, MutexOptions, ReleaseOutcome};

use crate::support::{client, redis};

#[tokio::test]
async fn three_deep_with_out_of_order_release_refused() {
    let server = redis();
    let c = client(&server);
    let lock = c.mutex("re").unwrap();
    let outer = lock.acquire_timeout(Duration::from_secs(1)).await.unwrap();
    let middle = lock.acquire_timeout(Duration::from_secs(1)).await.unwrap();
    let inner = lock.try_acquire().await.unwrap().expect("re-entered");
    assert_eq!((outer.depth(), middle.depth(), inner.depth()), (1, 2, 3));
    assert_eq!(outer.fencing_token(), inner.fencing_token());

    let err = outer.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Reentrancy, "{err}");
    let probe = client(&server).mutex("re").unwrap();
    assert!(
        probe.try_acquire().await.unwrap().is_none(),
        "still held by the inner guards"
    );

    assert_eq!(inner.release().await.unwrap(), ReleaseOutcome::Nested);
    assert!(probe.try_acquire().await.unwrap().is_none());
    assert_eq!(middle.release().await.unwrap(), ReleaseOutcome::Released);
    assert!(
        probe.try_acquire().await.unwrap().is_some(),
        "free after the last guard"
    );
}

#[tokio::test]
async fn a_spawned_task_is_another_owner() {
    let server = redis();
    let lock = client(&server).mutex("re-task").unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let same_lock = lock.clone();
    let spawned = tokio::spawn(async move {
        same_lock
            .acquire_timeout(Duration::from_millis(100))
            .await
            .map(|_| ())
    });
    let err = spawned.await.unwrap().unwrap_err();
    assert!(
        err.is_busy(),
        "a spawned task must wait like any other owner: {err}"
    );
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_non_reentrant_handle_reports_instead_of_deadlocking() {
    let server = redis();
    let lock = client(&server)
        .mutex_with("re-no", MutexOptions::new().reentrant(false))
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let err = tokio::time::timeout(Duration::from_secs(5), lock.acquire())
        .await
        .expect("must not wait for itself")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Reentrancy);
    assert!(err.to_string().contains("reentrant(true)"), "{err}");
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    // Released: the same task may take it again.
    assert!(lock.try_acquire().await.unwrap().is_some());
}
