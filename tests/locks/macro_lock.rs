//! `#[distributed_lock]` at run time, against real Redis: mutual exclusion across tasks and
//! processes, busy semantics through the user's error type and through skip, a lost lease that
//! cancels (or only signals) the body, reentrancy of nested annotated calls, the Redis keys that
//! key templates produce, the watchdog that is on by default, the process-wide default
//! client (set in exactly one test: it is global, and every test has its own server), and the
//! other kinds of lock: `mode = "read" | "write"` and `permits = N, of = LIMIT`. All on both
//! backends, but the default client: it can be set once per process, so one backend only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dlock_core::{Client, ErrorKind, FencingToken, HolderInfo, LostReason, distributed_lock};
use redis::AsyncCommands;

use crate::support::{
    Backend, Plain, backend_tests, client, eventually, observe, queue_reaches, redis,
    two_processes_count,
};

/// The error type of the annotated functions: a lock failure or the application's own.
#[derive(Debug)]
enum AppError {
    Lock(dlock_core::Error),
    Declined,
}

impl From<dlock_core::Error> for AppError {
    fn from(e: dlock_core::Error) -> Self {
        Self::Lock(e)
    }
}

impl AppError {
    fn kind(&self) -> Option<ErrorKind> {
        match self {
            Self::Lock(e) => Some(e.kind()),
            Self::Declined => None,
        }
    }
}

/// Shared state that loses updates without mutual exclusion.
#[derive(Default)]
struct Counter {
    value: AtomicU64,
    inside: AtomicU64,
    overlaps: AtomicU64,
}

/// A read-pause-write increment: two overlapping calls lose one update.
#[distributed_lock(key = "counter:{name}", client = client, ttl = "5s", wait = "30s")]
async fn bump(client: &Client, name: &str, counter: &Counter) -> Result<(), AppError> {
    if counter.inside.fetch_add(1, Ordering::SeqCst) != 0 {
        counter.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    let value = counter.value.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1)).await;
    counter.value.store(value + 1, Ordering::SeqCst);
    counter.inside.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

backend_tests!(
    async fn tasks_lose_no_update(backend: Backend) {
        let c = backend.client();
        let counter = Arc::new(Counter::default());
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (c, counter) = (c.clone(), counter.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    bump(&c, "tasks", &counter).await.unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(
            counter.overlaps.load(Ordering::SeqCst),
            0,
            "two bodies ran at once"
        );
        assert_eq!(counter.value.load(Ordering::SeqCst), 200, "lost updates");
        assert_eq!(c.inspect("counter:tasks").await.unwrap(), None, "released");
    }

    /// The worker's `macro-count`: every turn is a call of a `#[distributed_lock]` function.
    async fn processes_lose_no_update(backend: Backend) {
        two_processes_count(&backend, "macro-count", "macro-exclusion", 400).await;
    }
);

#[distributed_lock(key = "busy", client = client, wait = "100ms")]
async fn wait_briefly(client: &Client, ran: &AtomicBool) -> Result<u32, AppError> {
    ran.store(true, Ordering::SeqCst);
    Ok(1)
}

#[distributed_lock(key = "busy", client = client)]
async fn try_once(client: &Client, ran: &AtomicBool, decline: bool) -> Result<u32, AppError> {
    ran.store(true, Ordering::SeqCst);
    if decline {
        return Err(AppError::Declined);
    }
    Ok(2)
}

#[distributed_lock(key = "busy", client = client, on_busy = "skip")]
async fn skip_once(client: &Client) -> Result<Option<u32>, AppError> {
    Ok(Some(3))
}

#[distributed_lock(key = "busy", client = client, on_busy = "skip", wait = "50ms")]
async fn skip_result(client: &Client) -> Result<Option<u32>, AppError> {
    Ok(Some(4))
}

backend_tests!(
    async fn a_busy_lock_reaches_the_caller_through_the_return_type(backend: Backend) {
        let c = backend.client();
        let ran = AtomicBool::new(false);
        // Free: every form runs its body, and the application's own error passes through.
        assert_eq!(try_once(&c, &ran, false).await.unwrap(), 2);
        assert!(matches!(
            try_once(&c, &ran, true).await,
            Err(AppError::Declined)
        ));
        assert_eq!(skip_once(&c).await.unwrap(), Some(3));
        assert_eq!(skip_result(&c).await.unwrap(), Some(4));

        let holder = backend.client().mutex("busy").unwrap();
        let guard = holder.try_acquire().await.unwrap().expect("free");
        ran.store(false, Ordering::SeqCst);
        let err = wait_briefly(&c, &ran).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Busy), "{err:?}");
        let err = try_once(&c, &ran, false).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Busy), "{err:?}");
        // The default tries once: the message says so and how to wait instead.
        let AppError::Lock(busy) = &err else {
            panic!("{err:?}")
        };
        assert!(busy.to_string().contains("tried once"), "{busy}");
        assert!(busy.to_string().contains("wait = \"5s\""), "{busy}");
        assert!(
            !ran.load(Ordering::SeqCst),
            "a busy lock must not run the body"
        );
        assert_eq!(skip_once(&c).await.unwrap(), None);
        assert_eq!(skip_result(&c).await.unwrap(), None);
        guard.release().await.unwrap();
        assert_eq!(wait_briefly(&c, &ran).await.unwrap(), 1);
    }
);

#[distributed_lock(key = "lost", client = client, ttl = "600ms")]
async fn long_work(client: &Client, finished: &AtomicBool) -> Result<(), AppError> {
    tokio::time::sleep(Duration::from_secs(30)).await;
    finished.store(true, Ordering::SeqCst);
    Ok(())
}

backend_tests!(
    async fn a_lost_lease_cancels_the_body(backend: Backend) {
        let c = backend.client();
        let finished = AtomicBool::new(false);
        let mut con = backend.raw().await;
        let remove = async {
            delete_once_held(&mut con, "dlock:{lost}").await;
        };
        let work = tokio::time::timeout(Duration::from_secs(10), long_work(&c, &finished));
        let (result, ()) = tokio::join!(work, remove);
        let err = result
            .expect("cancelled well before the body's 30 s")
            .unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::LeaseLost), "{err:?}");
        assert!(
            !finished.load(Ordering::SeqCst),
            "the body must have been dropped"
        );
    }
);

#[distributed_lock(key = "signal", client = client, ttl = "600ms", on_lost = "signal", guard = lease)]
async fn watchful_work(client: &Client) -> Result<LostReason, AppError> {
    // The body outlives the loss and decides itself.
    Ok(lease.lost().await.reason())
}

backend_tests!(
    async fn signal_mode_lets_the_body_react(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let remove = async {
            delete_once_held(&mut con, "dlock:{signal}").await;
        };
        let work = tokio::time::timeout(Duration::from_secs(10), watchful_work(&c));
        let (reason, ()) = tokio::join!(work, remove);
        assert_eq!(reason.unwrap().unwrap(), LostReason::Removed);
    }
);

#[distributed_lock(key = "short-lease", client = client, ttl = "300ms", guard = lease)]
async fn outlive_the_ttl(client: &Client) -> Result<bool, AppError> {
    // Several leases long: the watchdog (on by default) renews it meanwhile.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    Ok(lease.is_held())
}

backend_tests!(
    async fn the_watchdog_is_on_by_default(backend: Backend) {
        let c = backend.client();
        assert!(
            outlive_the_ttl(&c).await.unwrap(),
            "the lease must still stand"
        );
    }
);

#[distributed_lock(key = "account:{id}", client = client, guard = outer)]
async fn transfer(client: &Client, id: u64) -> Result<(FencingToken, FencingToken), AppError> {
    let inner = audit(client, id).await?;
    Ok((outer.fencing_token().await.unwrap(), inner))
}

#[distributed_lock(key = "account:{id}", client = client, wait = "forever", guard = inner)]
async fn audit(client: &Client, id: u64) -> Result<FencingToken, AppError> {
    Ok(inner.fencing_token().await.unwrap())
}

#[distributed_lock(key = "account:{id}", client = client, reentrant = false)]
async fn strict_audit(client: &Client, id: u64) -> Result<(), AppError> {
    Ok(())
}

#[distributed_lock(key = "account:{id}", client = client)]
async fn transfer_strictly(client: &Client, id: u64) -> Result<(), AppError> {
    strict_audit(client, id).await
}

backend_tests!(
    async fn nested_calls_on_the_same_key_reenter(backend: Backend) {
        let c = backend.client();
        let (outer, inner) = tokio::time::timeout(Duration::from_secs(10), transfer(&c, 7))
            .await
            .expect("a nested call must re-enter, not wait for itself")
            .unwrap();
        assert_eq!(outer, inner, "one acquisition, one fencing token");
        assert_eq!(
            c.inspect("account:7").await.unwrap(),
            None,
            "released by the outer call"
        );

        let err = tokio::time::timeout(Duration::from_secs(10), transfer_strictly(&c, 8))
            .await
            .expect("a non-reentrant nested call reports instead of waiting")
            .unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Reentrancy), "{err:?}");
    }
);

/// An order as the application has it: the key uses its fields.
struct Order {
    id: u64,
}

struct Shop {
    locks: Client,
    region: String,
}

impl Shop {
    /// Returns what `inspect` saw while the lock was held, and the fencing token.
    #[distributed_lock(key = "order:{self.region}:{order.id}", client = self.locks, guard = lease)]
    async fn ship(&self, order: &Order) -> Result<(Option<HolderInfo>, FencingToken), AppError> {
        let name = format!("order:{}:{}", self.region, order.id);
        // Ask for the fence first: inspect shows a fence once one was issued.
        let fence = lease.fencing_token().await?;
        Ok((self.locks.inspect(&name).await?, fence))
    }
}

#[distributed_lock(key = "order:{order_id}", client = client, label = "pay handler")]
async fn pay(client: &Client, order_id: u64, con: &mut Plain) -> Result<bool, AppError> {
    // The Redis key itself, as an operator would look for it.
    let exists: bool = con
        .exists(format!("dlock:{{order:{order_id}}}"))
        .await
        .unwrap();
    Ok(exists && client.inspect("order:42").await?.is_some())
}

backend_tests!(
    async fn key_templates_produce_the_expected_redis_keys(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        assert!(
            pay(&c, 42, &mut con).await.unwrap(),
            "held as `dlock:{{order:42}}`"
        );
        let holder = backend.client().inspect("order:42").await.unwrap();
        assert_eq!(holder, None, "released after the call");

        let shop = Shop {
            locks: backend.client(),
            region: "eu-west".into(),
        };
        let (info, fence) = shop.ship(&Order { id: 9 }).await.unwrap();
        let info = info.expect("held as `order:eu-west:9` while the body ran");
        assert_eq!(info.fencing_token, Some(fence));
        assert_eq!(info.pid, std::process::id());
        assert_eq!(
            info.label.as_deref(),
            Some("ship"),
            "the label defaults to the fn name"
        );
        let exists: bool = con.exists("dlock:{order:eu-west:9}").await.unwrap();
        assert!(!exists, "released after the call");
    }
);

#[distributed_lock(key = "defaulted:{n}")]
async fn with_the_default_client(n: u32) -> Result<u32, AppError> {
    Ok(n * 2)
}

/// The only test that sets the process-wide default client, which can be set once per process:
/// on one backend only.
#[tokio::test]
async fn the_default_client_is_used_once_set() {
    let err = with_the_default_client(1).await.unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::InvalidInput), "{err:?}");
    let AppError::Lock(e) = err else {
        unreachable!()
    };
    assert!(e.to_string().contains("set_default_client"), "{e}");

    let server = redis();
    dlock_core::set_default_client(client(&server)).unwrap();
    assert_eq!(with_the_default_client(21).await.unwrap(), 42);
    let again = dlock_core::set_default_client(client(&server)).unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidInput);
}

/// Deletes `key` as soon as the lock it holds is taken (behind the work's back).
async fn delete_once_held(con: &mut Plain, key: &str) {
    crate::support::eventually(Duration::from_secs(10), "the lock is taken", || {
        let mut con = con.clone();
        async move { con.exists::<_, bool>(key).await.ok()?.then_some(()) }
    })
    .await;
    let deleted: usize = con.del(key).await.unwrap();
    assert_eq!(deleted, 1);
}

backend_tests!(
    async fn a_skip_function_reports_an_unreachable_redis_instead_of_skipping(
        mut backend: Backend,
    ) {
        let c = backend
            .builder()
            .command_timeout(Duration::from_millis(300))
            .connect_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        backend.kill("dlock:{busy}");
        // "Another replica has it" is `Ok(None)`; "Redis is down" must not look the same.
        let err = skip_once(&c).await.unwrap_err();
        assert!(
            matches!(err.kind(), Some(ErrorKind::Connection | ErrorKind::Timeout)),
            "{err:?}"
        );
    }
);

/// Where the bodies of the read-write and semaphore tests stay: each counts itself in and out
/// with the observer (outside the lock, one script per change) and stays until the test opens
/// the gate, so that who holds together is decided by the lock alone, not by timing.
struct Room {
    con: Plain,
    name: &'static str,
    gate: tokio::sync::watch::Receiver<bool>,
}

impl Room {
    /// An empty room called `name` on `backend`'s Redis, and its gate, closed.
    async fn new(
        backend: &Backend,
        name: &'static str,
    ) -> (Arc<Room>, tokio::sync::watch::Sender<bool>) {
        let (gate, closed) = tokio::sync::watch::channel(false);
        let con = backend.raw().await;
        (
            Arc::new(Room {
                con,
                name,
                gate: closed,
            }),
            gate,
        )
    }

    /// Enters as `role` (`"r"` or `"w"`), waits for the gate, leaves; returns who was inside
    /// right after it entered (readers, writers), itself included.
    async fn stay(&self, role: &str) -> (i64, i64) {
        let mut con = self.con.clone();
        let inside = observe(&mut con, self.name, role, 1).await;
        self.gate.clone().wait_for(|open| *open).await.unwrap();
        observe(&mut con, self.name, role, -1).await;
        inside
    }

    /// Waits until exactly `inside` (readers, writers) are in the room.
    async fn holds(&self, inside: (i64, i64)) {
        let what = format!("{inside:?} inside");
        eventually(Duration::from_secs(10), &what, || async {
            let mut con = self.con.clone();
            (observe(&mut con, self.name, "r", 0).await == inside).then_some(())
        })
        .await;
    }
}

#[distributed_lock(key = "report:{room.name}", client = client, mode = "read", wait = "30s")]
async fn read_report(client: &Client, room: &Room) -> Result<(i64, i64), AppError> {
    Ok(room.stay("r").await)
}

#[distributed_lock(key = "report:{room.name}", client = client, mode = "write", wait = "30s")]
async fn write_report(client: &Client, room: &Room) -> Result<(i64, i64), AppError> {
    Ok(room.stay("w").await)
}

#[distributed_lock(key = "export:{room.name}", client = client, permits = 1, of = 2, wait = "30s")]
async fn export(client: &Client, room: &Room) -> Result<(i64, i64), AppError> {
    Ok(room.stay("r").await)
}

/// Calls of the annotated functions over a [`Room`], each in a task of its own.
type Calls = Vec<tokio::task::JoinHandle<Result<(i64, i64), AppError>>>;

/// Starts `call(client, room)` in a task of its own.
macro_rules! spawn_call {
    ($call:ident, $client:expr, $room:expr) => {{
        let (client, room) = ($client.clone(), $room.clone());
        tokio::spawn(async move { $call(&client, &room).await })
    }};
}

/// What each finished call saw on entry.
async fn entries(calls: Calls) -> Vec<(i64, i64)> {
    let mut seen = Vec::new();
    for call in calls {
        seen.push(call.await.unwrap().unwrap());
    }
    seen
}

backend_tests!(
    /// Two `mode = "read"` calls hold together; a `mode = "write"` call waits for both, and
    /// reads wait for it: the observer never counts a writer beside anyone.
    async fn read_calls_share_the_lock_and_a_write_call_excludes_them(backend: Backend) {
        let c = backend.client();
        let (room, gate) = Room::new(&backend, "rw-macro").await;
        let con = &room.con;
        let queue = "dlock:{report:rw-macro}:rw:queue";

        // Each read stays until the gate opens: had the second waited for the first, the room
        // would never hold two.
        let reads: Calls = vec![
            spawn_call!(read_report, c, room),
            spawn_call!(read_report, c, room),
        ];
        room.holds((2, 0)).await;
        let write: Calls = vec![spawn_call!(write_report, c, room)];
        queue_reaches(con, queue, 1).await;
        room.holds((2, 0)).await;
        gate.send_replace(true);
        for (r, w) in entries(reads).await {
            assert!(
                w == 0 && (1..=2).contains(&r),
                "a read entered beside {w} writers"
            );
        }
        assert_eq!(
            entries(write).await,
            vec![(0, 1)],
            "the write entered beside others"
        );

        // Now the write holds first: reads queue behind it.
        gate.send_replace(false);
        let write: Calls = vec![spawn_call!(write_report, c, room)];
        room.holds((0, 1)).await;
        let reads: Calls = vec![
            spawn_call!(read_report, c, room),
            spawn_call!(read_report, c, room),
        ];
        queue_reaches(con, queue, 2).await;
        room.holds((0, 1)).await;
        gate.send_replace(true);
        assert_eq!(entries(write).await, vec![(0, 1)]);
        for (r, w) in entries(reads).await {
            assert!(
                w == 0 && (1..=2).contains(&r),
                "a read entered beside {w} writers"
            );
        }
        let free = c
            .rw_lock("report:rw-macro")
            .unwrap()
            .try_write()
            .await
            .unwrap();
        assert!(free.is_some(), "every hold given back");
    }

    /// `permits = 1, of = 2`: of 4 concurrent calls, 2 hold at once and 2 queue until one
    /// leaves.
    async fn permit_calls_hold_at_most_the_limit_at_once(backend: Backend) {
        let c = backend.client();
        let (room, gate) = Room::new(&backend, "sem-macro").await;

        let calls: Calls = (0..4).map(|_| spawn_call!(export, c, room)).collect();
        room.holds((2, 0)).await;
        queue_reaches(&room.con, "dlock:{export:sem-macro}:sem:queue", 2).await;
        room.holds((2, 0)).await;
        gate.send_replace(true);
        let seen = entries(calls).await;
        assert!(
            seen.iter().all(|&(r, _)| (1..=2).contains(&r)),
            "more than 2 inside: {seen:?}"
        );
        let free = c
            .semaphore("export:sem-macro", 2)
            .unwrap()
            .try_acquire(2)
            .await
            .unwrap();
        assert!(free.is_some(), "every permit given back");
    }
);
