//! A client on the application's own redis-rs connection (`ClientBuilder::app_connection`,
//! issue #48): a user's `ConnectionManager` drives the locks — a waiting acquire woken by a
//! push on dlock's own push connection, watchdog renewal, `cut_connections` mid-wait and
//! mid-hold, Redis down — a `MultiplexedConnection` and a cluster connection take and hand
//! over locks, the fenced path floors every fence by `fence.lua` without renaming the
//! application's connection, and a Sentinel client refuses the application's connection.

use std::time::{Duration, Instant};

use dlock_core::redis::aio::ConnectionManager;
use dlock_core::{Client, ErrorKind, FencingToken, MutexOptions};
use dlock_testkit::{RedisReplicaSet, RedisSentinels, RedisServer};
use redis::AsyncCommands;

use crate::support::{Backend, eventually, redis as start_redis};

/// The application's connection manager, as an application builds it (RESP2, the `redis`
/// crate's defaults).
async fn app_manager(url: &str) -> ConnectionManager {
    redis::Client::open(url)
        .unwrap()
        .get_connection_manager()
        .await
        .unwrap()
}

/// A dlock client whose commands go to the application's `ConnectionManager`.
async fn borrowed_client(server: &RedisServer) -> (Client, ConnectionManager) {
    let app = app_manager(&server.url()).await;
    let client = Client::builder(server.url().as_str())
        .app_connection(app.clone())
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    (client, app)
}

/// A client with a connection of its own (another process, in effect).
fn own_client(server: &RedisServer) -> Client {
    Client::builder(server.url().as_str()).build().unwrap()
}

/// How many times `server` ran `command` (scripts' calls included), from `INFO commandstats`.
async fn calls(server: &RedisServer, command: &str) -> u64 {
    let mut con = crate::support::raw(server).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut con)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// Waits until `lock`'s queue holds `n` entries.
async fn queued(server: &RedisServer, lock: &str, n: usize) {
    let con = crate::support::raw(server).await;
    let key = format!("dlock:{{{lock}}}:queue");
    eventually(Duration::from_secs(10), "the waiter queued", || {
        let (mut con, key) = (con.clone(), key.clone());
        async move {
            let len: usize = con.llen(&key).await.ok()?;
            (len == n).then_some(())
        }
    })
    .await;
}

/// The holder's lease is 30 s and the waiter waits 20 s: the fallback timer fires at the
/// holder's deadline, and the holder is another client (whose release wakes no local waiter
/// of this one), so only the published grant, heard on dlock's own push connection, can end
/// the wait in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_the_apps_connection_is_woken_by_the_release_push() {
    let server = start_redis();
    let (client, _app) = borrowed_client(&server).await;
    let long = MutexOptions::new().ttl(Duration::from_secs(30));
    let holder = own_client(&server)
        .mutex_with("wake", long.clone())
        .unwrap();
    let guard = holder.try_acquire().await.unwrap().expect("free");

    let waiter = client.mutex_with("wake", long).unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
    queued(&server, "wake", 1).await;
    guard.release().await.unwrap();
    let served = waiting
        .await
        .unwrap()
        .expect("woken by the push before the lease ended");
    served.release().await.unwrap();
}

/// A 1 s lease renewed by the watchdog over the application's connection outlives several
/// leases: the key's expiry moves past where the first lease ended, and the lease is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_over_the_apps_connection() {
    let server = start_redis();
    let (client, _app) = borrowed_client(&server).await;
    let ttl = Duration::from_secs(1);
    let lock = client
        .mutex_with("renewed", MutexOptions::new().ttl(ttl).watchdog())
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let con = crate::support::raw(&server).await;
    let expiry = |mut con: redis::aio::MultiplexedConnection| async move {
        redis::cmd("PEXPIRETIME")
            .arg("dlock:{renewed}")
            .query_async::<i64>(&mut con)
            .await
            .unwrap()
    };
    let first = expiry(con.clone()).await;
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap();
    // Past three of the leases it started with: renewed again and again.
    eventually(
        Duration::from_secs(20),
        "the hold renewed past 3 leases",
        || {
            let con = con.clone();
            async move { (expiry(con).await > first + 3 * ttl_ms).then_some(()) }
        },
    )
    .await;
    assert!(guard.lease().is_held(), "{:?}", guard.lease().state());
    assert!(guard.release().await.unwrap().was_held());
}

/// `cut_connections` drops every connection at once: the application's `ConnectionManager`
/// (commands), dlock's push connection and the other client's. The application's manager
/// reconnects by itself: a RESP3 one at once (it hears the drop), a RESP2 one (the `redis`
/// crate's default) behind the first request that fails — the waiter's, woken by the drop,
/// which rides that failure out and asks again. The wait in progress is then served by the
/// release that follows (its channel subscribed again on dlock's push connection), the hold
/// taken before the cut goes on being renewed, and the client locks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlock_goes_on_after_a_resp3_apps_connection_is_cut() {
    cut_while_waiting_and_holding("?protocol=resp3").await;
}

/// As above, on a RESP2 `ConnectionManager`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlock_goes_on_after_a_resp2_apps_connection_is_cut() {
    cut_while_waiting_and_holding("").await;
}

/// The cut of `dlock_goes_on_after_…`, on an application manager built from the server's URL
/// followed by `query`.
async fn cut_while_waiting_and_holding(query: &str) {
    let server = start_redis();
    let mut app = app_manager(&format!("{}{query}", server.url())).await;
    let client = Client::builder(server.url().as_str())
        .app_connection(app.clone())
        .connect()
        .await
        .unwrap();
    let ttl = Duration::from_secs(1);
    let held = client
        .mutex_with("cut-held", MutexOptions::new().ttl(ttl).watchdog())
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let long = MutexOptions::new().ttl(Duration::from_secs(30));
    let holder = own_client(&server)
        .mutex_with("cut-wait", long.clone())
        .unwrap();
    let guard = holder.try_acquire().await.unwrap().expect("free");
    let waiter = client.mutex_with("cut-wait", long).unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(25)).await });
    queued(&server, "cut-wait", 1).await;

    let cut = server.cut_connections().unwrap();
    assert!(cut >= 3, "cut {cut} connections");
    // The waiter asks again after the drop (dlock's push connection reports it). Until its
    // channel is subscribed again on dlock's push connection, a grant published would be
    // heard only by the 30 s fallback timer: wait for that (or for the waiter to have failed,
    // which the test then reports).
    let con = crate::support::raw(&server).await;
    let subscribed = || {
        let mut con = con.clone();
        async move {
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .arg("dlock:{cut-wait}*")
                .query_async(&mut con)
                .await
                .ok()?;
            Some(!channels.is_empty())
        }
    };
    eventually(
        Duration::from_secs(10),
        "the waiter subscribed again, or left",
        || {
            let (subscribed, finished) = (subscribed(), waiting.is_finished());
            async move { (subscribed.await? || finished).then_some(()) }
        },
    )
    .await;
    guard.release().await.unwrap();
    let served = waiting
        .await
        .unwrap()
        .expect("the wait is served after the cut");
    served.release().await.unwrap();

    // The hold taken before the cut is still renewed, over the reconnected manager.
    let expiry = |mut con: redis::aio::MultiplexedConnection| async move {
        redis::cmd("PEXPIRETIME")
            .arg("dlock:{cut-held}")
            .query_async::<i64>(&mut con)
            .await
            .unwrap()
    };
    let after_cut = expiry(con.clone()).await;
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap();
    eventually(
        Duration::from_secs(20),
        "the hold renewed after the cut",
        || {
            let con = con.clone();
            async move { (expiry(con).await > after_cut + 2 * ttl_ms).then_some(()) }
        },
    )
    .await;
    assert!(held.lease().is_held(), "{:?}", held.lease().state());
    assert!(held.release().await.unwrap().was_held());
    // The client locks again, and the application's own use of its manager goes on.
    let again = client
        .mutex("cut-wait")
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    again.expect("free again").release().await.unwrap();
    let _: () = app.set("app:key", "v").await.unwrap();
}

/// Redis down: a request on the application's connection fails within the command timeout,
/// as on a client's own connection (the manager's own retries do not stretch it), and the
/// client works again once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_an_error_within_the_command_timeout() {
    let mut server = start_redis();
    let app = app_manager(&server.url()).await;
    let timeout = Duration::from_millis(500);
    let client = Client::builder(server.url().as_str())
        .app_connection(app)
        .command_timeout(timeout)
        .connect_timeout(timeout)
        .connect()
        .await
        .unwrap();
    let lock = client.mutex("down").unwrap();
    server.kill();
    for _ in 0..3 {
        let started = Instant::now();
        let err = lock.try_acquire().await.unwrap_err();
        assert!(err.is_connection() || err.is_timeout(), "{err}");
        // Generous margin over the configured timeout: this checks "no hang", not speed.
        assert!(
            started.elapsed() < timeout * 4,
            "took {:?}",
            started.elapsed()
        );
    }
    server.restart().unwrap();
    let guard = eventually(Duration::from_secs(20), "the client recovers", || async {
        lock.try_acquire().await.ok().flatten()
    })
    .await;
    guard.release().await.unwrap();
}

/// A `MultiplexedConnection` drives the locks: its database is 1 while the builder's URL (the
/// push connection's) says 0 — pub/sub is not per database — so the lock key found in
/// database 1 shows that the commands went to the application's connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiplexed_connection_takes_and_hands_over_locks() {
    let server = start_redis();
    let app = redis::Client::open(format!("{}1", server.url()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let client = Client::builder(server.url().as_str())
        .app_connection(app.clone())
        .connect()
        .await
        .unwrap();
    let lock = client
        .mutex_with("mux", MutexOptions::new().ttl(Duration::from_secs(30)))
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let mut in_db1 = app.clone();
    let holder: Option<String> = in_db1.get("dlock:{mux}").await.unwrap();
    assert!(
        holder.is_some(),
        "the lock key is in the application's database"
    );
    let mut db0 = crate::support::raw(&server).await;
    assert!(!db0.exists::<_, bool>("dlock:{mux}").await.unwrap());

    let other = Client::builder(server.url().as_str())
        .app_connection(app)
        .build()
        .unwrap();
    let waiter = other
        .mutex_with("mux", MutexOptions::new().ttl(Duration::from_secs(30)))
        .unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
    eventually(Duration::from_secs(10), "the waiter queued", || {
        let mut con = in_db1.clone();
        async move { (con.llen::<_, usize>("dlock:{mux}:queue").await.ok()? == 1).then_some(()) }
    })
    .await;
    assert!(guard.release().await.unwrap().was_held());
    waiting
        .await
        .unwrap()
        .expect("handed over")
        .release()
        .await
        .unwrap();
}

/// The connections of `servers` that speak RESP3 (dlock's own, not the application's RESP2
/// ones) and whose last command was one of a lock's (`CLIENT LIST`'s `resp` and `cmd`).
fn lock_commands_on_resp3(servers: &[RedisServer]) -> Vec<String> {
    let lock_commands = ["cmd=set ", "cmd=evalsha ", "cmd=exec ", "cmd=multi "];
    servers
        .iter()
        .flat_map(|server| {
            let mut con = server.connection().unwrap();
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
            list.lines()
                .filter(|l| l.contains("resp=3") && lock_commands.iter().any(|c| l.contains(c)))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A cluster connection of the application (the test kit's 3 masters) drives the locks; the
/// hand-off reaches the waiter by sharded pub/sub on dlock's own cluster connection. The
/// application's connection is RESP2 and dlock's own RESP3: no RESP3 connection ran a lock's
/// command last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_connection_takes_and_hands_over_locks() {
    let backend = Backend::cluster();
    let urls: Vec<String> = backend.servers().iter().map(RedisServer::url).collect();
    let app = redis::cluster::ClusterClient::new(urls.clone())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let client = || {
        Client::cluster_builder(urls.iter().map(String::as_str))
            .app_connection(app.clone())
            .build()
            .unwrap()
    };
    // `connect()` checks that a message published on the application's cluster connection
    // (`SPUBLISH`) is heard on dlock's own.
    Client::cluster_builder(urls.iter().map(String::as_str))
        .app_connection(app.clone())
        .connect()
        .await
        .unwrap();
    let long = MutexOptions::new().ttl(Duration::from_secs(30));
    let mut fences: Vec<FencingToken> = Vec::new();
    for i in 0..6 {
        let lock = client()
            .mutex_with(&format!("order:{i}"), long.clone())
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        fences.push(guard.fencing_token().await.unwrap());
        assert!(guard.release().await.unwrap().was_held());
    }
    let holder = client().mutex_with("handed", long.clone()).unwrap();
    let guard = holder.try_acquire().await.unwrap().expect("free");
    let waiter = client().mutex_with("handed", long).unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
    let con = backend.raw().await;
    eventually(Duration::from_secs(10), "the waiter queued", || {
        let mut con = con.clone();
        async move { (con.llen::<_, usize>("dlock:{handed}:queue").await.ok()? == 1).then_some(()) }
    })
    .await;
    assert!(guard.release().await.unwrap().was_held());
    waiting
        .await
        .unwrap()
        .expect("woken by the sharded push before the lease ended")
        .release()
        .await
        .unwrap();
    let on_own = lock_commands_on_resp3(backend.servers());
    assert!(
        on_own.is_empty(),
        "lock commands on dlock's own connections: {on_own:?}"
    );
}

/// The fenced fast path's plain `INCR` needs a connection dlock names and sees replaced: on
/// the application's connection every fenced acquire floors its fence by `fence.lua`, and
/// never sends `CLIENT SETNAME` (which would rename the application's connection) or
/// `GETNAME`. Counted by the server's `TIME` calls (fence.lua reads the clock, the plain path
/// does not), as `locks::fencing` counts them; the same rounds on a client's own connection,
/// on the same server, are the baseline: there the slot is floored once and later acquires
/// take the plain `INCR`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_acquires_on_the_apps_connection_floor_every_fence_by_script() {
    const ROUNDS: u64 = 5;
    let server = start_redis();
    let (client, mut app) = borrowed_client(&server).await;
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("the-app")
        .query_async(&mut app)
        .await
        .unwrap();
    let rounds = |client: Client, name: &'static str| async move {
        let lock = client
            .mutex_with(name, MutexOptions::new().fenced())
            .unwrap();
        let mut fences: Vec<FencingToken> = Vec::new();
        for _ in 0..ROUNDS {
            let guard = lock.try_acquire().await.unwrap().expect("free");
            fences.push(guard.issued_fencing_token().expect("fenced in the acquire"));
            guard.release().await.unwrap();
        }
        assert!(fences.windows(2).all(|w| w[0] < w[1]), "{name}: {fences:?}");
    };
    let names =
        async || calls(&server, "client|setname").await + calls(&server, "client|getname").await;
    let before = calls(&server, "time").await;
    rounds(own_client(&server), "fenced-own").await;
    let after_own = calls(&server, "time").await;
    let names_before = names().await;
    rounds(client, "fenced-app").await;
    let after_app = calls(&server, "time").await;

    assert!(
        after_own - before < ROUNDS,
        "baseline: a client's own connection floors the slot once, then INCRs ({} floors)",
        after_own - before
    );
    assert_eq!(
        after_app - after_own,
        ROUNDS,
        "fence.lua in every fenced acquire on the application's connection"
    );
    assert_eq!(
        names().await,
        names_before,
        "CLIENT SETNAME/GETNAME on the app's connection"
    );
    let name: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query_async(&mut app)
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("the-app"));
}

/// A Sentinel client follows a failover by building a connection to the next master, which it
/// cannot do with the application's: refused when built, with what to do instead. The
/// sentinels are real, so the only reason to refuse is the application's connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_client_refuses_the_apps_connection() {
    let set = RedisReplicaSet::start(1).unwrap();
    let sentinels = RedisSentinels::start_with(&set, 1).unwrap();
    let (host, port) = sentinels.master_addr(0).unwrap();
    let app = app_manager(&format!("redis://{host}:{port}/")).await;
    let error = Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
        .app_connection(app)
        .connect()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("Sentinel") && text.contains("leave out app_connection"),
        "{text}"
    );
}

/// A connection of the other kind than the builder's is refused when built, naming the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_of_the_other_kind_is_refused() {
    let server = start_redis();
    let app = app_manager(&server.url()).await;
    let error = Client::cluster_builder([server.url()])
        .app_connection(app)
        .build()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("ClusterConnection"), "{error}");

    let cluster = Backend::cluster();
    let urls: Vec<String> = cluster.servers().iter().map(RedisServer::url).collect();
    let cc = redis::cluster::ClusterClient::new(urls)
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let error = Client::builder(server.url().as_str())
        .app_connection(cc)
        .build()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("cluster_builder"), "{error}");
}

/// The builder's address must reach the server the application's connection reaches, or no
/// wake-up would arrive: `connect()` publishes a message on the application's connection and
/// refuses when dlock's own connection does not hear it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_refuses_an_address_other_than_the_apps_connections() {
    let (app_server, other) = (start_redis(), start_redis());
    let app = app_manager(&app_server.url()).await;
    let error = Client::builder(other.url().as_str())
        .app_connection(app.clone())
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("different servers"), "{error}");
    // The same server under another spelling of its address is accepted.
    let same = format!("redis://localhost:{}/", app_server.port());
    Client::builder(same.as_str())
        .app_connection(app)
        .connect()
        .await
        .unwrap();
}
