//! Introspection: who holds a lock (host, pid, label, fence, TTL, waiters), and nothing when it
//! is free; `held_locks` lists every held lock (each master of a cluster) and no other key; a
//! shared lock that nobody holds shows the requests queued for it.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{Backend, Worker, backend_tests, eventually, queue_reaches};

backend_tests!(
    async fn inspect_reports_the_holder(backend: Backend) {
        let c = backend.client();
        assert_eq!(c.inspect("ins").await.unwrap(), None);
        let lock = c
            .mutex_with(
                "ins",
                MutexOptions::new()
                    .ttl(Duration::from_secs(20))
                    .label("pay handler"),
            )
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        // Issued on demand, the fence is kept with the hold: inspect shows it.
        let fence = guard.fencing_token().await.unwrap();

        let waiting = backend.client().mutex("ins").unwrap();
        let waiter = tokio::spawn(async move { waiting.acquire().await?.fencing_token().await });
        let mut con = backend.raw().await;
        eventually(Duration::from_secs(5), "one waiter queued", || {
            let mut con = con.clone();
            async move {
                let n: usize = redis::AsyncCommands::llen(&mut con, "dlock:{ins}:queue")
                    .await
                    .ok()?;
                (n == 1).then_some(())
            }
        })
        .await;

        let info = c.inspect("ins").await.unwrap().expect("held");
        assert_eq!(info.pid, std::process::id());
        assert!(!info.host.is_empty());
        assert_eq!(info.label.as_deref(), Some("pay handler"));
        assert_eq!(info.fencing_token, Some(fence));
        assert!(
            info.remaining <= Duration::from_secs(20) && info.remaining > Duration::from_secs(10)
        );
        assert_eq!(info.waiters, 1);
        guard.release().await.unwrap();
        let next_fence = waiter.await.unwrap().unwrap();
        assert!(Some(next_fence) > info.fencing_token);
        let _ = &mut con;
    }
);

backend_tests!(
    async fn a_fence_shows_once_the_holder_asked_for_it(backend: Backend) {
        let c = backend.client();
        let guard = c
            .mutex("lazy")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let info = c.inspect("lazy").await.unwrap().expect("held");
        assert_eq!(info.fencing_token, None, "no fence issued yet");
        assert_eq!(guard.issued_fencing_token(), None);
        let fence = guard.fencing_token().await.unwrap();
        let info = c.inspect("lazy").await.unwrap().expect("held");
        assert_eq!(info.fencing_token, Some(fence));
        // Asking again costs nothing and gives the same token.
        assert_eq!(guard.issued_fencing_token(), Some(fence));
        assert_eq!(guard.fencing_token().await.unwrap(), fence);
    }
);

backend_tests!(
    /// A semaphore's and a read-write lock's holders as operators see them: who, how many
    /// permits, which fence, how long, how many wait; nothing once they are gone.
    async fn shared_locks_show_their_holders(backend: Backend) {
        let client = backend.client();
        let labelled = MutexOptions::new()
            .ttl(Duration::from_secs(30))
            .label("export job");
        let sem = client
            .semaphore_with("ins-sem", 3, labelled.clone())
            .unwrap();
        let two = sem.try_acquire(2).await.unwrap().expect("free");
        let one = sem.try_acquire(1).await.unwrap().expect("free");
        let info = client
            .inspect_semaphore("ins-sem")
            .await
            .unwrap()
            .expect("held");
        assert_eq!(info.limit, 3);
        assert_eq!(info.waiters, 0);
        let mut seen: Vec<(u32, u64)> = info
            .holders
            .iter()
            .map(|h| (h.permits, h.fencing_token.get()))
            .collect();
        seen.sort_unstable();
        let mut want = vec![
            (2, two.fencing_token().get()),
            (1, one.fencing_token().get()),
        ];
        want.sort_unstable();
        assert_eq!(seen, want);
        let holder = &info.holders[0];
        assert_eq!(holder.pid, std::process::id());
        assert_eq!(holder.label.as_deref(), Some("export job"));
        assert!(holder.remaining > Duration::from_secs(20));
        two.release().await.unwrap();
        one.release().await.unwrap();
        assert!(client.inspect_semaphore("ins-sem").await.unwrap().is_none());

        let rw = client.rw_lock_with("ins-rw", labelled).unwrap();
        let write = rw.write().await.unwrap();
        let reader = client.rw_lock("ins-rw").unwrap();
        let waiting = tokio::spawn(async move { reader.read().await });
        let info = eventually(Duration::from_secs(10), "a reader queued", || async {
            let info = client.inspect_rw_lock("ins-rw").await.unwrap()?;
            (info.waiters == 1).then_some(info)
        })
        .await;
        let writer = info.writer.expect("a writer holds");
        assert_eq!(writer.fencing_token, write.fencing_token());
        assert_eq!(writer.permits, 1);
        assert!(info.readers.is_empty());
        let read = write.downgrade().await.unwrap();
        let other = waiting.await.unwrap().unwrap();
        let info = client
            .inspect_rw_lock("ins-rw")
            .await
            .unwrap()
            .expect("read");
        assert!(info.writer.is_none());
        assert_eq!(info.readers.len(), 2);
        read.release().await.unwrap();
        other.release().await.unwrap();
        assert!(client.inspect_rw_lock("ins-rw").await.unwrap().is_none());
    }
);

backend_tests!(
    async fn held_locks_lists_every_held_lock_and_no_other_key(backend: Backend) {
        let c = backend.client();
        let mut guards = Vec::new();
        // Enough names that a cluster has some on every master.
        for i in 0..12 {
            let lock = c.mutex(&format!("listed-{i}")).unwrap();
            guards.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        // Fence counters and a queue exist too: neither is a lock.
        guards[0].fencing_token().await.unwrap();
        let waiting = backend.client().mutex("listed-0").unwrap();
        let waiter = tokio::spawn(async move { waiting.acquire().await });
        let permit = c.semaphore("listed-sem", 3).unwrap();
        let permit = permit.try_acquire(2).await.unwrap().expect("free");
        let read = c.rw_lock("listed-rw").unwrap().try_read().await.unwrap();
        let mut con = backend.raw().await;
        let _: () = redis::AsyncCommands::set(&mut con, "dlock:{listed-junk}", "not a lock")
            .await
            .unwrap();
        let _: () = redis::AsyncCommands::set(&mut con, "other:{listed-9}", "x")
            .await
            .unwrap();
        eventually(Duration::from_secs(5), "one waiter queued", || async {
            let info = c.inspect("listed-0").await.ok()??;
            (info.waiters == 1).then_some(())
        })
        .await;

        let found = c.held_locks(Some("listed-*")).await.unwrap();
        let mut names: Vec<_> = found.locks.iter().map(|l| l.name().to_owned()).collect();
        names.sort();
        let mut expected: Vec<_> = (0..12).map(|i| format!("listed-{i}")).collect();
        expected.extend(["listed-rw".to_owned(), "listed-sem".to_owned()]);
        expected.sort();
        assert_eq!(names, expected);
        assert_eq!(found.foreign, ["dlock:{listed-junk}"]);
        for lock in &found.locks {
            match lock {
                dlock_core::HeldLock::Mutex { name, holder } => {
                    assert_eq!(holder.pid, std::process::id());
                    assert_eq!(holder.waiters, usize::from(name == "listed-0"), "{name}");
                }
                dlock_core::HeldLock::Semaphore { info, .. } => {
                    assert_eq!((info.limit, info.holders[0].permits), (3, 2));
                }
                dlock_core::HeldLock::RwLock { info, .. } => assert_eq!(info.readers.len(), 1),
                other => panic!("a kind this test does not know: {other:?}"),
            }
        }
        // A narrower pattern, and one that matches nothing.
        let one = c.held_locks(Some("listed-1?")).await.unwrap();
        assert_eq!(one.locks.len(), 2, "{:?}", one.locks);
        assert!(
            c.held_locks(Some("nobody-*"))
                .await
                .unwrap()
                .locks
                .is_empty()
        );
        assert!(
            c.held_locks(Some("a{b"))
                .await
                .unwrap_err()
                .is_invalid_input()
        );

        drop((permit, read));
        for guard in guards {
            guard.release().await.unwrap();
        }
        waiter.await.unwrap().unwrap().release().await.unwrap();
    }
);

/// A `shared` worker on `backend` (`tests/worker`): `kind` `rw` or `sem`, `extra` its other
/// arguments.
fn shared_worker(backend: &Backend, kind: &str, name: &str, extra: &[&str]) -> Worker {
    let mut args = vec![
        "shared".to_owned(),
        backend.worker_arg(),
        format!("kind={kind}"),
        format!("name={name}"),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Worker::spawn(&args)
}

backend_tests!(
    async fn shared_locks_show_requests_queued_while_nobody_holds(backend: Backend) {
        let c = backend.client();
        let con = backend.raw().await;
        // Each kind held with a 1.5 s lease that nobody renews nor releases, a request queued
        // behind it by a process then frozen (SIGSTOP), so that it does not take its turn when
        // the lease ends: requests queued, nobody holding.
        let sem_holder = shared_worker(
            &backend,
            "sem",
            "iq-sem",
            &["take=2", "limit=2", "ttl_ms=1500"],
        );
        let rw_holder = shared_worker(&backend, "rw", "iq-rw", &["take=read", "ttl_ms=1500"]);
        for holder in [&sem_holder, &rw_holder] {
            let line = holder.line(Duration::from_secs(30));
            assert!(line.starts_with("acquired "), "{line}");
        }
        let sem_waiter = shared_worker(&backend, "sem", "iq-sem", &["take=1", "limit=2"]);
        let rw_waiter = shared_worker(&backend, "rw", "iq-rw", &["take=write"]);
        queue_reaches(&con, "dlock:{iq-sem}:sem:queue", 1).await;
        queue_reaches(&con, "dlock:{iq-rw}:rw:queue", 1).await;
        sem_waiter.child().stop().unwrap();
        rw_waiter.child().stop().unwrap();

        let info = eventually(
            Duration::from_secs(10),
            "the semaphore's lease ended",
            || async {
                c.inspect_semaphore("iq-sem")
                    .await
                    .unwrap()
                    .filter(|info| info.holders.is_empty())
            },
        )
        .await;
        assert_eq!(info.waiters, 1, "{info:?}");
        // The limit Redis keeps while requests wait.
        assert_eq!(
            info.limit, 2,
            "the stored limit is kept while requests wait: {info:?}"
        );
        let info = eventually(
            Duration::from_secs(10),
            "the reader's lease ended",
            || async {
                c.inspect_rw_lock("iq-rw")
                    .await
                    .unwrap()
                    .filter(|info| info.readers.is_empty())
            },
        )
        .await;
        assert_eq!((info.waiters, info.writer.is_none()), (1, true), "{info:?}");

        // Once the frozen requests go on, they are granted and shown as holders.
        sem_waiter.child().cont().unwrap();
        rw_waiter.child().cont().unwrap();
        for waiter in [&sem_waiter, &rw_waiter] {
            let line = waiter.line(Duration::from_secs(30));
            assert!(line.starts_with("acquired "), "{line}");
        }
        let info = c.inspect_semaphore("iq-sem").await.unwrap().expect("held");
        assert_eq!((info.limit, info.holders.len(), info.waiters), (2, 1, 0));
        let info = c.inspect_rw_lock("iq-rw").await.unwrap().expect("held");
        assert!(info.writer.is_some(), "{info:?}");
    }
);
