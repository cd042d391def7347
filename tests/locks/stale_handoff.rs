//! A stale hand-off is never returned as a live lease. A waiter W is queued; its process is
//! paused (SIGSTOP); the holder releases and the lock is handed to W; W's lease runs out while
//! it is paused; X takes the lock; W resumes. W must not come back with the old hand-off (its
//! fence older than X's, its lease over, or the lock X's): it waits again, and gets the lock
//! only after X released it. 50 trials, each checking that the race it tests did happen.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{Backend, Plain, Worker, backend_tests, eventually, field};

const LANES: u64 = 5;
const TRIALS_PER_LANE: u64 = 10;

backend_tests!(
    async fn a_hand_off_that_went_stale_while_the_waiter_was_paused_is_never_returned(
        backend: Backend,
    ) {
        let backend = &backend;
        let lanes = (0..LANES).map(|lane| async move {
            for trial in 0..TRIALS_PER_LANE {
                trial_once(backend, &format!("stale:{lane}:{trial}")).await;
            }
        });
        futures_util::future::join_all(lanes).await;
    }
);

async fn trial_once(backend: &Backend, name: &str) {
    let holder = backend.client();
    let h = holder
        .mutex(name)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let w = Worker::spawn(&[
        "wait".into(),
        backend.worker_arg(),
        format!("name={name}"),
        "ttl_ms=300".into(),
    ]);
    let con = backend.raw().await;
    let queue = format!("dlock:{{{name}}}:queue");
    queue_length_becomes(&con, &queue, 1, "W queued").await;
    w.child().stop().unwrap();

    // The release hands the lock to W, whose client is connected (only paused).
    h.release().await.unwrap();
    let observer = backend.client();
    let handed = observer.inspect(name).await.unwrap().expect("handed to W");
    assert_eq!(
        handed.pid,
        w.child().pid(),
        "precondition: W was handed the lock while stopped"
    );

    // W's lease runs out while it is stopped; then X takes the lock.
    eventually(Duration::from_secs(10), "W's lease runs out", || async {
        observer
            .inspect(name)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let x_client = backend.client();
    let x = x_client
        .mutex(name)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let x_fence = x.fencing_token().await.unwrap().get();
    let seen = observer.inspect(name).await.unwrap().expect("X holds it");
    assert_eq!(
        seen.pid,
        std::process::id(),
        "precondition: X holds the lock"
    );

    w.child().cont().unwrap();
    // W must queue again behind X instead of coming back with the stale hand-off.
    eventually(Duration::from_secs(10), "W waits again", || {
        let mut con = con.clone();
        let queue = queue.clone();
        let w = &w;
        async move {
            if let Some(line) = w.try_line() {
                panic!("W returned while X holds the lock (X's fence {x_fence}): {line}");
            }
            let n: usize = con.llen(&queue).await.ok()?;
            (n == 1).then_some(())
        }
    })
    .await;
    assert!(x.release().await.unwrap().was_held());

    let line = w.line(Duration::from_secs(10));
    let fence = field(&line, "fence");
    assert!(
        fence > x_fence,
        "W's fence {fence} must follow X's {x_fence}: {line}"
    );
    assert_eq!(
        fence,
        field(&line, "inspect_fence"),
        "W holds what the server says: {line}"
    );
    assert!(field(&line, "remaining_ms") > 0, "{line}");
    assert!(line.contains("held=true"), "{line}");
}

async fn queue_length_becomes(con: &Plain, queue: &str, want: usize, what: &str) {
    eventually(Duration::from_secs(10), what, || {
        let mut con = con.clone();
        async move {
            let n: usize = con.llen(queue).await.ok()?;
            (n == want).then_some(())
        }
    })
    .await;
}
