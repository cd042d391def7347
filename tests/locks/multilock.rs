//! The multi-lock: several names taken as one guard, all or none, in one canonical order so
//! that two multi-locks over the same names in opposite orders never deadlock (within a process
//! and across processes), lost when any member is lost, and nothing left held after a failure.
//! On a cluster the names below live in different slots (and nodes).

use std::time::Duration;

use dlock_core::{ErrorKind, LostReason, MutexOptions};

use crate::support::{Backend, Worker, backend_tests, field};

/// Whether `name`'s mutex is free now (taken and given back by a fresh client).
async fn is_free(backend: &Backend, name: &str) -> bool {
    let probe = backend.client().mutex(name).unwrap();
    match probe.try_acquire().await.unwrap() {
        Some(guard) => {
            guard.release().await.unwrap();
            true
        }
        None => false,
    }
}

backend_tests!(
    /// Every member held by the guard, each with its own increasing fence; duplicates taken
    /// once; the names in one order whatever order they were given in.
    async fn a_multi_lock_holds_every_member(backend: Backend) {
        let client = backend.client();
        let a = client.multi_lock(["ml:b", "ml:a", "ml:c", "ml:a"]).unwrap();
        let b = client.multi_lock(["ml:c", "ml:b", "ml:a"]).unwrap();
        let order: Vec<&str> = a.names().collect();
        assert_eq!(order.len(), 3, "duplicates are taken once: {order:?}");
        assert_eq!(order, b.names().collect::<Vec<_>>(), "one canonical order");
        let guard = a.try_acquire().await.unwrap().expect("free");
        for name in ["ml:a", "ml:b", "ml:c"] {
            assert!(!is_free(&backend, name).await, "{name} is held");
        }
        assert!(b.try_acquire().await.unwrap().is_none());
        let fences = guard.fencing_tokens().await.unwrap();
        assert_eq!(fences.len(), 3);
        assert!(guard.remaining() > Duration::ZERO);
        assert!(guard.release().await.unwrap().was_held());
        for name in ["ml:a", "ml:b", "ml:c"] {
            assert!(is_free(&backend, name).await, "{name} is given back");
        }
        assert_eq!(
            client.multi_lock(Vec::<&str>::new()).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }

    /// One member held elsewhere: the multi-lock gets nothing (try) or gives back what it had
    /// taken when its wait ends (timeout); the other members are free afterwards.
    async fn all_or_none(backend: Backend) {
        let names = ["mln:1", "mln:2", "mln:3", "mln:4"];
        let blocker = backend.client();
        // Hold a member in the middle of the canonical order.
        let multi = backend.client().multi_lock(names).unwrap();
        let middle = multi.names().nth(2).unwrap().to_owned();
        let held = blocker
            .mutex(&middle)
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        assert!(multi.try_acquire().await.unwrap().is_none());
        let e = multi
            .acquire_timeout(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(e.to_string().contains(&middle), "{e}");
        for name in names.iter().filter(|n| **n != middle) {
            assert!(is_free(&backend, name).await, "{name} was given back");
        }
        held.release().await.unwrap();
        multi
            .try_acquire()
            .await
            .unwrap()
            .expect("free now")
            .release()
            .await
            .unwrap();
    }

    /// Two tasks per name order take overlapping sets given in opposite orders, 30 rounds
    /// each, every acquire bounded: none times out (a deadlock would make them wait for each
    /// other until the bound).
    async fn opposite_orders_never_deadlock(backend: Backend) {
        let sets = [["dl:x", "dl:y", "dl:z"], ["dl:z", "dl:y", "dl:x"]];
        let mut tasks = Vec::new();
        for set in sets {
            for _ in 0..2 {
                let multi = backend.client().multi_lock(set).unwrap();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..30 {
                        let guard = multi
                            .acquire_timeout(Duration::from_secs(20))
                            .await
                            .unwrap();
                        tokio::task::yield_now().await;
                        guard.release().await.unwrap();
                    }
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
    }

    /// A member removed under the guard (an operator's force-unlock) makes the guard lost,
    /// found by the watchdog's renewal.
    async fn lost_when_any_member_is_lost(backend: Backend) {
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(600))
            .watchdog();
        let client = backend.client();
        let multi = client.multi_lock_with(["mll:1", "mll:2"], options).unwrap();
        let guard = multi.acquire().await.unwrap();
        let token = guard.cancellation_token();
        assert!(backend.client().force_unlock("mll:2").await.unwrap());
        let lost = tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .expect("the loss is reported within a few renewals");
        assert_eq!(lost.reason(), LostReason::Removed);
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the token is cancelled");
        assert!(!guard.release().await.unwrap().was_held());
    }

    /// Two processes of two tasks each take overlapping name sets in opposite orders: no
    /// acquire times out and no holder ever sees another inside.
    async fn opposite_orders_across_processes(backend: Backend) {
        let spawn = |names: &str| {
            Worker::spawn(&[
                "multi".to_owned(),
                backend.worker_arg(),
                format!("names={names}"),
                "rounds=40".to_owned(),
            ])
        };
        let one = spawn("mp:a,mp:b,mp:c");
        let two = spawn("mp:c,mp:b,mp:a");
        for worker in [one, two] {
            let line = worker.line(Duration::from_secs(120));
            assert_eq!(field(&line, "timeouts"), 0, "{line}");
            assert_eq!(field(&line, "overlaps"), 0, "{line}");
            assert_eq!(field(&line, "rounds"), 80, "{line}");
        }
    }
);
