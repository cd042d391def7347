//! FIFO also when a holder's lease runs out: with waiters queued across processes, a holder
//! that is SIGKILLed (its lease expires, nothing is published) is followed by the oldest
//! waiter, then the next, in queue order — and a newcomer that tries the moment the lease is
//! over (the waiters paused, so that it certainly comes first) is told "busy" while the head
//! wins. The lock key outlives the lease for the queue (issue #35: a version-2 value, kept one
//! lease past its deadline), so the newcomer's plain `SET NX` fails and its script hands the
//! lock to the head.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::sched_delay;
use crate::support::{Backend, Worker, backend_tests, eventually, field};

const WAITERS: usize = 3;

backend_tests!(
    async fn queued_waiters_keep_their_order_when_the_holder_dies(backend: Backend) {
        let mut holder = Worker::spawn(&[
            "hold".into(),
            backend.worker_arg(),
            "name=fifo-exp".into(),
            "ttl_ms=1000".into(),
        ]);
        assert!(
            holder
                .line(Duration::from_secs(30))
                .starts_with("acquired ")
        );
        let con = backend.raw().await;
        let mut waiters = Vec::new();
        for i in 0..WAITERS {
            waiters.push(Worker::spawn(&[
                "wait".into(),
                backend.worker_arg(),
                "name=fifo-exp".into(),
                "ttl_ms=5000".into(),
                "hold_ms=20".into(),
            ]));
            // One at a time, so that the queue order is the spawn order.
            eventually(Duration::from_secs(10), "waiter queued", || {
                let mut con = con.clone();
                async move {
                    let n: usize = con.llen("dlock:{fifo-exp}:queue").await.ok()?;
                    (n == i + 1).then_some(())
                }
            })
            .await;
        }
        // The waiters are paused while the holder's lease runs out, so nothing of theirs can
        // take the lock first: the newcomer below is certain to try on a free key with three
        // waiters queued, the race this test is about.
        for waiter in &waiters {
            waiter.child().stop().unwrap();
        }
        holder.child_mut().kill();
        let mut probe = con.clone();
        let newcomers = backend.client();
        eventually(
            Duration::from_secs(10),
            "the holder's lease ran out",
            || {
                let newcomers = newcomers.clone();
                async move {
                    let held = newcomers.inspect("fifo-exp").await.ok()?;
                    held.is_none().then_some(())
                }
            },
        )
        .await;
        let kept: bool = probe.exists("dlock:{fifo-exp}").await.unwrap();
        assert!(kept, "the lock key outlives the lease while callers wait");
        let queued: usize = probe.llen("dlock:{fifo-exp}:queue").await.unwrap();
        assert_eq!(
            queued, WAITERS,
            "precondition: the waiters are still queued"
        );

        let newcomer = newcomers.mutex("fifo-exp").unwrap();
        if let Some(guard) = newcomer.try_acquire().await.unwrap() {
            panic!(
                "a newcomer overtook {WAITERS} queued waiters (fence {})",
                guard.fencing_token().await.unwrap()
            );
        }
        // The newcomer's SET NX met the kept key and it did not wait: nothing of it is queued,
        // and the head takes the lock when it runs again (its fallback timer is past due).
        let queued: usize = probe.llen("dlock:{fifo-exp}:queue").await.unwrap();
        assert_eq!(queued, WAITERS, "the newcomer queued nothing");
        // A newcomer that waits runs the script: it finds the kept lock free, hands it to the
        // head of the queue (paused, but subscribed: the grant waits for it), and queues last.
        let patient = newcomers.mutex("fifo-exp").unwrap();
        let behind = tokio::spawn(async move {
            let guard = patient.acquire_timeout(Duration::from_secs(30)).await?;
            let fence = guard.fencing_token().await?;
            guard.release().await?;
            Ok::<_, dlock_core::Error>(fence)
        });
        let handed = eventually(Duration::from_secs(10), "handed to the head", || {
            let newcomers = newcomers.clone();
            async move { newcomers.inspect("fifo-exp").await.ok()? }
        })
        .await;
        assert_eq!(handed.pid, waiters[0].child().pid(), "handed to the head");
        for waiter in &waiters {
            waiter.child().cont().unwrap();
        }
        let first = waiters[0].line(Duration::from_secs(10));
        let mut fences = vec![field(&first, "fence")];
        for waiter in &waiters[1..] {
            fences.push(field(&waiter.line(Duration::from_secs(10)), "fence"));
        }
        fences.push(behind.await.unwrap().unwrap().get());
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "served out of queue order (the waiting newcomer last): fences {fences:?}"
        );
        let mut con = con.clone();
        let left: usize = con.llen("dlock:{fifo-exp}:queue").await.unwrap();
        assert_eq!(left, 0);
    }

    /// The keep is bounded (the model's `a kept key outlives its holder by at most one lease`):
    /// a holder and its only waiter both SIGKILLed, the key is kept while nobody holds it, and
    /// is gone about one lease after the lease it outlived, the dead waiter's queue with it
    /// (issue #44, the model's `a mutex queue never outlives its kept key`: before, the entry
    /// stayed forever); a newcomer then takes the lock at once.
    async fn a_key_kept_for_a_dead_waiter_is_gone_one_lease_later(backend: Backend) {
        let mut holder = Worker::spawn(&[
            "hold".into(),
            backend.worker_arg(),
            "name=fifo-dead".into(),
            "ttl_ms=1000".into(),
        ]);
        assert!(
            holder
                .line(Duration::from_secs(30))
                .starts_with("acquired ")
        );
        let con = backend.raw().await;
        let mut waiter = Worker::spawn(&[
            "wait".into(),
            backend.worker_arg(),
            "name=fifo-dead".into(),
            "ttl_ms=1000".into(),
            "hold_ms=20".into(),
        ]);
        eventually(Duration::from_secs(10), "waiter queued", || {
            let mut con = con.clone();
            async move {
                let n: usize = con.llen("dlock:{fifo-dead}:queue").await.ok()?;
                (n == 1).then_some(())
            }
        })
        .await;
        waiter.child_mut().kill();
        holder.child_mut().kill();
        let client = backend.client();
        eventually(
            Duration::from_secs(10),
            "the holder's lease ran out",
            || {
                let client = client.clone();
                async move {
                    client
                        .inspect("fifo-dead")
                        .await
                        .ok()?
                        .is_none()
                        .then_some(())
                }
            },
        )
        .await;
        let over = std::time::Instant::now();
        let mut probe = con.clone();
        let kept: bool = probe.exists("dlock:{fifo-dead}").await.unwrap();
        assert!(kept, "kept for the queued (dead) waiter");
        eventually(Duration::from_secs(10), "the kept key expired", || {
            let mut probe = probe.clone();
            async move {
                let present: bool = probe.exists("dlock:{fifo-dead}").await.ok()?;
                (!present).then_some(())
            }
        })
        .await;
        let kept_for = over.elapsed();
        sched_delay::assert_on_time(kept_for <= Duration::from_millis(1_500), || {
            format!("kept {kept_for:?} past the lease, more than one lease (1 s) and a margin")
        })
        .await;
        let queue: i64 = probe.exists("dlock:{fifo-dead}:queue").await.unwrap();
        assert_eq!(
            queue, 0,
            "the dead waiter's queue went with the key kept for it"
        );
        let guard = client
            .mutex("fifo-dead")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("the newcomer takes the lock the dead queue no longer keeps");
        guard.release().await.unwrap();
    }
);
