//! The read-write lock and the semaphore across processes (`dlock-test-worker shared`): grants
//! in arrival order across processes and modes, a killed holder's hold ending at its own
//! deadline while a live one is renewed, and a grant that went stale while its waiter's process
//! was paused (SIGSTOP) never returned as a live hold.

use std::time::Duration;

use dlock_core::MutexOptions;
use redis::AsyncCommands;

use crate::support::{Backend, Plain, Worker, backend_tests, eventually, field, queue_reaches};

/// A `shared` worker on `backend`: `kind` `rw` or `sem`, `extra` its other arguments.
fn spawn(backend: &Backend, kind: &str, name: &str, extra: &[&str]) -> Worker {
    let mut args = vec![
        "shared".to_owned(),
        backend.worker_arg(),
        format!("kind={kind}"),
        format!("name={name}"),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Worker::spawn(&args)
}

/// The weight held in the shared lock `key`, as the server counts it.
async fn used(con: &mut Plain, key: &str) -> u64 {
    let used: Option<u64> = con.hget(key, "used").await.unwrap();
    used.unwrap_or(0)
}

backend_tests!(
    /// Writer, reader, reader, writer, reader — each its own process, queued in that order
    /// behind a held write — are granted in that order: the fences (one per grant, increasing)
    /// say so, and the two readers in the middle come in together, between the writers.
    async fn grants_follow_arrival_order_across_processes_and_modes(backend: Backend) {
        let name = "fam-order";
        let long = MutexOptions::new().ttl(Duration::from_secs(30));
        let held = backend
            .client()
            .rw_lock_with(name, long)
            .unwrap()
            .write()
            .await
            .unwrap();
        let con = backend.raw().await;
        let queue = format!("dlock:{{{name}}}:rw:queue");
        let mut workers = Vec::new();
        for (i, take) in ["write", "read", "read", "write", "read"]
            .iter()
            .enumerate()
        {
            let take = format!("take={take}");
            workers.push(spawn(
                &backend,
                "rw",
                name,
                &[&take, "ttl_ms=10000", "hold_ms=100"],
            ));
            queue_reaches(&con, &queue, i + 1).await;
        }
        held.release().await.unwrap();
        let fences: Vec<u64> = workers
            .iter()
            .map(|w| field(&w.line(Duration::from_secs(20)), "fence"))
            .collect();
        let [w1, r2, r3, w4, r5] = fences[..] else {
            unreachable!()
        };
        assert!(
            w1 < r2.min(r3),
            "the first writer before the readers: {fences:?}"
        );
        assert!(
            r2.max(r3) < w4,
            "both readers before the second writer: {fences:?}"
        );
        assert!(
            w4 < r5,
            "the last reader after the writer it queued behind: {fences:?}"
        );
        for w in &workers {
            assert!(
                w.line(Duration::from_secs(20))
                    .contains("released Released")
            );
        }
    }

    /// Two reader processes hold; one has a fixed lease, one the watchdog. Both are killed in
    /// turn: the first one's hold ends at its own deadline while the other's is renewed, and
    /// the writer waiting in this process gets the lock only once both are gone.
    async fn a_killed_reader_process_leaves_at_its_own_deadline(backend: Backend) {
        let name = "fam-kill";
        let key = format!("dlock:{{{name}}}:rw");
        let mut fixed = spawn(&backend, "rw", name, &["take=read", "ttl_ms=1000"]);
        let mut renewed = spawn(
            &backend,
            "rw",
            name,
            &["take=read", "ttl_ms=1000", "watchdog=1"],
        );
        let fences = [
            field(&fixed.line(Duration::from_secs(20)), "fence"),
            field(&renewed.line(Duration::from_secs(20)), "fence"),
        ];
        let mut con = backend.raw().await;
        assert_eq!(used(&mut con, &key).await, 2);
        let writer = backend.client().rw_lock(name).unwrap();
        let waiting =
            tokio::spawn(async move { writer.write_timeout(Duration::from_secs(25)).await });
        queue_reaches(&con, &format!("{key}:queue"), 1).await;

        fixed.child_mut().kill();
        eventually(Duration::from_secs(10), "the killed reader purged", || {
            let mut con = con.clone();
            let key = key.clone();
            async move { (used(&mut con, &key).await == 1).then_some(()) }
        })
        .await;
        // Two more of the renewed reader's leases: it still holds, the writer still waits.
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        assert_eq!(used(&mut con, &key).await, 1, "the live reader is renewed");
        assert!(
            !waiting.is_finished(),
            "the writer waits for the live reader"
        );

        renewed.child_mut().kill();
        let write = waiting.await.unwrap().expect("granted once both are gone");
        assert!(write.fencing_token().get() > fences[0].max(fences[1]));
        write.release().await.unwrap();
    }

    /// A request for 4 of 4 permits queued first is served before a later request for 1, even
    /// though 1 permit is free when the second one comes, across processes.
    async fn a_large_request_goes_first_across_processes(backend: Backend) {
        let name = "fam-sem";
        let long = MutexOptions::new().ttl(Duration::from_secs(30));
        let sem = backend.client().semaphore_with(name, 4, long).unwrap();
        let held = sem.try_acquire(3).await.unwrap().expect("free");
        let con = backend.raw().await;
        let queue = format!("dlock:{{{name}}}:sem:queue");
        let big = spawn(
            &backend,
            "sem",
            name,
            &["take=4", "limit=4", "ttl_ms=10000", "hold_ms=200"],
        );
        queue_reaches(&con, &queue, 1).await;
        let small = spawn(
            &backend,
            "sem",
            name,
            &["take=1", "limit=4", "ttl_ms=10000", "hold_ms=0"],
        );
        queue_reaches(&con, &queue, 2).await;
        assert!(
            small.try_line().is_none(),
            "the small request overtook the large one"
        );
        held.release().await.unwrap();
        let big_fence = field(&big.line(Duration::from_secs(20)), "fence");
        let small_fence = field(&small.line(Duration::from_secs(20)), "fence");
        assert!(big_fence < small_fence, "{big_fence} then {small_fence}");
    }

    /// A waiter's process is paused (SIGSTOP) while a release grants it the permit; its lease
    /// runs out; another holder takes the permit; the waiter resumes. It must not come back
    /// with the stale grant: it waits again and gets a permit (with a larger fence) only once
    /// the other holder released. 10 trials, each checking that the race it tests did happen.
    async fn a_grant_that_went_stale_while_paused_is_never_returned(backend: Backend) {
        for trial in 0..10 {
            stale_trial(&backend, &format!("fam-stale:{trial}")).await;
        }
    }
);

async fn stale_trial(backend: &Backend, name: &str) {
    let holder = backend.client();
    let long = MutexOptions::new().ttl(Duration::from_secs(30));
    let held = holder
        .semaphore_with(name, 1, long)
        .unwrap()
        .try_acquire(1)
        .await
        .unwrap()
        .expect("free");
    let w = spawn(
        backend,
        "sem",
        name,
        &["take=1", "limit=1", "ttl_ms=500", "hold_ms=0"],
    );
    let mut con = backend.raw().await;
    let key = format!("dlock:{{{name}}}:sem");
    queue_reaches(&con, &format!("{key}:queue"), 1).await;
    w.child().stop().unwrap();

    held.release().await.unwrap();
    // The release admitted W (its client is connected, only paused) …
    assert_eq!(used(&mut con, &key).await, 1, "precondition: W was granted");
    // … whose lease runs out while it is stopped; X then takes the permit.
    let x_client = backend.client();
    let x_sem = x_client.semaphore(name, 1).unwrap();
    let x = eventually(Duration::from_secs(10), "W's lease runs out", || async {
        x_sem.try_acquire(1).await.unwrap()
    })
    .await;

    let x_fence = x.fencing_token().get();
    w.child().cont().unwrap();
    // W must queue again behind X instead of coming back with the stale grant.
    queue_reaches_unless(&con, &key, &w, x_fence).await;
    assert!(x.release().await.unwrap().was_held());
    let line = w.line(Duration::from_secs(10));
    assert!(
        field(&line, "fence") > x_fence,
        "W's fence must follow X's: {line}"
    );
    assert!(field(&line, "remaining_ms") > 0, "{line}");
    assert!(line.contains("held=true"), "{line}");
}

/// Waits until W is queued again, failing if W says it holds meanwhile.
async fn queue_reaches_unless(con: &Plain, key: &str, w: &Worker, x_fence: u64) {
    eventually(Duration::from_secs(10), "W waits again", || {
        let mut con = con.clone();
        async move {
            if let Some(line) = w.try_line() {
                panic!("W returned while X holds the permit (X's fence {x_fence}): {line}");
            }
            let n: usize = con.llen(format!("{key}:queue")).await.ok()?;
            (n == 1).then_some(())
        }
    })
    .await;
}
