//! Reentrancy is for nested calls only. Code running inside the body that holds a lock
//! (`with_lock`, `#[distributed_lock]`) re-enters it; concurrent futures of one task (`join!`,
//! `join_all`, `select!`, `FuturesUnordered`), a guard moved to a spawned task and a second plain `acquire()` are other holders
//! and wait; concurrent nested acquisitions inside one body take turns; nesting deeper than 64
//! fails at once; a self-wait is reported, not silent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{Client, ErrorKind, MutexOptions, ReleaseOutcome, Wait, distributed_lock};
use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;

use crate::support::{Backend, LogCapture, backend_tests, eventually};

/// Counts the bodies inside a critical section at once, and the most there ever were.
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
    entered: AtomicUsize,
}

impl Inside {
    /// Enters for `work`, then leaves.
    async fn visit(&self, work: Duration) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.entered.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(work).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }

    /// Returns once a body is inside (for 50 ms: `withdraw`), so that what follows starts
    /// while it is.
    async fn occupied(&self) {
        eventually(Duration::from_secs(10), "a body inside", || async {
            (self.now.load(Ordering::SeqCst) > 0).then_some(())
        })
        .await;
    }
}

#[distributed_lock(key = "acct:{id}", client = client, wait = "5s")]
async fn withdraw(client: &Client, id: u64, inside: &Inside) -> Result<(), dlock_core::Error> {
    inside.visit(Duration::from_millis(50)).await;
    Ok(())
}

backend_tests!(
    async fn joined_calls_in_one_task_take_turns(backend: Backend) {
        let c = backend.client();
        let inside = Inside::default();
        let (a, b) = tokio::join!(withdraw(&c, 7, &inside), async {
            inside.occupied().await;
            withdraw(&c, 7, &inside).await
        });
        a.unwrap();
        b.unwrap();
        assert_eq!(inside.entered(), 2);
        assert_eq!(inside.most(), 1, "two bodies ran under one lock at once");
    }

    async fn join_all_in_one_task_takes_turns(backend: Backend) {
        let c = backend.client();
        let inside = Inside::default();
        // Staggered, so that each call starts while an earlier one is inside.
        let calls = (0..3u64).map(|i| {
            let (c, inside) = (&c, &inside);
            async move {
                if i > 0 {
                    inside.occupied().await;
                }
                withdraw(c, 8, inside).await
            }
        });
        for result in join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(inside.entered(), 3);
        assert_eq!(inside.most(), 1, "a batch ran under one lock at once");
    }

    async fn select_in_one_task_does_not_let_the_losing_branch_in(backend: Backend) {
        let c = backend.client();
        let inside = Inside::default();
        // The second branch asks while the first is inside; it must wait for the first to
        // leave (it may enter once the first released, before select! drops it).
        let winner = tokio::select! {
            r = withdraw(&c, 9, &inside) => r,
            r = async {
                inside.occupied().await;
                withdraw(&c, 9, &inside).await
            } => r,
        };
        winner.unwrap();
        assert_eq!(inside.most(), 1, "both branches ran under one lock at once");
    }

    async fn futures_unordered_in_one_task_takes_turns(backend: Backend) {
        let c = backend.client();
        let inside = Inside::default();
        let calls: FuturesUnordered<_> = (0..3u64)
            .map(|i| {
                let (c, inside) = (&c, &inside);
                async move {
                    if i > 0 {
                        inside.occupied().await;
                    }
                    withdraw(c, 10, inside).await
                }
            })
            .collect();
        let results: Vec<_> = calls.collect().await;
        for result in results {
            result.unwrap();
        }
        assert_eq!(inside.entered(), 3);
        assert_eq!(
            inside.most(),
            1,
            "a FuturesUnordered batch ran under one lock at once"
        );
    }

    async fn a_second_plain_acquire_in_one_task_waits(backend: Backend) {
        let lock = backend.client().mutex("plain-twice").unwrap();
        let wait = Duration::from_millis(300);
        let (a, b) = tokio::join!(lock.acquire_timeout(wait), lock.acquire_timeout(wait));
        // One of them holds the lock until join! returns, so the other cannot have it.
        let (guard, err) = match (a, b) {
            (Ok(guard), Err(err)) | (Err(err), Ok(guard)) => (guard, err),
            (Ok(a), Ok(b)) => panic!("two guards at once, depths {} and {}", a.depth(), b.depth()),
            (Err(a), Err(b)) => panic!("neither acquired: {a}; {b}"),
        };
        assert_eq!(guard.depth(), 1);
        assert!(err.is_busy(), "{err}");
        assert!(
            err.to_string()
                .contains("another task of this process holds `plain-twice`"),
            "the busy error must point at the self-wait: {err}"
        );
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    }

    async fn a_guard_moved_to_a_spawned_task_keeps_the_lock_from_its_old_task(backend: Backend) {
        let lock = backend.client().mutex("moved").unwrap();
        let guard = lock.acquire().await.unwrap();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let worker = tokio::spawn(async move {
            // The worker holds the guard until told to finish.
            let _ = done_rx.await;
            guard.release().await.unwrap()
        });
        assert!(
            lock.try_acquire().await.unwrap().is_none(),
            "the task that acquired may not take the lock again while the worker holds it"
        );
        done_tx.send(()).unwrap();
        assert_eq!(worker.await.unwrap(), ReleaseOutcome::Released);
        assert!(lock.try_acquire().await.unwrap().is_some());
    }

    async fn a_call_nested_in_the_body_reenters_with_the_same_lease(backend: Backend) {
        let lock = backend.client().mutex("nest").unwrap();
        let inner_lock = lock.clone();
        let fences = lock
            .with_lock(Wait::No, |lease| async move {
                let inner = inner_lock.try_acquire().await.unwrap().expect("re-entered");
                assert_eq!(inner.depth(), 2);
                let fence = inner.fencing_token().await.unwrap();
                assert_eq!(inner.release().await.unwrap(), ReleaseOutcome::Nested);
                (lease.fencing_token().await.unwrap(), fence)
            })
            .await
            .unwrap();
        assert_eq!(fences.0, fences.1, "one acquisition, one fencing token");
        assert!(lock.try_acquire().await.unwrap().is_some(), "released");
    }

    async fn concurrent_nested_calls_inside_one_body_take_turns(backend: Backend) {
        let lock = backend.client().mutex("nest-join").unwrap();
        let inside = Inside::default();
        let nested = || {
            lock.with_lock(Wait::AtMost(Duration::from_secs(5)), |lease| {
                let inside = &inside;
                async move {
                    inside.visit(Duration::from_millis(30)).await;
                    lease.fencing_token().await.unwrap()
                }
            })
        };
        let outer = lock
            .with_lock(Wait::No, |lease| async move {
                let (a, b) = tokio::join!(nested(), nested());
                (lease.fencing_token().await.unwrap(), a.unwrap(), b.unwrap())
            })
            .await
            .unwrap();
        assert_eq!(inside.entered(), 2);
        assert_eq!(inside.most(), 1, "two nested holders at once");
        assert_eq!(
            (outer.0, outer.0),
            (outer.1, outer.2),
            "nested share the lease"
        );
    }

    async fn an_outer_guard_released_first_leaves_the_lock_to_the_inner_one(backend: Backend) {
        let c = backend.client();
        let lock = c.mutex("order").unwrap();
        let inner_lock = lock.clone();
        // The body returns its nested guard: the outer hold ends first (refused, logged), and the
        // lock stays held until that guard goes.
        let inner = lock
            .with_lock(
                Wait::No,
                |_| async move { inner_lock.acquire().await.unwrap() },
            )
            .await
            .unwrap();
        assert_eq!(inner.depth(), 2);
        let probe = backend.client().mutex("order").unwrap();
        assert!(probe.try_acquire().await.unwrap().is_none(), "still held");
        assert_eq!(inner.release().await.unwrap(), ReleaseOutcome::Released);
        assert!(probe.try_acquire().await.unwrap().is_some());
    }
);

/// Recurses under the lock until `left` reaches zero; returns the depth reached.
fn recurse(
    lock: dlock_core::Mutex,
    left: u32,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u32, dlock_core::Error>> + Send>> {
    Box::pin(async move {
        let inner = lock.clone();
        lock.with_lock(Wait::No, |_| async move {
            if left == 0 {
                Ok(1)
            } else {
                recurse(inner, left - 1).await.map(|depth| depth + 1)
            }
        })
        .await?
    })
}

backend_tests!(
    async fn recursion_reenters_up_to_the_cap_and_fails_at_once_beyond_it(backend: Backend) {
        let lock = backend.client().mutex("deep").unwrap();
        let depth = recurse(lock.clone(), 63).await.unwrap();
        assert_eq!(depth, 64);
        let err = tokio::time::timeout(Duration::from_secs(10), recurse(lock.clone(), 64))
            .await
            .expect("level 65 must fail at once, not queue behind its own lease")
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Reentrancy, "{err}");
        assert!(lock.try_acquire().await.unwrap().is_some(), "all released");
    }

    async fn a_non_reentrant_handle_inside_the_body_reports_instead_of_deadlocking(
        backend: Backend,
    ) {
        let c = backend.client();
        let strict = c
            .mutex_with("re-no", MutexOptions::new().reentrant(false))
            .unwrap();
        let inner = strict.clone();
        let err = tokio::time::timeout(
            Duration::from_secs(10),
            strict.with_lock(Wait::No, |_| async move { inner.acquire().await.map(drop) }),
        )
        .await
        .expect("must not wait for itself")
        .unwrap()
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Reentrancy);
        assert!(err.to_string().contains("reentrant(true)"), "{err}");
    }

    #[flavor = "current_thread"]
    async fn a_self_wait_is_reported_by_name(backend: Backend) {
        let logs = LogCapture::start();
        let options = MutexOptions::new()
            .ttl(dlock_core::MIN_WATCHDOG_TTL)
            .watchdog();
        let lock = backend.client().mutex_with("self-wait", options).unwrap();
        let guard = lock.acquire().await.unwrap();
        // The same flow acquires again while its guard is alive: it waits for itself.
        let second = lock.acquire();
        let warned = logs.wait_for("a lock this client holds itself", Duration::from_secs(30));
        tokio::select! {
            result = second => panic!("the second acquire cannot succeed: {result:?}"),
            line = warned => {
                assert!(line.contains("self-wait"), "the warning names the lock: {line}");
            }
        }
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    }
);
