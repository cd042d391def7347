//! The operator's side of one-off jobs (issue #51) across processes: a replica process
//! (`oneoff-replica` worker) registers its handler, and an admin scheduler in this process,
//! without that handler, sees it, pauses and resumes its one-off jobs before any of them ran,
//! lists the pending ones (what, when, with which idempotency key), and is refused `run_now` of them with the call
//! to use instead; `Scheduler::replicas` lists the live replica with its handlers.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{ErrorKind, RunOutcome, Scheduler};
use redis::AsyncCommands;

use crate::support::{Worker, eventually, raw, redis};

fn replica(url: &str, id: &str) -> Worker {
    let args: Vec<String> = vec![
        "oneoff-replica".into(),
        format!("url={url}"),
        format!("id={id}"),
    ];
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

/// An operator's scheduler: no job, no handler.
fn admin(url: &str) -> Scheduler {
    Scheduler::builder(Client::open(url).unwrap())
        .shutdown_client(false)
        .build()
        .unwrap()
}

/// A process that enqueues one-off jobs of `count` (it registers the handler, runs nothing).
fn enqueuer(url: &str) -> Scheduler {
    Scheduler::builder(Client::open(url).unwrap())
        .handler("count", |_| async { Ok::<(), String>(()) })
        .build()
        .unwrap()
}

/// Waits until a live replica registered the handler `count`.
async fn registered(admin: &Scheduler) {
    eventually(
        Duration::from_secs(30),
        "the handler registered",
        || async {
            let replicas = admin.replicas().await.unwrap();
            replicas
                .iter()
                .any(|r| r.handlers.iter().any(|h| h == "count"))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_one_offs_are_paused_and_listed_before_any_ran() {
    let server = redis();
    let url = server.url();
    let _worker = replica(&url, "r1");
    let admin = admin(&url);
    registered(&admin).await;
    let live = admin.replicas().await.unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(
        (live[0].id.as_str(), live[0].handlers.as_slice()),
        ("r1", ["count".to_owned()].as_slice())
    );

    // No one-off of `count` ran (none was enqueued): its job is known all the same.
    assert!(admin.history("once:count").await.unwrap().is_empty());
    assert!(admin.is_known("once:count").await.unwrap());
    admin.pause("once:count").await.unwrap();
    assert!(admin.is_paused("once:count").await.unwrap());
    let handlers = admin.one_off_handlers().await.unwrap();
    assert_eq!(handlers.len(), 1);
    assert_eq!(
        (
            handlers[0].job.as_str(),
            handlers[0].paused,
            handlers[0].replicas.as_slice()
        ),
        ("once:count", true, ["r1".to_owned()].as_slice())
    );
    // A typo is still refused, with the close name.
    let typo = admin.pause("once:cuont").await.unwrap_err();
    assert_eq!(typo.kind(), ErrorKind::UnknownJob);
    assert!(typo.to_string().contains("once:count"), "{typo}");

    // Paused: what is enqueued waits, listed due first with its arguments.
    let enqueue = enqueuer(&url);
    let now = enqueue
        .run_after_keyed("count", "k-1", Duration::ZERO, &1)
        .await
        .unwrap();
    let later = enqueue
        .run_after("count", Duration::from_secs(3600), &2)
        .await
        .unwrap();
    let pending = admin.pending_one_offs("count", 100).await.unwrap();
    let seen: Vec<_> = pending
        .iter()
        .map(|p| (p.id.clone(), p.attempt, p.key.as_deref(), p.args.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (now.clone(), 1, Some("k-1"), Some("1".to_owned())),
            (later.clone(), 1, None, Some("2".to_owned()))
        ]
    );
    assert!(pending[0].keyed && !pending[1].keyed);
    assert!(pending[0].due < pending[1].due);
    assert!(pending[0].enqueued_by.is_some() && pending[0].enqueued_at.is_some());
    assert_eq!(admin.one_off_handlers().await.unwrap()[0].queued, 2);

    // Resumed: the replica runs the due one; the later one stays pending.
    admin.resume("once:count").await.unwrap();
    let mut con = raw(&server).await;
    eventually(Duration::from_secs(30), "the due one-off ran", || async {
        let ran = admin.one_off(&now).await.unwrap();
        ran.filter(|r| r.outcome == RunOutcome::Succeeded)
    })
    .await;
    let counted: Option<i64> = con.hget("oneoff:count", 1).await.unwrap();
    assert_eq!(counted, Some(1));
    let pending = admin.pending_one_offs("count", 100).await.unwrap();
    assert_eq!(
        pending.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        [later]
    );
}

/// The key of a keyed one-off is listed as it was given (any text: it is stored whole, not
/// only as the hash its run id is), kept by a replace; a keyed job an older replica enqueued
/// (no key record) is listed keyed with its key unknown, and a key record of a newer format
/// version is refused by name, not misread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_one_offs_key_is_listed_as_given_and_a_newer_record_is_refused() {
    let server = redis();
    let url = server.url();
    let admin = admin(&url);
    let enqueue = enqueuer(&url);
    // A key with a separator of the record format inside, and beyond ASCII.
    let key = "réf\u{1f}2026-Q4";
    let hour = Duration::from_secs(3600);
    let id = enqueue
        .run_after_keyed("count", key, hour, &1)
        .await
        .unwrap();
    let replaced = enqueue
        .run_after_keyed("count", key, hour, &2)
        .replace()
        .submit()
        .await
        .unwrap();
    assert!(
        matches!(&replaced, dlock_scheduler::Enqueued::Updated(same) if same == &id),
        "{replaced:?}"
    );
    let listed = |pending: Vec<dlock_scheduler::PendingOneOff>| {
        let p = pending
            .into_iter()
            .next()
            .expect("the keyed one-off is pending");
        (p.id, p.keyed, p.key, p.args)
    };
    assert_eq!(
        listed(admin.pending_one_offs("count", 10).await.unwrap()),
        (id.clone(), true, Some(key.to_owned()), Some("2".to_owned()))
    );

    let mut con = raw(&server).await;
    let ledger = "dlock:{sched:once:count}:ledger";
    let field = format!("{}:key", id.run_id());
    // As a replica without the key record enqueues it.
    let removed: i64 = con.hdel(ledger, &field).await.unwrap();
    assert_eq!(
        removed, 1,
        "the key record is where the scripts' contract says"
    );
    assert_eq!(
        listed(admin.pending_one_offs("count", 10).await.unwrap()),
        (id.clone(), true, None, Some("2".to_owned()))
    );
    // A newer dlock's record.
    let _: () = con.hset(ledger, &field, "2\u{1f}k").await.unwrap();
    let refused = admin.pending_one_offs("count", 10).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Redis, "{refused}");
    assert!(
        refused.to_string().contains("format version 2")
            && refused.to_string().contains(&id.to_string()),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_of_a_handlers_one_offs_is_refused_with_the_call_to_use() {
    let server = redis();
    let url = server.url();
    let _worker = replica(&url, "r1");
    let admin = admin(&url);
    registered(&admin).await;
    for refused in [
        admin.run_now("once:count").await.unwrap_err(),
        admin.force_run_now("once:count").await.unwrap_err(),
    ] {
        assert_eq!(refused.kind(), ErrorKind::InvalidJob, "{refused}");
        assert!(refused.to_string().contains("run_at"), "{refused}");
    }
    // Nothing was queued for nobody to take.
    let mut con = raw(&server).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("dlock:{sched:once:count}:requests*")
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// Issue #51: at a graceful shutdown a replica's `run_now` listeners leave their jobs' wake
/// channels, and a message the other replicas publish there before the server took the
/// unsubscription reached dlock-core's waiters, which logged "ignoring a malformed message on a
/// wake channel" (the scheduler's message read as a lock grant). Made deterministic: the
/// message is in the client's socket before the listener leaves, and read after; on a
/// current-thread runtime, where the recording subscriber sees the connection's task.
#[tokio::test(flavor = "current_thread")]
async fn a_message_on_a_wake_channel_just_left_is_not_read_as_a_grant() {
    let logs = crate::support::LogCapture::start();
    let server = redis();
    let client = crate::support::client(&server);
    let channel = "dlock:{sched:tick}:wake";
    let listener = dlock_core::ext::subscribe(&client, channel).await.unwrap();
    // Blocking: the runtime does not run the client's connection meanwhile.
    let mut con = server.connection().unwrap();
    let heard: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg("tick")
        .query(&mut con)
        .unwrap();
    assert_eq!(heard, 1, "the client is subscribed");
    drop(listener);
    // The reply comes after the message on the connection: once it is here, the message was
    // handled.
    let pong: String = dlock_core::ext::query(&client, &redis::cmd("PING"), "ping")
        .await
        .unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(logs.matching("malformed message"), Vec::<String>::new());
    assert_eq!(logs.matching("no listener or waiter").len(), 1);
}

/// Issue #51: a grouped run's `ctx.remaining()` followed the job's lock only, not its group
/// slot, which the run also holds and whose lease is renewed apart (after a pause the slot's
/// was up to 28 ms shorter). Made deterministic: while the run goes on, its slot is taken from
/// it in Redis (its semaphore's keys deleted), so the slot's next renewal is refused and its
/// lease is lost, while the job's lock is still renewed. `remaining()` must fall to zero then,
/// with the lock's lease still held. (The run is not cancelled: `OnLost::Signal`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_runs_remaining_follows_its_group_slot() {
    let server = redis();
    let url = server.url();
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    let (seen_tx, seen) = tokio::sync::oneshot::channel::<(bool, dlock_core::LeaseState)>();
    let once = std::sync::Mutex::new(Some((started_tx, seen_tx)));
    let job = dlock_scheduler::Job::new("report", "0 0 1 1 *", "UTC", move |ctx| {
        let taken = once.lock().unwrap().take();
        async move {
            let Some((started, seen)) = taken else {
                return Ok(());
            };
            let _ = started.send(());
            // Until the slot's loss shows in remaining() (bounded: the test fails after it).
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            let zero = loop {
                if ctx.remaining().is_zero() {
                    break true;
                }
                if tokio::time::Instant::now() > deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let _ = seen.send((zero, ctx.lease_state()));
            Ok::<(), String>(())
        }
    })
    .unwrap()
    .group("reports")
    .lease(Duration::from_secs(1))
    .on_lost(dlock_core::OnLost::Signal);
    let scheduler = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .group("reports", 1)
        .job(job)
        .build()
        .unwrap();
    let admin = scheduler.clone();
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
    admin.run_now("report").await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), started)
        .await
        .expect("the run started")
        .unwrap();
    let mut con = raw(&server).await;
    let slot_keys: Vec<String> = redis::cmd("KEYS")
        .arg("dlock:{sched-group:reports}*")
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(!slot_keys.is_empty(), "the run holds a slot");
    let () = con.del(&slot_keys).await.unwrap();
    let (zero, lock) = tokio::time::timeout(Duration::from_secs(40), seen)
        .await
        .expect("the handler reported")
        .unwrap();
    assert!(
        zero,
        "remaining() never fell to zero although the slot was lost"
    );
    assert_eq!(
        lock,
        dlock_core::LeaseState::Held,
        "the job's lock still stood: remaining() followed the slot"
    );
    let _ = stop.send(());
    running.await.unwrap();
}
