//! FIFO also when a holder's lease runs out: with waiters queued across processes, a holder
//! that is SIGKILLed (its lease expires, nothing is published) is followed by the oldest
//! waiter, then the next, in queue order — and a newcomer that tries the moment the lock key
//! disappears is told "busy" while the head wins.

use std::time::Duration;

use redis::AsyncCommands;

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
        holder.child.kill();

        // A newcomer tries as fast as it can until the head of the queue has the lock.
        let newcomer = backend.client().mutex("fifo-exp").unwrap();
        let mut tries = 0u64;
        let first = loop {
            if let Some(line) = waiters[0].try_line() {
                break line;
            }
            tries += 1;
            if let Some(guard) = newcomer.try_acquire().await.unwrap() {
                panic!(
                    "a newcomer overtook {WAITERS} queued waiters after {tries} tries (fence {})",
                    guard.fencing_token().await.unwrap()
                );
            }
            assert!(
                tries < 1_000_000,
                "the head of the queue never got the lock"
            );
        };
        let mut fences = vec![field(&first, "fence")];
        for waiter in &waiters[1..] {
            fences.push(field(&waiter.line(Duration::from_secs(10)), "fence"));
        }
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "served out of queue order: fences {fences:?}"
        );
        let mut con = con.clone();
        let left: usize = con.llen("dlock:{fifo-exp}:queue").await.unwrap();
        assert_eq!(left, 0);
    }
);
