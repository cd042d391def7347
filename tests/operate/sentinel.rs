//! A client built with `Client::sentinel_builder` follows a Sentinel failover. Sentinel only
//! (not `backend_tests!`): a failover is what these tests are about, and only a master watched
//! by sentinels fails over this way — a single server never does, and a cluster promotes its
//! replicas by itself, reached through the cluster client instead.
//!
//! The failover test keeps a counter in a separate plain Redis (the "store", not part of the
//! failover) that checks fences the way a real storage would: each read and each write presents
//! the holder's fence, and the store refuses one below the highest fence it has seen. So a
//! holder whose lock did not survive the failover cannot overwrite its successor's work, and
//! whatever the lock lost is visible in the store's accept log.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dlock_core::{Client, DEFAULT_COMMAND_TIMEOUT, ErrorKind, MutexOptions};
use dlock_testkit::{RedisReplicaSet, RedisSentinels, RedisServer};
use redis::aio::MultiplexedConnection;

/// The store's fenced read and write, in one script so that each check is atomic.
///
/// KEYS[1] the counter, KEYS[2] the highest fence seen, KEYS[3] the accept log (fences of the
/// accepted writes, in order). ARGV[1] the fence; ARGV[2] "read", or the value to write.
/// Returns the counter (read), 1 (write accepted) or -1 (refused: a higher fence was seen).
const STORE: &str = r"
local fence = tonumber(ARGV[1])
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if fence < seen then return -1 end
redis.call('SET', KEYS[2], ARGV[1])
if ARGV[2] == 'read' then return tonumber(redis.call('GET', KEYS[1]) or '0') end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[1])
return 1
";

#[derive(Clone)]
struct Store {
    con: MultiplexedConnection,
    script: Arc<redis::Script>,
}

impl Store {
    async fn open(server: &RedisServer) -> Self {
        let con = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Self {
            con,
            script: Arc::new(redis::Script::new(STORE)),
        }
    }

    async fn call(&self, fence: u64, arg: &str) -> i64 {
        let mut con = self.con.clone();
        self.script
            .key("counter")
            .key("seen")
            .key("log")
            .arg(fence)
            .arg(arg)
            .invoke_async(&mut con)
            .await
            .unwrap()
    }

    /// The counter, or `None` when the store refuses the fence.
    async fn read(&self, fence: u64) -> Option<i64> {
        Some(self.call(fence, "read").await).filter(|v| *v >= 0)
    }

    async fn write(&self, fence: u64, value: i64) -> bool {
        self.call(fence, &value.to_string()).await == 1
    }

    async fn counter(&self) -> i64 {
        let mut con = self.con.clone();
        redis::cmd("GET")
            .arg("counter")
            .query_async::<Option<i64>>(&mut con)
            .await
            .unwrap()
            .unwrap_or(0)
    }

    async fn accepted(&self) -> Vec<u64> {
        let mut con = self.con.clone();
        redis::cmd("LRANGE")
            .arg("log")
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .unwrap()
    }
}

/// What the workers saw.
#[derive(Default)]
struct Tally {
    accepted: AtomicU64,
    refused: AtomicU64,
    acquire_errors: AtomicU64,
    /// Sections whose lease did not survive: the release found it gone, or `lost()` resolved.
    leases_lost: AtomicU64,
    /// Sections whose write was refused and whose holder was not told its lease was gone.
    untold: AtomicU64,
    /// Releases that failed (they met the failover).
    releases_failed: AtomicU64,
    /// The first acquire error, for the report.
    first_error: std::sync::Mutex<Option<String>>,
    /// Milliseconds from the master's death to the first successful acquire called after it
    /// (0: none yet).
    first_acquire_after_kill_ms: AtomicU64,
}

/// A locked increment of the store's counter, over and over until `stop`.
async fn worker(
    client: Client,
    store: Store,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    killed_at: Arc<std::sync::Mutex<Option<Instant>>>,
) {
    let lock = client
        .mutex_with("counter", MutexOptions::new().watchdog())
        .unwrap();
    while !stop.load(Ordering::Relaxed) {
        // Only an acquire called after the master died is known to be served by the new one.
        let called_after_kill = *killed_at.lock().unwrap();
        let guard = match lock.acquire_timeout(Duration::from_secs(20)).await {
            Ok(guard) => guard,
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::Connection | ErrorKind::Timeout),
                    "only the failover may fail an acquire: {e}"
                );
                tally.acquire_errors.fetch_add(1, Ordering::Relaxed);
                tally
                    .first_error
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| e.to_string());
                continue;
            }
        };
        if let Some(killed) = called_after_kill {
            let ms = u64::try_from(killed.elapsed().as_millis()).unwrap().max(1);
            let _ = tally.first_acquire_after_kill_ms.compare_exchange(
                0,
                ms,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        let lease = guard.lease();
        let Ok(fence) = guard.fencing_token().await else {
            tally.acquire_errors.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let fence = fence.get();
        let written = match store.read(fence).await {
            Some(value) => {
                // The work under the lock: long enough that the master dies under a holder.
                tokio::time::sleep(Duration::from_millis(5)).await;
                store.write(fence, value + 1).await
            }
            None => false,
        };
        // Told before the release (the watchdog or `lost()`), or by the release.
        let lost_while_held = !lease.is_held();
        let released = guard.release().await;
        let told = lost_while_held || matches!(&released, Ok(outcome) if !outcome.was_held());
        if released.is_err() {
            // The release met the failover; it is retried in the background on the new master.
            tally.releases_failed.fetch_add(1, Ordering::Relaxed);
        }
        if written {
            tally.accepted.fetch_add(1, Ordering::Relaxed);
        } else {
            tally.refused.fetch_add(1, Ordering::Relaxed);
            // Refused: a holder with a higher fence came meanwhile, so this lease was gone. A
            // release that answered "held" would be a lie.
            if !told && released.is_ok() {
                tally.untold.fetch_add(1, Ordering::Relaxed);
            }
        }
        if told {
            tally.leases_lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Polls `tally.accepted` until it reaches `target` (the workers' progress), failing after
/// `limit`.
async fn until_accepted(tally: &Tally, target: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while tally.accepted.load(Ordering::Relaxed) < target {
        assert!(
            Instant::now() < deadline,
            "the workers made no progress: {} writes accepted, {target} expected",
            tally.accepted.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The failover figures, for the report and BENCHMARKS.md, "Failover" (not asserted: no timing
/// assertions in tests).
#[allow(clippy::print_stderr)]
fn report(line: &str) {
    eprintln!("sentinel failover: {line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_follows_a_failover_and_fences_keep_the_store_consistent() {
    let mut set = RedisReplicaSet::start(2).unwrap();
    let sentinels = RedisSentinels::start(&set).unwrap();
    let store_server = RedisServer::start().unwrap();
    let store = Store::open(&store_server).await;
    // Two clients: two connections, as two processes would have.
    let clients = [
        Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
            .connect()
            .await
            .unwrap(),
        Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
            .connect()
            .await
            .unwrap(),
    ];
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let killed_at = Arc::new(std::sync::Mutex::new(None));
    let workers: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn(worker(
                clients[i % 2].clone(),
                store.clone(),
                tally.clone(),
                stop.clone(),
                killed_at.clone(),
            ))
        })
        .collect();

    // Locks held and waited for: six workers contend all the time.
    until_accepted(&tally, 40, Duration::from_secs(30)).await;
    let old = set.master().port();
    *killed_at.lock().unwrap() = Some(Instant::now());
    set.kill_master();
    let killed = Instant::now();
    let new = tokio::task::block_in_place(|| sentinels.wait_failover(old)).unwrap();
    let failover_ms = killed.elapsed().as_millis();
    assert!(set.replica_index(new).is_some());

    // The client follows: acquires succeed on the new master.
    let before = tally.accepted.load(Ordering::Relaxed);
    until_accepted(&tally, before + 40, Duration::from_secs(60)).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(60), worker)
            .await
            .expect("every worker ends: no waiter hangs across the failover")
            .unwrap();
    }

    let accepted = store.accepted().await;
    assert_eq!(
        store.counter().await,
        i64::try_from(accepted.len()).unwrap(),
        "no lost update: the counter counts the accepted writes"
    );
    assert_eq!(
        accepted.len() as u64,
        tally.accepted.load(Ordering::Relaxed)
    );
    assert!(
        accepted.windows(2).all(|w| w[0] < w[1]),
        "fences strictly increase in the store's accept order: {accepted:?}"
    );
    assert_eq!(
        tally.untold.load(Ordering::Relaxed),
        0,
        "a holder whose write was refused was told its lease was gone"
    );
    report(&format!(
        "sentinels switched {failover_ms} ms after the master died; first acquire after the \
         kill: {} ms; leases lost: {}; refused writes: {}; acquires failed during the failover: \
         {}; releases that met the failover: {}; writes accepted: {}",
        tally.first_acquire_after_kill_ms.load(Ordering::Relaxed),
        tally.leases_lost.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
        tally.acquire_errors.load(Ordering::Relaxed),
        tally.releases_failed.load(Ordering::Relaxed),
        accepted.len(),
    ));
    report(&format!(
        "first acquire error: {:?}",
        tally.first_error.lock().unwrap()
    ));
}

#[tokio::test]
async fn an_unknown_master_name_is_a_clear_error() {
    let set = RedisReplicaSet::start(1).unwrap();
    let sentinels = RedisSentinels::start_with(&set, 1).unwrap();
    let error = Client::sentinel_builder("no-such-master", sentinels.urls())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    let message = error.to_string();
    assert!(message.contains("`no-such-master`"), "{message}");
    let addr = sentinels.urls()[0].clone();
    let addr = addr.trim_start_matches("redis://").trim_end_matches('/');
    assert!(
        message.contains(addr),
        "names the sentinel {addr}: {message}"
    );
}

#[tokio::test]
async fn all_sentinels_down_is_an_error_within_the_connect_timeout() {
    let set = RedisReplicaSet::start(1).unwrap();
    let mut sentinels = RedisSentinels::start(&set).unwrap();
    let urls = sentinels.urls();
    for index in 0..3 {
        sentinels.kill(index);
    }
    let timeout = Duration::from_secs(1);
    let started = Instant::now();
    let error = tokio::time::timeout(
        timeout * 3,
        Client::sentinel_builder(sentinels.master_name(), urls.clone())
            .node_password("never-printed")
            .connect_timeout(timeout)
            .connect(),
    )
    .await
    .expect("no hang")
    .unwrap_err();
    assert!(started.elapsed() < timeout * 3);
    assert_eq!(error.kind(), ErrorKind::Connection, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("`dlock`"),
        "names the master name: {message}"
    );
    for url in &urls {
        let addr = url.trim_start_matches("redis://").trim_end_matches('/');
        assert!(message.contains(addr), "names sentinel {addr}: {message}");
    }
    assert!(!message.contains("never-printed"));
}

#[tokio::test]
async fn sentinel_settings_on_another_client_are_refused() {
    let error = Client::builder("redis://127.0.0.1:1/")
        .node_password("secret")
        .build()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("node_password"), "{error}");
    let error = Client::sentinel_builder("", ["redis://127.0.0.1:1/"])
        .build()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let builder = Client::sentinel_builder("m", ["redis://127.0.0.1:1/"]).node_password("hunter2");
    assert!(!format!("{builder:?}").contains("hunter2"));
}

/// Stops replication for good: the replicas are stopped and the master drops their links
/// (bytes already sent would still reach a stopped replica through its socket once it resumes),
/// so what the master writes next stays on the master alone.
fn stop_replication(set: &RedisReplicaSet) {
    set.pause_replica(0).unwrap();
    set.pause_replica(1).unwrap();
    let mut master = set.master().connection().unwrap();
    let dropped: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut master)
        .unwrap();
    assert_eq!(dropped, 2);
}

/// Kills the master, lets the replicas run again and waits for the sentinels to promote one;
/// asserts that `key`, if given, did not survive.
pub(crate) fn lose_the_master(
    set: &mut RedisReplicaSet,
    sentinels: &RedisSentinels,
    key: Option<&str>,
) {
    let old = set.master().port();
    set.kill_master();
    set.resume_replica(0).unwrap();
    set.resume_replica(1).unwrap();
    let new = tokio::task::block_in_place(|| sentinels.wait_failover(old)).unwrap();
    let promoted = &set.replicas()[set.replica_index(new).unwrap()];
    if let Some(key) = key {
        let held: bool = redis::cmd("EXISTS")
            .arg(key)
            .query(&mut promoted.connection().unwrap())
            .unwrap();
        assert!(!held, "{key} was not replicated");
    }
}

/// A client of the sentinels' master with `command_timeout`.
async fn sentinel_client(sentinels: &RedisSentinels, command_timeout: Duration) -> Client {
    Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
        .command_timeout(command_timeout)
        .connect()
        .await
        .unwrap()
}

/// A lock granted while no replica received anything is lost with the master: the watchdog
/// finds it gone on the promoted replica and says so, and a holder on the new master gets a
/// higher fence although the counter's latest values were lost too — both from the fenced
/// acquire's own round trip (`INCR`, checked against `TIME`) and from a script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_with_the_old_master_is_reported_and_fences_still_increase() {
    let mut set = RedisReplicaSet::start(2).unwrap();
    let sentinels = RedisSentinels::start(&set).unwrap();
    let client = sentinel_client(&sentinels, DEFAULT_COMMAND_TIMEOUT).await;
    let other = sentinel_client(&sentinels, DEFAULT_COMMAND_TIMEOUT).await;
    let options = MutexOptions::new().ttl(Duration::from_secs(3)).watchdog();
    let fenced = client.mutex_with("lost", options.clone().fenced()).unwrap();
    // Fences issued and replicated: every replica has the slot's counter.
    for _ in 0..2 {
        let warm = fenced.try_acquire().await.unwrap().expect("free");
        warm.release().await.unwrap();
    }
    tokio::task::block_in_place(|| set.wait_synced()).unwrap();

    stop_replication(&set);
    let guard = fenced.try_acquire().await.unwrap().expect("free");
    let lost_fence = guard.issued_fencing_token().unwrap().get();
    lose_the_master(&mut set, &sentinels, Some("dlock:{lost}"));

    let lost = tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .expect("the watchdog reports the lease lost on the new master");
    report(&format!("lease lost with the old master: {lost}"));

    let first = other
        .mutex_with("lost", options.clone().fenced())
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free on the new master");
    let fast = first.issued_fencing_token().unwrap().get();
    assert!(
        fast > lost_fence,
        "the fenced acquire's fence on the new master ({fast}) exceeds the one lost with the \
         old ({lost_fence})"
    );
    first.release().await.unwrap();
    let second = other.mutex_with("lost", options).unwrap();
    let second = second.try_acquire().await.unwrap().expect("free");
    let on_demand = second.fencing_token().await.unwrap().get();
    assert!(on_demand > fast, "{on_demand} > {fast}");
}

/// A waiter queued on the old master whose entry, and the lock it waited for, were lost with it
/// asks the new master as soon as the client follows, instead of napping for the lease it saw.
/// A command timeout longer than the failover (about 2.3 s here): the waiter's next attempt
/// waits for the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_during_the_failover_acquires_on_the_new_master() {
    waiter_across_a_failover(Duration::from_secs(5)).await;
}

/// The same with the default command timeout (2 s), shorter than the failover: the waiter's
/// attempts meet the dead master and find no new one within the command timeout, and it rides
/// that out to its own deadline (it used to fail at once: "no master … within 2s").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_rides_out_a_failover_longer_than_its_command_timeout() {
    waiter_across_a_failover(DEFAULT_COMMAND_TIMEOUT).await;
}

async fn waiter_across_a_failover(command_timeout: Duration) {
    let mut set = RedisReplicaSet::start(2).unwrap();
    let sentinels = RedisSentinels::start(&set).unwrap();
    let holder = sentinel_client(&sentinels, DEFAULT_COMMAND_TIMEOUT).await;
    let waiting = sentinel_client(&sentinels, command_timeout).await;
    let lease = Duration::from_secs(30);
    let options = MutexOptions::new().ttl(lease).watchdog();
    let lock = holder.mutex_with("queued", options.clone()).unwrap();
    let warm = lock.try_acquire().await.unwrap().expect("free");
    warm.release().await.unwrap();
    tokio::task::block_in_place(|| set.wait_synced()).unwrap();

    stop_replication(&set);
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let waiter_lock = waiting.mutex_with("queued", options).unwrap();
    let waiter = tokio::spawn(async move {
        let acquired = waiter_lock.acquire_timeout(lease * 2).await;
        (acquired, Instant::now())
    });
    // Queued on the old master before it dies.
    let mut master = set.master().connection().unwrap();
    crate::support::eventually(Duration::from_secs(10), "the waiter is queued", || {
        let queued: i64 = redis::cmd("LLEN")
            .arg("dlock:{queued}:queue")
            .query(&mut master)
            .unwrap();
        std::future::ready((queued == 1).then_some(()))
    })
    .await;
    let killed = Instant::now();
    // (The key may be the waiter's already when the harness looks: no check of it here.)
    lose_the_master(&mut set, &sentinels, None);

    let (acquired, at) = tokio::time::timeout(lease * 3, waiter)
        .await
        .unwrap()
        .unwrap();
    let taken = acquired.expect("the waiter acquires on the new master");
    let after = at - killed;
    report(&format!(
        "a waiter acquired on the new master {after:?} after the kill"
    ));
    // Without being woken it would nap for the lease it saw (30 s) before asking again.
    assert!(after < lease / 2, "{after:?}");
    // The old holder learns that its lease did not survive.
    let lost = tokio::time::timeout(lease, guard.lost())
        .await
        .expect("the holder is told");
    report(&format!("the old holder: {lost}"));
    taken.release().await.unwrap();
}

/// The data nodes' password is given apart from the sentinels' URLs, and a missing one is
/// named in the error rather than printed.
#[tokio::test]
async fn a_password_protected_master_is_reached_with_node_password() {
    let options = dlock_testkit::ServerOptions::new().arg("requirepass", "s3cret-data");
    let set = RedisReplicaSet::start_with(1, options).unwrap();
    let sentinels = RedisSentinels::start_with(&set, 1).unwrap();
    let client = Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
        .node_password("s3cret-data")
        .connect()
        .await
        .unwrap();
    let guard = client.mutex("pw").unwrap().try_acquire().await.unwrap();
    assert!(guard.expect("free").release().await.unwrap().was_held());

    let error = Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
        .connect()
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("cannot be asked"), "{message}");
    assert!(!message.contains("s3cret-data"), "{message}");
    // A missing or wrong password is named as such (it was a Connection error).
    assert_eq!(
        error.kind(),
        dlock_core::ErrorKind::Authentication,
        "{message}"
    );
    assert!(message.contains("node_password"), "{message}");
    let error = Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
        .node_password("wrong-data")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        dlock_core::ErrorKind::Authentication,
        "{error}"
    );
}

/// A planned switch (`SENTINEL FAILOVER`, the old master demoted to a replica, nothing lost):
/// the client moves on the sentinels' `+switch-master` or the demoted master's `READONLY`, and
/// the lock held across the switch is still held (and released) on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_switch_keeps_the_lock_and_moves_the_client() {
    let set = RedisReplicaSet::start(2).unwrap();
    let sentinels = RedisSentinels::start(&set).unwrap();
    let client = sentinel_client(&sentinels, DEFAULT_COMMAND_TIMEOUT).await;
    let lock = client
        .mutex_with("planned", MutexOptions::new().watchdog().fenced())
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let before = guard.issued_fencing_token().unwrap().get();
    tokio::task::block_in_place(|| set.wait_synced()).unwrap();

    let old = set.master().port();
    let mut sentinel = redis::Client::open(sentinels.urls()[0].as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let () = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(sentinels.master_name())
        .query(&mut sentinel)
        .unwrap();
    let new = tokio::task::block_in_place(|| sentinels.wait_failover(old)).unwrap();
    assert_ne!(new, old);

    // The client writes to the new master (a write to the demoted one would be refused).
    let next = client.mutex("planned:after").unwrap();
    let taken = crate::support::eventually(
        Duration::from_secs(20),
        "an acquire on the new master",
        || async { next.try_acquire().await.ok().flatten() },
    )
    .await;
    taken.release().await.unwrap();
    assert!(
        guard.release().await.unwrap().was_held(),
        "the lock held across a planned switch is still held"
    );
    let again = lock.try_acquire().await.unwrap().expect("free");
    assert!(again.issued_fencing_token().unwrap().get() > before);
}

/// Shutting a Sentinel client down releases its locks on the master like any client's.
#[tokio::test]
async fn a_sentinel_client_shuts_down_cleanly() {
    let set = RedisReplicaSet::start(1).unwrap();
    let sentinels = RedisSentinels::start_with(&set, 1).unwrap();
    let client = sentinel_client(&sentinels, DEFAULT_COMMAND_TIMEOUT).await;
    let guard = client.mutex("bye").unwrap().try_acquire().await.unwrap();
    let _guard = guard.expect("free");
    let report = client.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.released, 1, "{report}");
    assert!(report.failures.is_empty(), "{report}");
    let held: bool = redis::cmd("EXISTS")
        .arg("dlock:{bye}")
        .query(&mut set.master().connection().unwrap())
        .unwrap();
    assert!(!held);
}
