//! Least privilege: dlock works with a Redis ACL user that has exactly the rights the README
//! lists and nothing more (every lock kind, waits and hand-offs, the watchdog, fences,
//! inspect, force unlock, the scheduler); a user that lacks one gets a `Permission` error that
//! names the missing right; two applications with their own prefixes and users on one Redis
//! cannot touch each other's locks.
//!
//! On a 3-master Cluster (the user made on every node, as ACL users are per node), the README's
//! line plus the cluster rights it names (`+cluster|slots +cluster|shards`) is enough, and
//! without them connecting fails with a `Permission` error.

use std::time::Duration;

use dlock_core::{Client, ErrorKind, MutexOptions};
use dlock_scheduler::{Job, Scheduler};
use dlock_testkit::{RedisCluster, RedisServer};

use crate::support::{mutex_round, queue_reaches, raw, redis};

/// The rules of the README's ACL line for a dlock user, after `ACL SETUSER <user> on >pw`.
/// Kept in one place: the guide quotes it (dlock-core/guide/production.md), and
/// `the_readme_acl_line_is_this_one` checks that.
pub(crate) const DLOCK_RULES: &str = "resetkeys resetchannels -@all +@read +@write +@pubsub +@transaction +@connection -@dangerous +evalsha +eval +script|load +time +info +role";

/// What the README adds to [`DLOCK_RULES`] for a Redis Cluster (the topology commands).
const CLUSTER_RULES: &str = "+cluster|slots +cluster|shards";

/// The README's read-only operator user.
const VIEWER_RULES: &str = "resetkeys resetchannels -@all +@read +@connection -@dangerous +evalsha +eval +script|load +info";

/// The README's operator user (the guide's line, for the prefix `billing:`): reads everything
/// under the prefix, writes only the scheduler's keys and channels — what `dlock schedule
/// add|remove`, `pause`, `resume` and `run-now` need — and takes no lock.
pub(crate) const OPERATOR_RULES: &str = "resetkeys resetchannels -@all +@read +@write +@pubsub +@connection -@dangerous +evalsha +eval +script|load +time +info %R~billing:* ~billing:{sched:* &billing:{sched:*";

/// Creates `user` with password `pw`, the `rules`, the key pattern `~<prefix>*` and the
/// channel pattern `&<prefix>*`.
async fn acl_user(server: &RedisServer, user: &str, prefix: &str, rules: &str) {
    let mut con = raw(server).await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg("on")
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for rule in rules.split_whitespace() {
        cmd.arg(rule);
    }
    cmd.arg(format!("~{prefix}*")).arg(format!("&{prefix}*"));
    let () = cmd.query_async(&mut con).await.unwrap();
}

fn client_as(server: &RedisServer, user: &str, prefix: &str) -> Client {
    let url = format!("redis://{user}:pw@127.0.0.1:{}/", server.port());
    Client::builder(url)
        .key_prefix(prefix)
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_works_with_exactly_the_documented_rights() {
    let server = redis();
    acl_user(&server, "app", "app:", DLOCK_RULES).await;
    let client = client_as(&server, "app", "app:");

    // Mutex: uncontended, fenced, a waiter handed the lock, the watchdog, inspect, force.
    mutex_round(&client).await;

    let fenced = client
        .mutex_with("order:2", MutexOptions::new().fenced())
        .unwrap();
    fenced.acquire().await.unwrap().release().await.unwrap();

    // Semaphore and read-write lock, with their inspection.
    let sem = client.semaphore("exports", 2).unwrap();
    let permit = sem.acquire(1).await.unwrap();
    assert_eq!(
        client
            .inspect_semaphore("exports")
            .await
            .unwrap()
            .unwrap()
            .holders
            .len(),
        1
    );
    permit.release().await.unwrap();
    let rw = client.rw_lock("prices").unwrap();
    let read = rw.read().await.unwrap();
    assert!(client.inspect_rw_lock("prices").await.unwrap().is_some());
    read.release().await.unwrap();
    rw.write().await.unwrap().release().await.unwrap();

    // The scheduler: a job run on request.
    let done = std::sync::Arc::new(tokio::sync::Notify::new());
    let job = {
        let done = done.clone();
        Job::new("report", "0 0 1 1 *", "UTC", move |_| {
            let done = done.clone();
            async move {
                done.notify_one();
                Ok::<(), String>(())
            }
        })
        .unwrap()
    };
    let scheduler = Scheduler::builder(client_as(&server, "app", "app:"))
        .job(job)
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        scheduler
            .run_until(
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
            )
            .await
    });
    let admin = Scheduler::builder(client_as(&server, "app", "app:"))
        .build()
        .unwrap();
    // Forced: the replica may not have registered the job yet (run_now refuses unknown jobs).
    admin.force_run_now("report").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), done.notified())
        .await
        .expect("the job ran under the restricted user");

    // The read-only operator user of the README reads what `dlock jobs` and `dlock runs` show.
    acl_user(&server, "viewer", "app:", VIEWER_RULES).await;
    let viewer = Scheduler::builder(client_as(&server, "viewer", "app:"))
        .build()
        .unwrap();
    let jobs = viewer.overview().await.unwrap();
    assert!(
        jobs.iter().any(|job| job.name == "report"),
        "the viewer sees the running job: {jobs:?}"
    );
    let runs = crate::support::eventually(Duration::from_secs(10), "the run is recorded", || {
        let viewer = viewer.clone();
        async move {
            let runs = viewer.history("report").await.unwrap();
            (!runs.is_empty()).then_some(runs)
        }
    })
    .await;
    assert!(runs.iter().all(|run| run.manual), "{runs:?}");
    let _ = stop.send(());
    running.await.unwrap();
}

/// An inspect-only user (reads and read-only scripts, no writes) can look, and is refused
/// with a `Permission` error naming the command when it tries to take a lock.
#[tokio::test]
async fn a_missing_right_is_a_permission_error_that_names_it() {
    let server = redis();
    acl_user(&server, "viewer", "app:", VIEWER_RULES).await;
    let viewer = client_as(&server, "viewer", "app:");
    assert!(viewer.inspect("order:1").await.unwrap().is_none());
    let err = viewer
        .mutex("order:1")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("set"), "names the command: {text}");
    assert!(text.contains("ACL"), "says where to fix it: {text}");
    // The same refusal inside the fenced acquire's MULTI, which the server discards whole (a
    // user with the README's rights less `SET`; the viewer may not even send `MULTI`).
    acl_user(&server, "noset", "app:", &format!("{DLOCK_RULES} -set")).await;
    let err = client_as(&server, "noset", "app:")
        .mutex_with("order:4", MutexOptions::new().fenced())
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(
        err.to_string().contains("'set'"),
        "names the command: {err}"
    );
    // A script the user may run, refused the write it makes inside (Redis reports that
    // without the NOPERM code): a Permission error too, and nothing changed.
    let holder = Client::builder(server.url())
        .key_prefix("app:")
        .build()
        .unwrap();
    let guard = holder.mutex("order:1").unwrap().acquire().await.unwrap();
    let err = viewer.force_unlock("order:1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(viewer.inspect("order:1").await.unwrap().is_some());
    guard.release().await.unwrap();
}

/// The README's read-only operator user runs what the CLI's read-only commands run (`dlock
/// inspect` of every kind, an election's leader, `dlock locks`) on every kind held and queued
/// for: no right outside its ACL line is needed (no `TIME`: the shared kinds' inspection reads
/// the server clock off the lease ends' expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_inspects_every_kind_held_and_queued() {
    let server = redis();
    acl_user(&server, "app", "app:", DLOCK_RULES).await;
    acl_user(&server, "viewer", "app:", VIEWER_RULES).await;
    let app = client_as(&server, "app", "app:");
    let viewer = client_as(&server, "viewer", "app:");
    let con = crate::support::Plain::Single(raw(&server).await);
    let wait = Duration::from_secs(20);

    // Each kind held, and one request queued behind the holder.
    let mutex = app.mutex("order:1").unwrap();
    let held = mutex.acquire().await.unwrap();
    let queued_mutex = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.acquire_timeout(wait).await })
    };
    let sem = app.semaphore("exports", 2).unwrap();
    let permits = sem.acquire(2).await.unwrap();
    let queued_permit = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire_timeout(1, wait).await })
    };
    let rw = app.rw_lock("prices").unwrap();
    let read = rw.read().await.unwrap();
    let queued_write = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.write_timeout(wait).await })
    };
    let election = app.election("primary").unwrap();
    let leading = election.campaign("10.0.0.7:8080").await.unwrap();
    let queued_candidate = {
        let election = election.clone();
        tokio::spawn(async move { election.campaign_timeout("10.0.0.8:8080", wait).await })
    };
    for queue in [
        "app:{order:1}:queue",
        "app:{exports}:sem:queue",
        "app:{prices}:rw:queue",
        "app:{election:primary}:queue",
    ] {
        queue_reaches(&con, queue, 1).await;
    }

    let holder = viewer.inspect("order:1").await.unwrap().expect("held");
    assert_eq!(holder.waiters, 1);
    let info = viewer
        .inspect_semaphore("exports")
        .await
        .unwrap()
        .expect("held");
    assert_eq!((info.limit, info.holders.len(), info.waiters), (2, 1, 1));
    assert_eq!(info.holders[0].permits, 2);
    assert!(info.holders[0].remaining > Duration::ZERO);
    let info = viewer
        .inspect_rw_lock("prices")
        .await
        .unwrap()
        .expect("held");
    assert_eq!((info.readers.len(), info.waiters), (1, 1));
    assert!(info.writer.is_none());
    let leader = viewer
        .inspect("election:primary")
        .await
        .unwrap()
        .expect("held");
    assert_eq!(leader.waiters, 1);
    let leader = viewer
        .election("primary")
        .unwrap()
        .leader()
        .await
        .unwrap()
        .expect("a leader");
    assert_eq!(leader.value(), "10.0.0.7:8080");
    let mut listed: Vec<String> = viewer
        .held_locks(None)
        .await
        .unwrap()
        .locks
        .iter()
        .map(|lock| lock.name().to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, ["election:primary", "exports", "order:1", "prices"]);

    held.release().await.unwrap();
    queued_mutex
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    permits.release().await.unwrap();
    queued_permit
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    read.release().await.unwrap();
    queued_write
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    leading.resign().await.unwrap();
    queued_candidate
        .await
        .unwrap()
        .unwrap()
        .resign()
        .await
        .unwrap();
}

/// Two applications, each with its own prefix and user: neither can read, take or force the
/// other's locks, and each works on its own.
#[tokio::test]
async fn two_applications_cannot_touch_each_others_locks() {
    let server = redis();
    acl_user(&server, "billing", "billing:", DLOCK_RULES).await;
    acl_user(&server, "search", "search:", DLOCK_RULES).await;
    let billing = client_as(&server, "billing", "billing:");
    let guard = billing
        .mutex("shared-name")
        .unwrap()
        .acquire()
        .await
        .unwrap();

    // The search app pointed at billing's prefix, as if misconfigured or hostile.
    let intruder = client_as(&server, "search", "billing:");
    for err in [
        intruder
            .mutex("shared-name")
            .unwrap()
            .try_acquire()
            .await
            .unwrap_err(),
        intruder.force_unlock("shared-name").await.unwrap_err(),
        intruder.inspect("shared-name").await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    }
    assert!(guard.lease().is_held());
    // Under its own prefix the same name is another lock, free.
    let search = client_as(&server, "search", "search:");
    let own = search
        .mutex("shared-name")
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    assert!(own.is_some());
    guard.release().await.unwrap();
}

/// A user that may not name its connection (`CLIENT SETNAME`/`GETNAME` taken out of
/// `@connection`, as some managed services do) still takes fenced locks: the fenced fast path
/// stops naming the connection and floors every fence by script, fences still increasing.
#[tokio::test]
async fn fenced_locks_work_without_the_client_name_commands() {
    let server = redis();
    let rules = format!("{DLOCK_RULES} -client|setname -client|getname");
    acl_user(&server, "app", "app:", &rules).await;
    let client = client_as(&server, "app", "app:");
    let lock = client
        .mutex_with("order:3", MutexOptions::new().fenced())
        .unwrap();
    let mut last = 0;
    for _ in 0..5 {
        let guard = lock.acquire().await.unwrap();
        let fence = guard.issued_fencing_token().expect("fenced").get();
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        guard.release().await.unwrap();
    }
}

/// A cluster client logged in as `user` on every node of `cluster`.
fn cluster_client_as(
    cluster: &RedisCluster,
    user: &str,
    prefix: &str,
) -> dlock_core::ClientBuilder {
    let urls = cluster
        .nodes()
        .iter()
        .map(|node| format!("redis://{user}:pw@127.0.0.1:{}/", node.port()));
    Client::cluster_builder(urls)
        .key_prefix(prefix)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
}

/// On a cluster, the README's line plus its cluster rights runs every lock kind, a waiter
/// handed the lock over sharded pub/sub, the watchdog, fences and inspection; without the
/// cluster rights the client cannot learn the topology, and says so with `Permission`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_user_needs_exactly_the_documented_cluster_rights() {
    let cluster = tokio::task::block_in_place(RedisCluster::start).unwrap();
    let rules = format!("{DLOCK_RULES} {CLUSTER_RULES}");
    for node in cluster.nodes() {
        acl_user(node, "app", "app:", &rules).await;
        acl_user(node, "nocluster", "app:", DLOCK_RULES).await;
    }
    let client = cluster_client_as(&cluster, "app", "app:")
        .connect()
        .await
        .unwrap();

    mutex_round(&client).await;
    // Names on every master's slots.
    for name in ["a", "b", "c", "d", "e", "f"] {
        let fenced = client
            .mutex_with(name, MutexOptions::new().fenced())
            .unwrap();
        fenced.acquire().await.unwrap().release().await.unwrap();
    }
    let permit = client
        .semaphore("exports", 2)
        .unwrap()
        .acquire(1)
        .await
        .unwrap();
    permit.release().await.unwrap();
    let rw = client.rw_lock("prices").unwrap();
    rw.read().await.unwrap().release().await.unwrap();
    rw.write().await.unwrap().release().await.unwrap();

    let err = cluster_client_as(&cluster, "nocluster", "app:")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(
        err.to_string().contains("+cluster|slots"),
        "names the right: {err}"
    );
}

/// The guide's ACL line (its production chapter, once the README's) is the one these tests
/// use (with the guide's example prefix).
#[test]
fn the_readme_acl_line_is_this_one() {
    let guide = include_str!("../../dlock-core/guide/production.md");
    let path = "dlock-core/guide/production.md";
    let line = format!("ACL SETUSER billing on >secret {DLOCK_RULES} ~billing:* &billing:*");
    assert!(guide.contains(&line), "{path} lacks: {line}");
    let cluster = format!("A Redis Cluster adds `{CLUSTER_RULES}`");
    assert!(guide.contains(&cluster), "{path} lacks: {cluster}");
    let viewer = VIEWER_RULES.replace(" +@read", "\n  +@read");
    assert!(
        guide.contains(&format!("`{viewer}`")),
        "{path} lacks: {viewer}"
    );
    let operator = format!("ACL SETUSER ops on >secret {OPERATOR_RULES}");
    assert!(guide.contains(&operator), "{path} lacks: {operator}");
}

/// Issue #51: the README's operator user runs what `dlock schedule add|remove`, `pause`,
/// `resume` and `run-now` run — and takes no lock; the read-only user lists the schedules and
/// is refused adding one, with a `Permission` error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_changes_schedules_the_viewer_only_reads_them() {
    let server = redis();
    acl_user(&server, "app", "app:", DLOCK_RULES).await;
    let replica = Scheduler::builder(client_as(&server, "app", "app:"))
        .heartbeat(Duration::from_millis(200))
        .handler("export", |_ctx| async { Ok::<(), String>(()) })
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        replica
            .run_until(
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
            )
            .await
    });
    // The guide's line, for this test's prefix.
    let rules = OPERATOR_RULES.replace("billing:", "app:");
    let mut con = raw(&server).await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg("ops")
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for rule in rules.split_whitespace() {
        cmd.arg(rule);
    }
    let () = cmd.query_async(&mut con).await.unwrap();
    let ops = Scheduler::builder(client_as(&server, "ops", "app:"))
        .build()
        .unwrap();
    crate::support::eventually(Duration::from_secs(10), "the replica is live", || async {
        let live = ops.replicas().await.unwrap();
        live.iter()
            .any(|r| r.handlers.iter().any(|h| h == "export"))
            .then_some(())
    })
    .await;
    ops.add_schedule_json(
        "export:acme",
        "export",
        "0 3 * * *",
        "UTC",
        Some(r#"{"t":1}"#),
    )
    .await
    .unwrap();
    assert_eq!(ops.schedules().await.unwrap()[0].name, "export:acme");
    ops.pause("export:acme").await.unwrap();
    ops.resume("export:acme").await.unwrap();
    ops.run_now("export:acme").await.unwrap();
    assert!(ops.remove_schedule("export:acme").await.unwrap());
    let taken = client_as(&server, "ops", "app:")
        .mutex("order:1")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::Permission, "{taken}");

    acl_user(&server, "viewer", "app:", VIEWER_RULES).await;
    let viewer = Scheduler::builder(client_as(&server, "viewer", "app:"))
        .build()
        .unwrap();
    assert!(viewer.schedules().await.unwrap().is_empty());
    let handlers = viewer.one_off_handlers().await.unwrap();
    assert_eq!(handlers[0].name, "export");
    assert!(
        viewer
            .pending_one_offs("export", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let refused = viewer
        .add_schedule_json("export:acme", "export", "0 3 * * *", "UTC", None)
        .await
        .unwrap_err();
    let kind = refused.as_core().map(dlock_core::Error::kind);
    assert_eq!(kind, Some(ErrorKind::Permission), "{refused}");
    assert!(viewer.schedules().await.unwrap().is_empty());
    let _ = stop.send(());
    running.await.unwrap();
}
