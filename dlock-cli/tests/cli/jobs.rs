//! `dlock jobs`, `runs`, `pause`, `resume` and `run-now` against schedulers running in this
//! process: the job registry lists each running replica; a replica that stops cleanly is gone
//! at once, one that dies (its runtime dropped: nothing is withdrawn) is marked stalled after
//! three short heartbeats (and listed until its entry expires, 30 s later, not waited for
//! here); runs show in the ledger; `run-now` makes the job run; and the registry and controls
//! work on a cluster.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{Job, Scheduler};
use dlock_testkit::RedisCluster;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::{client, dlock, eventually, redis};

/// Never fires during a test: only `run-now` runs it.
const YEARLY: &str = "0 0 1 1 *";
/// Short, so that a replica that died shows as stalled quickly.
const HEARTBEAT: Duration = Duration::from_millis(200);

fn job(name: &str, cron: &str, tz: &str) -> Job {
    Job::new(name, cron, tz, |_ctx| async {
        Ok::<(), std::io::Error>(())
    })
    .unwrap()
}

fn scheduler(url: &str, id: &str, jobs: Vec<Job>) -> Scheduler {
    let mut builder = Scheduler::builder(client(url))
        .replica_id(id)
        .heartbeat(HEARTBEAT)
        .request_poll(Duration::from_millis(200));
    for job in jobs {
        builder = builder.job(job);
    }
    builder.build().unwrap()
}

/// A replica running until its sender is used or dropped.
fn start(scheduler: Scheduler) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        scheduler
            .run_until(
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
            )
            .await;
    });
    (stop, task)
}

/// The replica ids `dlock jobs --json` lists for `job` (none if it lists no such job).
async fn replicas_of(url: &str, job: &str) -> Vec<String> {
    let run = dlock(&["--url", url, "jobs", "--json"]).await;
    assert!(run.code == 0 || run.code == 3, "{run:?}");
    run.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["name"] == job)
        .flat_map(|j| j["replicas"].as_array().unwrap().clone())
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_lists_the_running_replicas_forgets_stopped_ones_and_marks_dead_ones_stalled() {
    let server = redis();
    let url = server.url();
    let (stop_a, a) = start(scheduler(
        &url,
        "a",
        vec![job("report", YEARLY, "Europe/Berlin")],
    ));
    let (stop_b, b) = start(scheduler(
        &url,
        "b",
        vec![job("report", YEARLY, "Europe/Berlin")],
    ));
    // A third replica in a runtime of its own, dropped later as a crash would end it.
    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let doomed_url = url.clone();
    doomed.spawn(async move {
        scheduler(
            &doomed_url,
            "c",
            vec![job("report", YEARLY, "Europe/Berlin")],
        )
        .run_until(std::future::pending::<()>(), Duration::from_secs(1))
        .await;
    });
    eventually(
        Duration::from_secs(20),
        "three replicas registered",
        || async { (replicas_of(&url, "report").await == ["a", "b", "c"]).then_some(()) },
    )
    .await;

    let run = dlock(&["--url", &url, "jobs", "--json"]).await.expect(0);
    let doc = run.json();
    let report = &doc["jobs"][0];
    assert_eq!(report["name"], "report");
    assert_eq!(report["cron"], YEARLY);
    assert_eq!(report["time_zone"], "Europe/Berlin");
    assert_eq!(report["paused"], false);
    assert_eq!(report["last_run"], serde_json::Value::Null);
    assert!(
        report["next_local"]
            .as_str()
            .unwrap()
            .contains("-01-01 00:00:00"),
        "{report:#}"
    );
    let replica = &report["replicas"][0];
    assert_eq!(replica["pid"], std::process::id());
    assert_eq!(replica["heartbeat_ms"], 200);
    let table = dlock(&["--url", &url, "jobs"]).await.expect(0);
    let row = table.stdout.lines().nth(1).unwrap();
    for cell in ["report", YEARLY, "Europe/Berlin", "a, b, c", "no"] {
        assert!(row.contains(cell), "{cell:?} missing from {row:?}");
    }

    // Paused, as every replica sees it.
    dlock(&["--url", &url, "pause", "report"]).await.expect(0);
    let run = dlock(&["--url", &url, "jobs", "--json"]).await.expect(0);
    assert_eq!(run.json()["jobs"][0]["paused"], true);
    dlock(&["--url", &url, "resume", "report"]).await.expect(0);
    let run = dlock(&["--url", &url, "jobs", "--json"]).await.expect(0);
    assert_eq!(run.json()["jobs"][0]["paused"], false);

    // Stopped cleanly: gone as soon as it has stopped.
    stop_a.send(()).unwrap();
    a.await.unwrap();
    assert_eq!(replicas_of(&url, "report").await, ["b", "c"]);

    // Died: marked stalled once its liveness (three heartbeats) has run out, in the JSON, the
    // table and a note; `run-now` no longer counts it as running the job.
    doomed.shutdown_background();
    let c = eventually(
        Duration::from_secs(20),
        "the dead replica marked stalled",
        || async {
            let run = dlock(&["--url", &url, "jobs", "--json"]).await.expect(0);
            let replicas = run.json()["jobs"][0]["replicas"].clone();
            let c = replicas.as_array().unwrap().last().unwrap().clone();
            (c["stalled"] == "replica").then_some(c)
        },
    )
    .await;
    assert_eq!(c["id"], "c");
    assert_eq!(c["stalled_since"], c["last_heartbeat"], "{c:#}");
    let run = dlock(&["--url", &url, "jobs", "--json"]).await.expect(0);
    assert_eq!(
        run.json()["jobs"][0]["replicas"][0]["stalled"],
        serde_json::Value::Null
    );
    let table = dlock(&["--url", &url, "jobs"]).await.expect(0);
    assert!(table.stdout.contains("b, c (stalled)"), "{table:?}");
    assert!(table.stderr.contains("replica `c`"), "{table:?}");
    let ran = dlock(&["--url", &url, "run-now", "report", "--json"])
        .await
        .expect(0);
    assert_eq!(ran.json()["replicas"], serde_json::json!(["b"]));

    // The last running replica stops: only the dead one is listed, stalled, until its entry
    // expires (an empty registry is the cluster test's last check).
    drop(stop_b);
    b.await.unwrap();
    let run = dlock(&["--url", &url, "jobs"]).await.expect(0);
    let row = run.stdout.lines().nth(1).unwrap();
    assert!(row.ends_with("  c (stalled)"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_show_the_ledger_and_run_now_runs_the_job() {
    let server = redis();
    let url = server.url();
    // After a first quick run, a run that goes on for a minute: the ledger shows it running.
    // (Its lock is taken on the uncontended fast path, whose fence only the holder knows: the
    // first run of a fresh server issues its fence by script, later runs do not.)
    let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let slow = Job::new("slow", "* * * * * *", "UTC", move |_ctx| {
        let first = started.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
        async move {
            if !first {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok::<(), std::io::Error>(())
        }
    })
    .unwrap();
    let jobs = vec![
        job("tick", "* * * * * *", "UTC"),
        job("manual", YEARLY, "Asia/Tokyo"),
        slow,
    ];
    let (stop, replica) = start(scheduler(&url, "solo", jobs));

    let run = eventually(Duration::from_secs(20), "a run of tick ended", || async {
        let run = dlock(&["--url", &url, "runs", "tick", "--json"]).await;
        let doc = run.json();
        doc["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["outcome"] == "succeeded")
            .cloned()
    })
    .await;
    assert_eq!(run["replica"], "solo");
    assert_eq!(run["manual"], false);
    assert_eq!(run["pid"], std::process::id());
    assert!(run["fencing_token"].as_u64().is_some(), "{run:#}");
    assert!(run["duration_ms"].as_u64().is_some(), "{run:#}");
    let table = dlock(&["--url", &url, "runs", "tick", "--limit", "1"])
        .await
        .expect(0);
    assert_eq!(table.stdout.lines().count(), 2, "{table:?}");
    assert!(table.stdout.contains("succeeded") && table.stdout.contains("schedule"));

    eventually(
        Duration::from_secs(20),
        "a run of slow is going",
        || async {
            let run = dlock(&["--url", &url, "runs", "slow", "--json"]).await;
            let runs = run.json()["runs"].as_array().unwrap().clone();
            // Running under its lease (it has its fence), not only just claimed.
            runs.iter()
                .any(|r| r["outcome"] == "running" && r["fencing_token"].is_u64())
                .then_some(())
        },
    )
    .await;
    // Nothing ran `manual` yet; `run-now` makes it run, once.
    let none = dlock(&["--url", &url, "runs", "manual"]).await.expect(3);
    assert!(none.stderr.contains("no run of job `manual`"), "{none:?}");
    let asked = dlock(&["--url", &url, "run-now", "manual", "--json"])
        .await
        .expect(0);
    assert_eq!(asked.json()["replicas"], serde_json::json!(["solo"]));
    let manual = eventually(
        Duration::from_secs(20),
        "the requested run ended",
        || async {
            let run = dlock(&["--url", &url, "runs", "manual", "--json"]).await;
            let runs = run.json()["runs"].as_array().unwrap().clone();
            runs.into_iter().find(|r| r["outcome"] == "succeeded")
        },
    )
    .await;
    assert_eq!(manual["manual"], true);
    let jobs = dlock(&["--url", &url, "jobs", "--json"]).await.expect(0);
    let listed = jobs.json()["jobs"].as_array().unwrap().clone();
    let manual_job = listed.iter().find(|j| j["name"] == "manual").unwrap();
    assert_eq!(manual_job["last_run"]["outcome"], "succeeded");
    // The table shows one zone per row, the job's, on each time: not the last run in UTC.
    let table = dlock(&["--url", &url, "jobs"]).await.expect(0);
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with("manual"))
        .unwrap();
    assert_eq!(row.matches(" JST").count(), 2, "{row}");
    assert!(!row.contains("Z,") && !row.contains("UTC"), "{row}");

    // A job that is not known (a typo): refused with exit 3 and the close name; nothing is
    // written. With --force: done (kept in Redis), with a note that no replica runs it.
    for action in ["pause", "resume", "run-now"] {
        let typo = dlock(&["--url", &url, action, "tikc"]).await.expect(3);
        assert_eq!(typo.stderr.lines().count(), 1, "{typo:?}");
        assert!(typo.stderr.contains("did you mean tick"), "{typo:?}");
        assert!(typo.stderr.contains("--force"), "{typo:?}");
    }
    let mut con = server.connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("dlock:{sched:tikc}*")
        .query(&mut con)
        .unwrap();
    assert!(keys.is_empty(), "an unknown job left {keys:?}");
    let forced = dlock(&["--url", &url, "pause", "tikc", "--force"])
        .await
        .expect(0);
    assert!(forced.stderr.contains("no running replica"), "{forced:?}");
    // Known from its pause record now.
    dlock(&["--url", &url, "resume", "tikc"]).await.expect(0);

    stop.send(()).unwrap();
    replica.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_controls_work_on_a_cluster() {
    let cluster = RedisCluster::start().unwrap_or_else(|e| panic!("cluster: {e}"));
    let urls = cluster.urls();
    let client = Client::cluster_builder(urls.iter().map(String::as_str))
        .build()
        .unwrap();
    let replica = Scheduler::builder(client)
        .replica_id("c1")
        .heartbeat(HEARTBEAT)
        .job(job("sharded", YEARLY, "Asia/Tokyo"))
        .build()
        .unwrap();
    let (stop, task) = start(replica);
    eventually(
        Duration::from_secs(20),
        "the replica registered",
        || async { (replicas_of(&urls[0], "sharded").await == ["c1"]).then_some(()) },
    )
    .await;
    dlock(&["--url", &urls[1], "pause", "sharded"])
        .await
        .expect(0);
    let run = dlock(&["--url", &urls[2], "jobs", "--json"])
        .await
        .expect(0);
    let listed = &run.json()["jobs"][0];
    assert_eq!(listed["time_zone"], "Asia/Tokyo");
    assert_eq!(listed["paused"], true);
    stop.send(()).unwrap();
    task.await.unwrap();
    dlock(&["--url", &urls[0], "jobs"]).await.expect(3);
}

/// The runs of `job` as `dlock runs JOB --json` shows them.
async fn runs_of(url: &str, job: &str) -> Vec<serde_json::Value> {
    let run = dlock(&["--url", url, "runs", job, "--json"]).await;
    if run.code != 0 {
        return Vec::new();
    }
    run.json()["runs"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_show_attempts_and_a_paused_job_holds_its_pending_retry() {
    let server = redis();
    let url = server.url();
    // At least once: the first attempt fails, the second succeeds, 1 s apart.
    let flaky = Job::new("flaky", YEARLY, "UTC", |ctx| async move {
        if ctx.attempt() == 1 {
            return Err("the first attempt fails".to_owned());
        }
        Ok(())
    })
    .unwrap()
    .delivery(dlock_scheduler::Delivery::at_least_once(
        3,
        Duration::from_secs(1),
    ));
    let (stop, replica) = start(scheduler(&url, "solo", vec![flaky]));
    // The registry carries each job's delivery (format 3).
    eventually(Duration::from_secs(20), "flaky registered", || async {
        (!replicas_of(&url, "flaky").await.is_empty()).then_some(())
    })
    .await;
    let listed = dlock(&["--url", &url, "jobs", "--json"])
        .await
        .expect(0)
        .json();
    let job = &listed["jobs"][0];
    assert_eq!(
        job["replicas"][0]["delivery"],
        serde_json::json!({"mode": "at_least_once", "attempts": 3, "backoff_ms": 1000}),
        "{job:#}"
    );
    assert!(job["handler"].is_null() && !job["unrunnable"].as_bool().unwrap());
    dlock(&["--url", &url, "run-now", "flaky"]).await.expect(0);

    // The failed first attempt, with its next attempt pending; pausing holds it.
    let pending = eventually(Duration::from_secs(20), "a pending retry", || async {
        runs_of(&url, "flaky")
            .await
            .into_iter()
            .find(|r| r["outcome"] == "failed" && r["next_retry"].is_string())
    })
    .await;
    dlock(&["--url", &url, "pause", "flaky"]).await.expect(0);
    assert_eq!(pending["attempt"], 1, "{pending:#}");
    assert_eq!(pending["error"], "the first attempt fails");
    assert_eq!(pending["earlier_attempts"], serde_json::json!([]));
    let due = chrono::DateTime::parse_from_rfc3339(pending["next_retry"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    // Nothing can be awaited for a retry that must not happen: wait until it was due, plus
    // two polls of the replica (200 ms each).
    let past = (due - chrono::Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(past + Duration::from_millis(400)).await;
    let held = runs_of(&url, "flaky").await;
    assert_eq!(held.len(), 1);
    assert_eq!(
        held[0]["attempt"], 1,
        "a paused job ran its retry: {held:#?}"
    );
    assert!(held[0]["next_retry"].is_string(), "{held:#?}");

    // Resumed: the second attempt runs and succeeds; the first is listed before it.
    dlock(&["--url", &url, "resume", "flaky"]).await.expect(0);
    let done = eventually(Duration::from_secs(20), "the second attempt", || async {
        runs_of(&url, "flaky")
            .await
            .into_iter()
            .find(|r| r["outcome"] == "succeeded")
    })
    .await;
    assert_eq!(done["attempt"], 2, "{done:#}");
    assert!(done["next_retry"].is_null(), "{done:#}");
    let first = &done["earlier_attempts"][0];
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["outcome"], "failed");
    assert_eq!(first["error"], "the first attempt fails");
    assert_eq!(first["replica"], "solo");
    let fence = |run: &serde_json::Value| run["fencing_token"].as_u64().unwrap();
    assert!(fence(first) < fence(&done), "{done:#}");
    let table = dlock(&["--url", &url, "runs", "flaky"]).await.expect(0);
    assert!(table.stdout.contains("2 (1 failed)"), "{table:?}");

    stop.send(()).unwrap();
    replica.await.unwrap();
}
