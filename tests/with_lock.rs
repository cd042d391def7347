//! `Mutex::with_lock` runs work under the lock; a lost lease stops it (or only signals it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_core::{ErrorKind, LostReason, MutexOptions, OnLost, Wait};
use redis::AsyncCommands;

use crate::support::{client, raw, redis};

#[tokio::test]
async fn returns_the_output_and_releases() {
    let server = redis();
    let c = client(&server);
    let lock = c.mutex_with("wl", MutexOptions::new().watchdog()).unwrap();
    let fence = lock
        .with_lock(Wait::No, |lease| async move {
            lease.fencing_token().await.unwrap()
        })
        .await
        .unwrap();
    assert!(fence.get() > 0);
    let other = client(&server).mutex("wl").unwrap();
    assert!(
        other.try_acquire().await.unwrap().is_some(),
        "released after the work"
    );
}

#[tokio::test]
async fn a_busy_lock_is_an_error_and_the_work_never_starts() {
    let server = redis();
    let _held = client(&server)
        .mutex("wlb")
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    let ran = AtomicBool::new(false);
    let err = client(&server)
        .mutex("wlb")
        .unwrap()
        .with_lock(Wait::AtMost(Duration::from_millis(100)), |_| async {
            ran.store(true, Ordering::SeqCst);
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy);
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_lost_lease_cancels_the_work() {
    let server = redis();
    let lock = client(&server)
        .mutex_with(
            "wlc",
            MutexOptions::new()
                .ttl(Duration::from_millis(600))
                .watchdog(),
        )
        .unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    let mut con = raw(&server).await;
    let work = {
        let finished = finished.clone();
        lock.with_lock(Wait::No, move |_| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            finished.store(true, Ordering::SeqCst);
        })
    };
    let remove = async {
        delete_once_held(&mut con, "dlock:{wlc}").await;
    };
    let (result, ()) = tokio::join!(tokio::time::timeout(Duration::from_secs(10), work), remove);
    let err = result
        .expect("cancelled well before the work's 30 s")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert!(
        !finished.load(Ordering::SeqCst),
        "the work must have been dropped"
    );
}

#[tokio::test]
async fn signal_mode_lets_the_work_react() {
    let server = redis();
    let lock = client(&server)
        .mutex_with(
            "wls",
            MutexOptions::new()
                .ttl(Duration::from_millis(600))
                .watchdog()
                .on_lost(OnLost::Signal),
        )
        .unwrap();
    let mut con = raw(&server).await;
    let work = lock.with_lock(Wait::No, |lease| async move { lease.lost().await.reason() });
    let remove = async {
        delete_once_held(&mut con, "dlock:{wls}").await;
    };
    let (reason, ()) = tokio::join!(tokio::time::timeout(Duration::from_secs(10), work), remove);
    assert_eq!(reason.unwrap().unwrap(), LostReason::Removed);
}

/// Deletes `key` as soon as the lock it holds is taken (behind the work's back).
async fn delete_once_held(con: &mut redis::aio::MultiplexedConnection, key: &str) {
    crate::support::eventually(Duration::from_secs(10), "the lock is taken", || {
        let mut con = con.clone();
        async move { con.exists::<_, bool>(key).await.ok()?.then_some(()) }
    })
    .await;
    let deleted: usize = con.del(key).await.unwrap();
    assert_eq!(deleted, 1);
}
