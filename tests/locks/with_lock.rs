//! `Mutex::with_lock` runs work under the lock; a lost lease stops it (or only signals it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dlock_core::{ErrorKind, LostReason, MutexOptions, OnLost, Wait};
use redis::AsyncCommands;

use crate::support::{Backend, Plain, backend_tests, eventually};

backend_tests!(
    async fn returns_the_output_and_releases(backend: Backend) {
        let c = backend.client();
        let lock = c.mutex_with("wl", MutexOptions::new().watchdog()).unwrap();
        let fence = lock
            .with_lock(Wait::No, |lease| async move {
                lease.fencing_token().await.unwrap()
            })
            .await
            .unwrap();
        assert!(fence.get() > 0);
        let other = backend.client().mutex("wl").unwrap();
        assert!(
            other.try_acquire().await.unwrap().is_some(),
            "released after the work"
        );
    }

    async fn a_busy_lock_is_an_error_and_the_work_never_starts(backend: Backend) {
        let _held = backend
            .client()
            .mutex("wlb")
            .unwrap()
            .try_acquire()
            .await
            .unwrap();
        let ran = AtomicBool::new(false);
        let err = backend
            .client()
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

    async fn a_lost_lease_cancels_the_work(backend: Backend) {
        let lock = backend
            .client()
            .mutex_with(
                "wlc",
                MutexOptions::new()
                    .ttl(Duration::from_millis(600))
                    .watchdog(),
            )
            .unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        let mut con = backend.raw().await;
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
        let (result, ()) =
            tokio::join!(tokio::time::timeout(Duration::from_secs(10), work), remove);
        let err = result
            .expect("cancelled well before the work's 30 s")
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
        assert!(
            !finished.load(Ordering::SeqCst),
            "the work must have been dropped"
        );
    }

    async fn signal_mode_lets_the_work_react(backend: Backend) {
        let lock = backend
            .client()
            .mutex_with(
                "wls",
                MutexOptions::new()
                    .ttl(Duration::from_millis(600))
                    .watchdog()
                    .on_lost(OnLost::Signal),
            )
            .unwrap();
        let mut con = backend.raw().await;
        let work = lock.with_lock(Wait::No, |lease| async move { lease.lost().await.reason() });
        let remove = async {
            delete_once_held(&mut con, "dlock:{wls}").await;
        };
        let (reason, ()) =
            tokio::join!(tokio::time::timeout(Duration::from_secs(10), work), remove);
        assert_eq!(reason.unwrap().unwrap(), LostReason::Removed);
    }
);

/// Deletes `key` as soon as the lock it holds is taken (behind the work's back).
async fn delete_once_held(con: &mut Plain, key: &str) {
    eventually(Duration::from_secs(10), "the lock is taken", || {
        let mut con = con.clone();
        async move { con.exists::<_, bool>(key).await.ok()?.then_some(()) }
    })
    .await;
    let deleted: usize = con.del(key).await.unwrap();
    assert_eq!(deleted, 1);
}
