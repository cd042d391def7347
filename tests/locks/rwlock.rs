//! The read-write lock: never a writer beside anyone else (checked by an observer outside the
//! lock on every grant), readers together, FIFO across modes (a stream of readers never starves
//! a queued writer; a release admits the run of readers at the head and stops at the first
//! writer), per-reader leases (a crashed reader ends at its own deadline), fences that grow with
//! every grant, atomic downgrade and never-waiting upgrade, reentrancy for nested calls only,
//! keys of its own, and scripts that are safe to run twice.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::__private::conformance::Source;
use dlock_core::{Client, ErrorKind, MutexOptions, RwLock, Wait};
use redis::AsyncCommands;
use tokio::sync::Mutex as AsyncMutex;

use crate::support::{Backend, Plain, backend_tests, eventually, observe, queue_reaches};

/// The weight held as the server counts it (a reader 1, the writer 2^30).
async fn used(con: &mut Plain, name: &str) -> u64 {
    let used: Option<u64> = con
        .hget(format!("dlock:{{{name}}}:rw"), "used")
        .await
        .unwrap();
    used.unwrap_or(0)
}

const WRITER: u64 = 1 << 30;

/// Waits until `n` requests are queued for the lock `name`.
async fn queued(con: &Plain, name: &str, n: usize) {
    queue_reaches(con, &format!("dlock:{{{name}}}:rw:queue"), n).await;
}

/// A handle on `name` with a 30 s fixed lease through a new client (a process of its own, as
/// far as the lock can tell).
fn handle(backend: &Backend, name: &str) -> RwLock {
    let long = MutexOptions::new().ttl(Duration::from_secs(30));
    backend.client().rw_lock_with(name, long).unwrap()
}

/// The order in which holds were granted, as the holders record it.
type Order = Arc<AsyncMutex<Vec<&'static str>>>;

/// Spawns a `read` (or `write`) of `lock` that records `tag` in `order` once granted and keeps
/// the hold until `release` fires.
fn spawn_hold(
    lock: RwLock,
    write: bool,
    tag: &'static str,
    order: &Order,
    release: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    let order = order.clone();
    tokio::spawn(async move {
        let wait = Duration::from_secs(25);
        if write {
            let guard = lock.write_timeout(wait).await.unwrap();
            order.lock().await.push(tag);
            let _ = release.await;
            guard.release().await.unwrap();
        } else {
            let guard = lock.read_timeout(wait).await.unwrap();
            order.lock().await.push(tag);
            let _ = release.await;
            guard.release().await.unwrap();
        }
    })
}

backend_tests!(
    /// 3 clients × 4 tasks take read and write holds at random; on every grant the observer
    /// checks that a writer is alone and a reader is beside no writer, and that readers did
    /// share the lock at some point.
    async fn never_a_writer_beside_anyone(backend: Backend) {
        let name = "rw-excl";
        let mut tasks = Vec::new();
        let most_readers = Arc::new(std::sync::atomic::AtomicI64::new(0));
        for c in 0..3 {
            let lock = backend.client().rw_lock(name).unwrap();
            for t in 0..4 {
                let lock = lock.clone();
                let mut con = backend.raw().await;
                let most_readers = most_readers.clone();
                tasks.push(tokio::spawn(async move {
                    for i in 0..12u32 {
                        if (i + t + c) % 4 == 0 {
                            let guard = lock.write().await.unwrap();
                            let (r, w) = observe(&mut con, name, "w", 1).await;
                            assert_eq!((r, w), (0, 1), "a writer beside others");
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            observe(&mut con, name, "w", -1).await;
                            guard.release().await.unwrap();
                        } else {
                            let guard = lock.read().await.unwrap();
                            let (r, w) = observe(&mut con, name, "r", 1).await;
                            assert_eq!(w, 0, "a reader beside a writer");
                            most_readers.fetch_max(r, std::sync::atomic::Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            observe(&mut con, name, "r", -1).await;
                            guard.release().await.unwrap();
                        }
                    }
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
        let most = most_readers.load(std::sync::atomic::Ordering::Relaxed);
        assert!(most > 1, "readers never held together (at most {most})");
        let mut con = backend.raw().await;
        assert_eq!(used(&mut con, name).await, 0);
        let left: bool = con.exists("dlock:{rw-excl}:rw").await.unwrap();
        assert!(!left, "nothing is left behind");
    }

    /// Readers keep coming while a writer waits: none that queued after the writer is granted
    /// before it, even though only readers hold.
    async fn a_stream_of_readers_never_starves_a_queued_writer(backend: Backend) {
        let name = "rw-starve";
        let first = handle(&backend, name).read().await.unwrap();
        let con = backend.raw().await;
        let order: Order = Arc::default();
        let (release_writer, writer_done) = tokio::sync::oneshot::channel();
        let writer = spawn_hold(handle(&backend, name), true, "writer", &order, writer_done);
        queued(&con, name, 1).await;
        // A reader now would share with the holding reader, but the writer is queued first.
        assert!(handle(&backend, name).try_read().await.unwrap().is_none());
        let mut readers = Vec::new();
        let mut releases = Vec::new();
        for (i, tag) in ["reader 1", "reader 2", "reader 3"].into_iter().enumerate() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            readers.push(spawn_hold(handle(&backend, name), false, tag, &order, rx));
            releases.push(tx);
            queued(&con, name, i + 2).await;
        }
        first.release().await.unwrap();
        eventually(Duration::from_secs(10), "the writer granted", || async {
            (!order.lock().await.is_empty()).then_some(())
        })
        .await;
        assert_eq!(*order.lock().await, ["writer"]);
        release_writer.send(()).unwrap();
        writer.await.unwrap();
        eventually(Duration::from_secs(10), "the readers granted", || async {
            (order.lock().await.len() == 4).then_some(())
        })
        .await;
        assert_eq!(order.lock().await[0], "writer");
        for tx in releases {
            tx.send(()).unwrap();
        }
        for reader in readers {
            reader.await.unwrap();
        }
    }

    /// A writer's release admits every reader at the head of the queue at once and stops at the
    /// first writer; the readers behind that writer wait for it.
    async fn a_release_admits_the_readers_at_the_head_as_a_batch(backend: Backend) {
        let name = "rw-batch";
        let held = handle(&backend, name).write().await.unwrap();
        let mut con = backend.raw().await;
        let order: Order = Arc::default();
        let mut releases = Vec::new();
        let mut tasks = Vec::new();
        let plan = [
            (false, "reader 1"),
            (false, "reader 2"),
            (false, "reader 3"),
            (true, "writer 2"),
            (false, "reader 4"),
        ];
        for (i, (write, tag)) in plan.into_iter().enumerate() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tasks.push(spawn_hold(handle(&backend, name), write, tag, &order, rx));
            releases.push(tx);
            queued(&con, name, i + 1).await;
        }
        held.release().await.unwrap();
        eventually(Duration::from_secs(10), "three readers in", || async {
            (order.lock().await.len() == 3).then_some(())
        })
        .await;
        assert_eq!(
            used(&mut con, name).await,
            3,
            "the three readers hold together"
        );
        queued(&con, name, 2).await;
        let mut granted = order.lock().await.clone();
        granted.sort_unstable();
        assert_eq!(granted, ["reader 1", "reader 2", "reader 3"]);
        // The readers leave; the queued writer goes next, then the reader behind it.
        let mut releases = releases.into_iter();
        for tx in releases.by_ref().take(3) {
            tx.send(()).unwrap();
        }
        eventually(Duration::from_secs(10), "writer 2 in", || async {
            (order.lock().await.len() == 4).then_some(())
        })
        .await;
        assert_eq!(order.lock().await[3], "writer 2");
        assert_eq!(used(&mut con, name).await, WRITER);
        for tx in releases {
            tx.send(()).unwrap();
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(order.lock().await[4], "reader 4");
    }

    /// A reader that crashed (its guard leaked, fixed 1 s lease) leaves at its own deadline; the
    /// other reader keeps its hold, and the waiting writer gets the lock when that one leaves.
    async fn a_crashed_reader_ends_at_its_own_deadline(backend: Backend) {
        let name = "rw-crash";
        let short = MutexOptions::new().ttl(Duration::from_secs(1));
        let crashed = backend.client().rw_lock_with(name, short).unwrap();
        std::mem::forget(crashed.read().await.unwrap());
        let survivor = handle(&backend, name).read().await.unwrap();
        let mut con = backend.raw().await;
        assert_eq!(used(&mut con, name).await, 2);
        let writer = handle(&backend, name);
        let waiting =
            tokio::spawn(async move { writer.write_timeout(Duration::from_secs(25)).await });
        queued(&con, name, 1).await;
        // The writer's fallback timer is capped at the nearest deadline: it purges the crashed
        // reader then, and waits on for the survivor.
        eventually(Duration::from_secs(10), "the crashed reader purged", || {
            let mut con = con.clone();
            async move { (used(&mut con, name).await == 1).then_some(()) }
        })
        .await;
        assert!(survivor.remaining() > Duration::ZERO);
        assert!(!waiting.is_finished(), "the writer waits for the survivor");
        let fence = survivor.fencing_token();
        assert!(survivor.release().await.unwrap().was_held());
        let write = waiting
            .await
            .unwrap()
            .expect("granted on the survivor's release");
        assert!(write.fencing_token() > fence);
        write.release().await.unwrap();
    }

    /// Watchdog holds of both modes outlive several leases; each reader is renewed on its own.
    async fn watchdog_renews_every_reader(backend: Backend) {
        let name = "rw-watchdog";
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(300))
            .watchdog();
        let lock = backend.client().rw_lock_with(name, options).unwrap();
        let a = lock.read().await.unwrap();
        let b = lock.read().await.unwrap();
        let mut con = backend.raw().await;
        // Four leases' time: both still hold.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert_eq!(used(&mut con, name).await, 2);
        assert!(a.remaining() > Duration::ZERO && b.remaining() > Duration::ZERO);
        a.release().await.unwrap();
        b.release().await.unwrap();
        let w = lock.write().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert_eq!(used(&mut con, name).await, WRITER);
        assert!(w.release().await.unwrap().was_held());
    }

    /// Every grant takes a larger fence: a writer's exceeds every earlier reader's and
    /// writer's; a downgrade and an upgrade are grants too.
    async fn fences_grow_with_every_grant(backend: Backend) {
        let lock = backend.client().rw_lock("rw-fence").unwrap();
        let r1 = lock.read().await.unwrap();
        let r2 = lock.read().await.unwrap();
        assert!(r2.fencing_token() > r1.fencing_token());
        let last_read = r2.fencing_token();
        r1.release().await.unwrap();
        r2.release().await.unwrap();
        let w = lock.write().await.unwrap();
        assert!(w.fencing_token() > last_read);
        let written = w.fencing_token();
        let r = w.downgrade().await.unwrap();
        assert!(r.fencing_token() > written);
        let read = r.fencing_token();
        let w = r.try_upgrade().await.unwrap();
        assert!(w.fencing_token() > read);
        assert_eq!(w.lease().issued_fencing_token(), Some(w.fencing_token()));
        w.release().await.unwrap();
    }

    /// `try_upgrade` never waits: refused while another reader holds or someone is queued
    /// (the read hold is kept), granted to the sole reader.
    async fn an_upgrade_never_waits(backend: Backend) {
        let name = "rw-upgrade";
        let lock = handle(&backend, name);
        let mine = lock.read().await.unwrap();
        let other = handle(&backend, name).read().await.unwrap();
        let refused = mine.try_upgrade().await.unwrap_err();
        assert_eq!(refused.error().kind(), ErrorKind::Busy);
        assert!(refused.to_string().contains("1 other reader"), "{refused}");
        let mine = refused.into_read_guard().expect("still reading");
        let mut con = backend.raw().await;
        assert_eq!(used(&mut con, name).await, 2);
        other.release().await.unwrap();

        // Alone, but a writer is queued: refused too (it would overtake the writer).
        let writer = handle(&backend, name);
        let waiting =
            tokio::spawn(async move { writer.write_timeout(Duration::from_secs(25)).await });
        queued(&con, name, 1).await;
        let refused = mine.try_upgrade().await.unwrap_err();
        assert!(
            refused.to_string().contains("1 caller(s) wait"),
            "{refused}"
        );
        let mine = refused.into_read_guard().expect("still reading");
        mine.release().await.unwrap();
        waiting.await.unwrap().unwrap().release().await.unwrap();

        // The sole reader with nobody queued becomes the writer; a reader now waits.
        let mine = lock.read().await.unwrap();
        let old_lease = mine.lease();
        let write = mine.try_upgrade().await.unwrap();
        assert_eq!(used(&mut con, name).await, WRITER);
        assert!(handle(&backend, name).try_read().await.unwrap().is_none());
        // The read hold's lease ended with the change; the write hold has its own.
        assert!(!old_lease.is_held());
        assert!(write.lease().is_held());
        assert!(write.release().await.unwrap().was_held());
        assert_eq!(used(&mut con, name).await, 0);
    }

    /// A downgrade keeps the lock and admits the readers queued at the head, but not the
    /// readers queued behind a writer.
    async fn a_downgrade_admits_the_readers_ahead_of_the_next_writer(backend: Backend) {
        let name = "rw-down";
        let held = handle(&backend, name).write().await.unwrap();
        let mut con = backend.raw().await;
        let order: Order = Arc::default();
        let mut releases = Vec::new();
        let mut tasks = Vec::new();
        for (i, (write, tag)) in [(false, "reader 1"), (true, "writer 2"), (false, "reader 2")]
            .into_iter()
            .enumerate()
        {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tasks.push(spawn_hold(handle(&backend, name), write, tag, &order, rx));
            releases.push(tx);
            queued(&con, name, i + 1).await;
        }
        let reading = held.downgrade().await.unwrap();
        eventually(Duration::from_secs(10), "reader 1 in", || async {
            (order.lock().await.len() == 1).then_some(())
        })
        .await;
        assert_eq!(*order.lock().await, ["reader 1"]);
        assert_eq!(
            used(&mut con, name).await,
            2,
            "the downgraded holder and reader 1"
        );
        queued(&con, name, 2).await;
        reading.release().await.unwrap();
        for tx in releases {
            let _ = tx.send(());
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().await, ["reader 1", "writer 2", "reader 2"]);
    }

    /// Inside the body of a hold, a nested read is granted locally — also with a writer queued,
    /// where a queued read would wait for the body's own hold — a nested write inside a write
    /// re-enters, and a nested write inside a read fails at once.
    async fn nested_calls_reenter_by_the_holds_mode(backend: Backend) {
        let name = "rw-nested";
        let lock = handle(&backend, name);
        let con = backend.raw().await;
        let writer = handle(&backend, name);
        let inner = lock.clone();
        let (queued_tx, queued_rx) = tokio::sync::oneshot::channel::<()>();
        let waiting = tokio::spawn(async move {
            let _ = queued_rx.await;
            writer.write_timeout(Duration::from_secs(25)).await
        });
        let con2 = con.clone();
        lock.with_read(Wait::Forever, |lease| async move {
            queued_tx.send(()).unwrap();
            queued(&con2, name, 1).await;
            let nested = inner.read_timeout(Duration::from_secs(5)).await.unwrap();
            assert_eq!(nested.depth(), 2);
            assert_eq!(Some(nested.fencing_token()), lease.issued_fencing_token());
            nested.release().await.unwrap();
            let e = inner.write().await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Reentrancy);
            assert!(e.to_string().contains("upgrade"), "{e}");
        })
        .await
        .unwrap();
        waiting.await.unwrap().unwrap().release().await.unwrap();

        let inner = lock.clone();
        lock.with_write(Wait::Forever, |_| async move {
            let read = inner.read().await.unwrap();
            assert_eq!(read.depth(), 2);
            read.release().await.unwrap();
            let write = inner.try_write().await.unwrap().expect("re-enters");
            assert_eq!(write.depth(), 2);
            // A nested hold cannot change its mode.
            let e = write.downgrade().await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Reentrancy);
        })
        .await
        .unwrap();
        // `join!` in one task, outside any body: two holders, as two tasks would be.
        let (a, b) = tokio::join!(lock.write(), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            lock.try_write().await
        });
        let a = a.unwrap();
        assert!(
            b.unwrap().is_none(),
            "a concurrent future is another holder"
        );
        a.release().await.unwrap();
    }

    /// A mutex, a semaphore and a read-write lock with one name are three locks.
    async fn a_rw_lock_has_keys_of_its_own(backend: Backend) {
        let client = backend.client();
        let write = client
            .rw_lock("shared-name")
            .unwrap()
            .write()
            .await
            .unwrap();
        let mutex = client
            .mutex("shared-name")
            .unwrap()
            .try_acquire()
            .await
            .unwrap();
        let permit = client
            .semaphore("shared-name", 1)
            .unwrap()
            .try_acquire(1)
            .await
            .unwrap();
        assert!(mutex.is_some() && permit.is_some());
        write.release().await.unwrap();
    }

    /// A dropped guard gives its hold back in the background, which admits the waiter; a
    /// shutdown gives back every hold and tells its holder.
    async fn dropped_guards_and_shutdown_give_holds_back(backend: Backend) {
        let name = "rw-drop";
        let lock = handle(&backend, name);
        let read = lock.read().await.unwrap();
        let writer = handle(&backend, name);
        let waiting =
            tokio::spawn(async move { writer.write_timeout(Duration::from_secs(25)).await });
        queued(&backend.raw().await, name, 1).await;
        drop(read);
        let write = waiting.await.unwrap().expect("admitted after the drop");
        let lease = write.lease();
        let client: Client = backend.client();
        let other = client.rw_lock(name).unwrap();
        let later = tokio::spawn(async move { other.read_timeout(Duration::from_secs(25)).await });
        drop(write);
        let read = later.await.unwrap().unwrap();
        assert!(!lease.is_held());
        let lost = read.lease();
        client.shutdown(Duration::from_secs(5)).await;
        assert_eq!(lost.lost().await.reason(), dlock_core::LostReason::Shutdown);
        let mut con = backend.raw().await;
        assert_eq!(used(&mut con, name).await, 0);
    }
);

// The scripts run twice, as a retried request whose first reply was lost does (their text as
// dlock-core builds it).
const KEY: &str = "t:{retry}:rw";
const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

async fn take(con: &mut Plain, token: &str, weight: u64) -> Vec<i64> {
    redis::Script::new(&Source::SharedAcquire.text())
        .key(KEY)
        .arg(token)
        .arg(weight)
        .arg(WRITER)
        .arg("keep")
        .arg(10_000)
        .arg("")
        .arg("")
        .arg(dlock_core::ext::fence_counter_key("t:", "retry").unwrap())
        .arg("host\x1f1\x1f")
        .invoke_async(con)
        .await
        .unwrap()
}

async fn change(con: &mut Plain, old: &str, new: &str, direction: &str) -> Vec<i64> {
    redis::Script::new(&Source::RwChange.text())
        .key(KEY)
        .arg(old)
        .arg(new)
        .arg(direction)
        .arg(WRITER)
        .arg(10_000)
        .arg(dlock_core::ext::fence_counter_key("t:", "retry").unwrap())
        .invoke_async(con)
        .await
        .unwrap()
}

backend_tests!(
    /// An acquire, a downgrade and an upgrade each run twice: one hold, the same fence.
    async fn retried_requests_take_one_hold(backend: Backend) {
        let mut con = backend.raw().await;
        let first = take(&mut con, A, WRITER).await;
        let again = take(&mut con, A, WRITER).await;
        assert_eq!(first[..2], [1, first[1]]);
        assert_eq!(again[1], first[1], "the same fence");
        let used: u64 = con.hget(KEY, "used").await.unwrap();
        assert_eq!(used, WRITER, "one writer, not two");

        let down = change(&mut con, A, B, "down").await;
        let again = change(&mut con, A, B, "down").await;
        assert_eq!((down[0], again[0], again[1]), (1, 1, down[1]));
        assert!(down[1] > first[1]);
        let used: u64 = con.hget(KEY, "used").await.unwrap();
        assert_eq!(used, 1, "one reader");
        let holders: Vec<String> = con.hkeys(KEY).await.unwrap();
        assert!(holders.contains(&B.to_owned()) && !holders.contains(&A.to_owned()));

        const C: &str = "cccccccccccccccccccccccccccccccc";
        let up = change(&mut con, B, C, "up").await;
        let again = change(&mut con, B, C, "up").await;
        assert_eq!((up[0], again[0], again[1]), (1, 1, up[1]));
        let used: u64 = con.hget(KEY, "used").await.unwrap();
        assert_eq!(used, WRITER);
        // The old token holds nothing any more.
        assert_eq!(change(&mut con, B, A, "down").await, [0, 0, 0]);
    }
);

backend_tests!(
    /// A key at the read-write lock's or the semaphore's place that dlock did not write (a
    /// string, a hash of another program, a newer format) is reported by name as `WrongType`
    /// and left untouched, by acquires and by inspect alike.
    async fn foreign_data_at_a_shared_lock_is_reported_and_untouched(backend: Backend) {
        let client = backend.client();
        let mut con = backend.raw().await;
        let _: () = con.set("dlock:{fx-rw}:rw", "someone else's").await.unwrap();
        let e = client
            .rw_lock("fx-rw")
            .unwrap()
            .try_read()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
        assert!(e.to_string().contains("dlock:{fx-rw}:rw"), "{e}");
        let _: () = con.hset("dlock:{fx-sem}:sem", "field", "x").await.unwrap();
        let sem = client.semaphore("fx-sem", 2).unwrap();
        let e = sem.try_acquire(1).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
        let _: () = con.hset("dlock:{fx-new}:sem", "v", "2").await.unwrap();
        let e = client
            .semaphore("fx-new", 2)
            .unwrap()
            .acquire(1)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("newer dlock"), "{e}");
        let e = client.inspect_rw_lock("fx-rw").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
        let left: String = con.get("dlock:{fx-rw}:rw").await.unwrap();
        assert_eq!(left, "someone else's");
        let field: String = con.hget("dlock:{fx-sem}:sem", "field").await.unwrap();
        assert_eq!(field, "x");
        let exists: bool = con.exists("dlock:{fx-sem}:sem:exp").await.unwrap();
        assert!(!exists, "nothing was written beside it");
    }
);
