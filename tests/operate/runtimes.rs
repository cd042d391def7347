//! One client across runtimes: a client built and used in one runtime (a static or default
//! client, a runtime per `#[tokio::test]`) keeps working in the next after the first ended —
//! its first request succeeds, the watchdog keeps leases alive, wake-ups still arrive, and a
//! dropped guard is still released in the background.

use std::time::Duration;

use dlock_core::{Client, MutexOptions, ReleaseOutcome};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests, eventually};

const LEASE: Duration = Duration::from_millis(600);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

backend_tests!(
    fn a_client_keeps_working_after_the_runtime_it_was_built_in_ended(backend: Backend) {
        let first = runtime();
        let shared: Client = first.block_on(async {
            let c = backend.client();
            // Use every background part in the first runtime: a watchdog lease and a wait.
            let lock = c
                .mutex_with("rt", MutexOptions::new().ttl(LEASE).watchdog())
                .unwrap();
            let guard = lock.acquire().await.unwrap();
            let waiter = c.mutex("rt").unwrap();
            let waiting = tokio::spawn(async move { waiter.acquire().await.map(drop) });
            let con = backend.raw().await;
            eventually(Duration::from_secs(10), "waiter queued", || {
                let mut con = con.clone();
                async move {
                    let n: usize = con.llen("dlock:{rt}:queue").await.ok()?;
                    (n == 1).then_some(())
                }
            })
            .await;
            guard.release().await.unwrap();
            waiting.await.unwrap().unwrap();
            c
        });
        drop(first);

        let second = runtime();
        second.block_on(async {
            // The first request in the new runtime succeeds (no "broken pipe").
            let lock = shared
                .mutex_with("rt", MutexOptions::new().ttl(LEASE).watchdog())
                .unwrap();
            let guard = lock.try_acquire().await.unwrap().expect("free");
            // Held for three leases: the watchdog runs in this runtime.
            let lost = tokio::time::timeout(LEASE * 3, guard.lost()).await;
            assert!(lost.is_err(), "the lease was lost: {lost:?}");
            assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);

            // Wake-ups arrive in this runtime: a waiter is handed the lock long before the
            // holder's 30 s lease would have freed it (its wait ends at 20 s).
            let holder = backend
                .client()
                .mutex_with("rt-wake", MutexOptions::new().ttl(Duration::from_secs(30)))
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .expect("free");
            let waiter = shared.mutex("rt-wake").unwrap();
            let waiting =
                tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
            let mut con = backend.raw().await;
            eventually(Duration::from_secs(10), "waiter queued", || {
                let mut con = con.clone();
                async move {
                    let n: usize = con.llen("dlock:{rt-wake}:queue").await.ok()?;
                    (n == 1).then_some(())
                }
            })
            .await;
            holder.release().await.unwrap();
            let handed = waiting.await.unwrap().expect("woken by the hand-off");
            handed.release().await.unwrap();
            // And the client's own connection follows it.
            let pong: String = redis::cmd("PING")
                .query_async(&mut shared.connection())
                .await
                .unwrap();
            assert_eq!(pong, "PONG");

            // Background work runs in this runtime too: a guard dropped without `release()` is
            // released long before its 30 s lease would free it.
            let dropped = shared
                .mutex_with("rt-drop", MutexOptions::new().ttl(Duration::from_secs(30)))
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .expect("free");
            drop(dropped);
            eventually(Duration::from_secs(5), "dropped guard released", || {
                let mut con = con.clone();
                async move {
                    let held: bool = con.exists("dlock:{rt-drop}").await.ok()?;
                    (!held).then_some(())
                }
            })
            .await;
            let _: () = con.set("rt:done", 1).await.unwrap();
        });
    }
);
