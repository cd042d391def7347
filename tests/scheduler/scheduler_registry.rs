//! The job registry, with replicas in separate processes: each running replica publishes its
//! jobs (name, cron, zone) and who it is (id, host, pid) every heartbeat; it counts as live for
//! three heartbeats after each, and its entry lives longer (ten heartbeats, at least 30 s). A
//! replica stopped with SIGTERM withdraws its entry before it reports itself stopped; one killed
//! with SIGKILL shows as stalled within three heartbeats, and vanishes when its entry expires.
//! Standalone server only: the registry's two keys share the hash tag `{sched:}` (one slot,
//! checked by the scheduler's unit tests), so a cluster runs the same script on one shard.

use std::time::{Duration, Instant, SystemTime};

use dlock_core::Client;
use dlock_scheduler::{RegisteredReplica, Scheduler};
use redis::AsyncCommands;

use crate::scheduler::scheduler_exactly_once::{replica, wait_stopped};
use crate::support::{eventually, raw, redis};

/// A schedule that does not fire during a test.
const YEARLY: &str = "0 0 1 1 *";
/// The replicas' heartbeat (`heartbeat_ms=200`): live for three, listed for at least 30 s.
const HEARTBEAT: Duration = Duration::from_millis(200);
const LIVENESS: Duration = Duration::from_millis(600);
const LIFETIME: Duration = Duration::from_secs(30);

async fn registered(admin: &Scheduler) -> Vec<RegisteredReplica> {
    admin.registered_replicas().await.unwrap()
}

fn ids(replicas: &[RegisteredReplica]) -> Vec<&str> {
    replicas.iter().map(|r| r.id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_register_renew_and_withdraw_on_a_clean_stop() {
    let server = redis();
    let url = server.url();
    let opts = ["run_ms=60000", "heartbeat_ms=200"];
    let a = replica(&url, "reg", YEARLY, "a", &opts);
    let b = replica(&url, "reg", YEARLY, "b", &opts);
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    let both = eventually(
        Duration::from_secs(20),
        "both replicas registered",
        || async {
            let now = registered(&admin).await;
            (ids(&now) == ["a", "b"]).then_some(now)
        },
    )
    .await;
    for (entry, worker) in both.iter().zip([&a, &b]) {
        assert_eq!(entry.pid, worker.child().pid());
        assert_eq!(entry.host, dlock_core::ext::host_name());
        assert_eq!(entry.heartbeat_every, Duration::from_millis(200));
        assert_eq!(entry.jobs.len(), 1);
        let job = &entry.jobs[0];
        assert_eq!((job.name.as_str(), job.cron.as_str()), ("reg", YEARLY));
        assert_eq!(job.time_zone, "UTC");
        assert_eq!(job.loop_stalled_for, None);
        // Live for three heartbeats; listed for 30 s (ten heartbeats are less).
        assert_eq!(entry.live_until, entry.last_heartbeat + LIVENESS);
        assert_eq!(entry.expires_at, entry.last_heartbeat + LIFETIME);
        assert!(!entry.stalled);
    }

    // Each entry expires after its lifetime unless renewed …
    let mut con = raw(&server).await;
    let instances: Vec<String> = con.zrange("dlock:{sched:}:registry", 0, -1).await.unwrap();
    assert_eq!(instances.len(), 2);
    for instance in &instances {
        let ttl: u64 = con
            .pttl(format!("dlock:{{sched:}}:registry:{instance}"))
            .await
            .unwrap();
        let ttl = Duration::from_millis(ttl);
        assert!(ttl > LIVENESS && ttl <= LIFETIME, "entry ttl {ttl:?}");
    }
    // … and is renewed: a later heartbeat comes.
    let first = both[1].last_heartbeat;
    eventually(Duration::from_secs(10), "a renewed heartbeat", || async {
        let now = registered(&admin).await;
        now.iter()
            .any(|r| r.id == "b" && r.last_heartbeat > first)
            .then_some(())
    })
    .await;

    // SIGTERM: the entry is withdrawn by the time the replica says it stopped.
    crate::scheduler::scheduler_shutdown::terminate(&a);
    wait_stopped(&a, Duration::from_secs(30));
    assert_eq!(ids(&registered(&admin).await), ["b"]);
    crate::scheduler::scheduler_shutdown::terminate(&b);
    wait_stopped(&b, Duration::from_secs(30));
    assert!(registered(&admin).await.is_empty());
    let left: bool = con.exists("dlock:{sched:}:registry").await.unwrap();
    assert!(!left, "the index goes with its last entry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_shows_stalled_then_vanishes_when_its_entry_expires() {
    let server = redis();
    let url = server.url();
    let opts = ["run_ms=60000", "heartbeat_ms=200"];
    let mut a = replica(&url, "reg", YEARLY, "a", &opts);
    let b = replica(&url, "reg", YEARLY, "b", &opts);
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    eventually(
        Duration::from_secs(20),
        "both replicas registered",
        || async { (ids(&registered(&admin).await) == ["a", "b"]).then_some(()) },
    )
    .await;
    // SIGKILL: nothing withdraws the entry. Past its liveness it is listed as stalled …
    a.child_mut().kill();
    let killed = Instant::now();
    let stalled = eventually(
        Duration::from_secs(10),
        "the killed replica shown stalled",
        || async {
            let now = registered(&admin).await;
            assert_eq!(ids(&now), ["a", "b"], "listed until its entry expires");
            now[0].stalled.then(|| now[0].clone())
        },
    )
    .await;
    let took = killed.elapsed();
    assert!(
        took <= HEARTBEAT * 3 + Duration::from_millis(300),
        "shown stalled {took:?} after the kill"
    );
    assert!(!registered(&admin).await[1].stalled, "b still heartbeats");
    // … and it vanishes when the entry expires, its lifetime after its last heartbeat (by the
    // server's clock, which is this machine's).
    eventually(
        Duration::from_secs(40),
        "the killed replica vanished",
        || async { (ids(&registered(&admin).await) == ["b"]).then_some(()) },
    )
    .await;
    let gone = SystemTime::now();
    assert!(
        gone >= stalled.expires_at,
        "vanished at {gone:?}, before its entry's expiry {:?}",
        stalled.expires_at
    );
    crate::scheduler::scheduler_shutdown::terminate(&b);
    wait_stopped(&b, Duration::from_secs(30));
}
