//! A lock's loss shows the same everywhere at once: when `lost()` resolves, the lock's
//! cancellation token is already cancelled and `is_lost()` (or the lease's state) already says
//! lost — for every kind that reports a loss: the lease-based holds (mutex guard, semaphore
//! permit, read and write guards, leadership), the `MultiGuard` and the `QuorumGuard`.
//!
//! A race between those signs lasts a few instructions, so waiting for it is luck. Instead the
//! `lost()` under test is awaited with a waker that looks: each time the loss machinery wakes
//! it, the waker checks every sign on the spot — inside the call that wakes it, on the thread
//! and at the point of the code that made the loss known, before that code goes on. A fresh
//! `lost()` that resolves there while the token is live is exactly the bug, found every time
//! it exists, on any machine. After `lost()` returns, the signs are checked again in the same
//! poll.
//!
//! The faults are real: lock keys deleted by another program (the watchdog's renewal finds
//! them gone), and a majority of a quorum's nodes killed (its leases run out unrenewed).
//! `QuorumGuard`s run on independent nodes (`RedisNodes`), the others on both backends.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use dlock_core::{Lease, LeaseState, MutexOptions, QuorumGuard, QuorumMutex};
use dlock_testkit::RedisNodes;
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests, client};

/// One look at a lock's signs of loss: what is wrong, if anything, and whether a fresh
/// `lost()` resolved (so the look saw a loss at all).
struct Seen {
    wrong: Option<String>,
    resolved: bool,
}

type Look = Arc<dyn Fn() -> Seen + Send + Sync>;

/// Whether a cancellation token (taken before the fault) is cancelled.
type Cancelled = Arc<dyn Fn() -> bool + Send + Sync>;

/// `token.is_cancelled()`, for a token of `tokio_util` (which this crate does not name).
macro_rules! cancelled {
    ($token:expr) => {{
        let token = $token;
        Arc::new(move || token.is_cancelled()) as Cancelled
    }};
}

/// The waker that looks before it wakes the task.
struct Probe {
    look: Look,
    wrong: StdMutex<Vec<String>>,
    resolved: AtomicUsize,
    task: StdMutex<Waker>,
}

impl Probe {
    fn look(&self) {
        let seen = (self.look)();
        if seen.resolved {
            self.resolved.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(wrong) = seen.wrong {
            self.wrong.lock().unwrap().push(wrong);
        }
    }
}

impl Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.look();
        let task = self.task.lock().unwrap().clone();
        task.wake();
    }
}

/// What the probing of one `lost()` found.
struct Probed<T> {
    output: T,
    /// Everything a look found wrong.
    wrong: Vec<String>,
    /// Looks that saw a fresh `lost()` resolve (the last one, after `lost()` returned,
    /// included).
    resolved: usize,
}

/// Awaits `lost` with a [`Probe`] as its waker, and looks once more in the poll in which it
/// resolves.
async fn probed<F: Future>(lost: F, look: Look) -> Probed<F::Output> {
    let probe = Arc::new(Probe {
        look,
        wrong: StdMutex::default(),
        resolved: AtomicUsize::new(0),
        task: StdMutex::new(Waker::noop().clone()),
    });
    let waker = Waker::from(probe.clone());
    let mut lost = pin!(lost);
    let output = std::future::poll_fn(|cx| {
        *probe.task.lock().unwrap() = cx.waker().clone();
        match lost.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(output) => {
                probe.look();
                Poll::Ready(output)
            }
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    let wrong = std::mem::take(&mut *probe.wrong.lock().unwrap());
    Probed {
        output,
        wrong,
        resolved: probe.resolved.load(Ordering::SeqCst),
    }
}

/// Whether `future` resolves in one poll. Entered in `handle`: a waker may run where no
/// runtime is current, and `lost()` may arm a timer.
fn resolves_now<F: Future>(handle: &tokio::runtime::Handle, future: F) -> bool {
    let _entered = handle.enter();
    let future = pin!(future);
    future
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

/// The look at a lease-based hold: a fresh `lost()` that resolves finds the token cancelled
/// and the state lost.
fn lease_look(what: &'static str, lease: &Lease, token: &Cancelled) -> Look {
    let (lease, token) = (lease.clone(), token.clone());
    let handle = tokio::runtime::Handle::current();
    Arc::new(move || {
        let resolved = resolves_now(&handle, lease.lost());
        let state = lease.state();
        let wrong = (resolved && (!token() || state.is_held() || lease.is_held())).then(|| {
            format!(
                "{what}: lost() resolves, but the token is cancelled: {}, the state is \
                 {state}, is_held() is {}",
                token(),
                lease.is_held()
            )
        });
        Seen { wrong, resolved }
    })
}

/// Awaits a lease-based hold's `lost()` under a probe and checks what it found.
async fn lease_lost_agrees(what: &'static str, lease: Lease, token: Cancelled) {
    let look = lease_look(what, &lease, &token);
    let found = tokio::time::timeout(Duration::from_secs(10), probed(lease.lost(), look))
        .await
        .unwrap_or_else(|_| panic!("{what}: lost() within 10 s of the fault"));
    assert!(found.wrong.is_empty(), "{:#?}", found.wrong);
    assert!(found.resolved > 0, "{what}: no look saw the loss");
    assert!(
        matches!(lease.state(), LeaseState::Lost(_)),
        "{what}: {}",
        found.output
    );
}

backend_tests!(
    /// Every lease-based kind at once, each with a watchdog lease: its lock key deleted by
    /// another program, the watchdog's next renewal finds it gone.
    async fn a_lease_based_hold_shows_its_loss_everywhere_at_once(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(600))
            .watchdog();
        let mutex = c.mutex_with("ls:m", options.clone()).unwrap();
        let semaphore = c.semaphore_with("ls:s", 2, options.clone()).unwrap();
        let readers = c.rw_lock_with("ls:r", options.clone()).unwrap();
        let writers = c.rw_lock_with("ls:w", options.clone()).unwrap();
        let election = c.election_with("ls:e", options).unwrap();
        let guard = mutex.try_acquire().await.unwrap().expect("free");
        let permit = semaphore.try_acquire(1).await.unwrap().expect("free");
        let read = readers.try_read().await.unwrap().expect("free");
        let write = writers.try_write().await.unwrap().expect("free");
        let leader = election.campaign("me").await.unwrap();
        // Each lock's keys: a shared lock keeps its holders' deadlines in `<key>:exp`.
        let holds = [
            ("mutex guard", guard.lease(), &["dlock:{ls:m}"][..]),
            (
                "semaphore permit",
                permit.lease(),
                &["dlock:{ls:s}:sem", "dlock:{ls:s}:sem:exp"][..],
            ),
            (
                "read guard",
                read.lease(),
                &["dlock:{ls:r}:rw", "dlock:{ls:r}:rw:exp"][..],
            ),
            (
                "write guard",
                write.lease(),
                &["dlock:{ls:w}:rw", "dlock:{ls:w}:rw:exp"][..],
            ),
            ("leadership", leader.lease(), &["dlock:{election:ls:e}"][..]),
        ];
        let tokens: Vec<_> = holds
            .iter()
            .map(|(_, l, _)| cancelled!(l.cancellation_token()))
            .collect();
        let mut con = backend.raw().await;
        for (_, _, keys) in &holds {
            let deleted: usize = con.del(*keys).await.unwrap();
            assert_eq!(deleted, keys.len(), "{keys:?}");
        }
        let each = holds
            .iter()
            .zip(tokens)
            .map(|((what, lease, _), token)| lease_lost_agrees(what, lease.clone(), token));
        futures_util::future::join_all(each).await;
        drop((guard, permit, read, write, leader));
    }

    /// Fixed leases that run out: the first to look at the deadline — the `lost()` under test,
    /// or the task behind the token — declares the loss.
    async fn a_fixed_lease_shows_its_end_everywhere_at_once(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new().ttl(Duration::from_millis(300));
        let mutex = c.mutex_with("ls:fm", options.clone()).unwrap();
        let semaphore = c.semaphore_with("ls:fs", 2, options.clone()).unwrap();
        let readers = c.rw_lock_with("ls:fr", options.clone()).unwrap();
        let writers = c.rw_lock_with("ls:fw", options).unwrap();
        let guard = mutex.try_acquire().await.unwrap().expect("free");
        let permit = semaphore.try_acquire(1).await.unwrap().expect("free");
        let read = readers.try_read().await.unwrap().expect("free");
        let write = writers.try_write().await.unwrap().expect("free");
        let holds = [
            ("mutex guard", guard.lease()),
            ("semaphore permit", permit.lease()),
            ("read guard", read.lease()),
            ("write guard", write.lease()),
        ];
        let each = holds.iter().map(|(what, lease)| {
            lease_lost_agrees(what, lease.clone(), cancelled!(lease.cancellation_token()))
        });
        futures_util::future::join_all(each).await;
        drop((guard, permit, read, write));
    }

    /// A `MultiGuard` is lost with its first lost member: one member's key deleted by another
    /// program. Current-thread: the guard's token must not wait for a task that has not run.
    #[flavor = "current_thread"]
    async fn a_multi_guard_shows_its_loss_everywhere_at_once(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(600))
            .watchdog();
        let multi = c.multi_lock_with(["ls:a", "ls:b"], options).unwrap();
        let guard = Arc::new(multi.acquire().await.unwrap());
        let token = cancelled!(guard.cancellation_token());
        let mut con = backend.raw().await;
        let deleted: usize = con.del("dlock:{ls:b}").await.unwrap();
        assert_eq!(deleted, 1);
        let handle = tokio::runtime::Handle::current();
        let look: Look = {
            let (guard, token) = (guard.clone(), token.clone());
            Arc::new(move || {
                let resolved = resolves_now(&handle, guard.lost());
                let wrong = (resolved && !token())
                    .then(|| "MultiGuard: lost() resolves while its token is live".to_owned());
                Seen { wrong, resolved }
            })
        };
        let found = tokio::time::timeout(Duration::from_secs(10), probed(guard.lost(), look))
            .await
            .expect("lost() within 10 s of the member's deletion");
        assert!(found.wrong.is_empty(), "{:#?}", found.wrong);
        assert!(found.resolved > 0, "no look saw the loss");
        assert!(token(), "{}", found.output);
    }
);

fn nodes(n: usize) -> RedisNodes {
    RedisNodes::start(n).unwrap_or_else(|e| panic!("could not start redis nodes: {e}"))
}

/// A quorum guard of `name` on `servers` with a 300 ms watchdog lease (new nodes count one
/// TTL after their first use: the grant waits for it).
async fn quorum_guard(servers: &RedisNodes, name: &str) -> QuorumGuard {
    let clients = servers.nodes().iter().map(client).collect();
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(300))
        .watchdog();
    let lock = QuorumMutex::new(clients, name, options).unwrap();
    lock.acquire_timeout(Duration::from_secs(10)).await.unwrap()
}

/// Awaits a quorum guard's `lost()` under a probe: a fresh `lost()` that resolves finds the
/// token cancelled and `is_lost()` true.
async fn quorum_lost_agrees(guard: Arc<QuorumGuard>, token: Cancelled) {
    let handle = tokio::runtime::Handle::current();
    let look: Look = {
        let (guard, token) = (guard.clone(), token.clone());
        Arc::new(move || {
            let resolved = resolves_now(&handle, guard.lost());
            let wrong = (resolved && !(token() && guard.is_lost())).then(|| {
                format!(
                    "QuorumGuard: lost() resolves, but the token is cancelled: {}, is_lost() \
                     is {}",
                    token(),
                    guard.is_lost()
                )
            });
            Seen { wrong, resolved }
        })
    };
    let found = tokio::time::timeout(Duration::from_secs(10), probed(guard.lost(), look))
        .await
        .expect("lost() within 10 s of the fault");
    assert!(found.wrong.is_empty(), "{:#?}", found.wrong);
    assert!(found.resolved > 0, "no look saw the loss");
    assert!(token() && guard.is_lost(), "{}", found.output);
}

/// A majority of the nodes killed: the node leases run out unrenewed (`Unreachable`), and
/// the guard is lost with the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_guard_shows_a_lost_majority_everywhere_at_once() {
    let mut servers = nodes(3);
    let guard = Arc::new(quorum_guard(&servers, "ls:q").await);
    let token = cancelled!(guard.cancellation_token());
    servers.nodes_mut()[0].kill();
    servers.nodes_mut()[1].kill();
    quorum_lost_agrees(guard, token).await;
}

/// The lock deleted on a majority of the nodes by another program: the watchdog's renewals
/// find it gone (`Removed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_guard_shows_a_majority_removed_everywhere_at_once() {
    let servers = nodes(3);
    let guard = Arc::new(quorum_guard(&servers, "ls:qd").await);
    let token = cancelled!(guard.cancellation_token());
    for i in guard.nodes().take(2).collect::<Vec<_>>() {
        let mut con = crate::support::raw(&servers.nodes()[i]).await;
        let deleted: usize = con.del("dlock:{ls:qd}").await.unwrap();
        assert_eq!(deleted, 1, "node {i}");
    }
    quorum_lost_agrees(guard, token).await;
}

/// A guard acquired in one runtime and watched in the next (a client outlives runtimes): the
/// task the first runtime ran is gone with it, and `lost()` must still tell the guard's real
/// loss (its node leases, no longer renewed there, run out) — not report one at once, with the
/// token live and `is_lost()` false.
#[test]
fn a_quorum_guard_moved_to_another_runtime_still_shows_its_loss_everywhere_at_once() {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    let servers = nodes(3);
    let first = runtime();
    let guard = first.block_on(quorum_guard(&servers, "ls:qr"));
    drop(first);
    runtime().block_on(async {
        let guard = Arc::new(guard);
        assert!(!guard.is_lost());
        let token = cancelled!(guard.cancellation_token());
        quorum_lost_agrees(guard.clone(), token).await;
        let reason = guard.lost().await.reason();
        assert_ne!(
            reason,
            dlock_core::LostReason::Released,
            "no one released it"
        );
    });
}
