//! One-off jobs from the command line (issue #51), against a replica running in this process
//! with the handler `work`: `dlock pause once:work` works before any one-off ran (it exited 3
//! "no running replica registered it"); `dlock run-now once:work` is refused with the call to
//! use (it answered done and nothing ran); `dlock jobs` lists the handler and `dlock once` its
//! pending jobs (what, when, keyed), in tables and in JSON. And one zone policy: `dlock runs`
//! shows times in the job's zone like `dlock jobs` (`--utc`: in UTC).

use std::time::Duration;

use dlock_scheduler::{Job, Scheduler};
use tokio::sync::oneshot;

use crate::support::{client, dlock, eventually, redis};

/// A replica with the handler `work` and the job `tick` (every second, in Tokyo).
fn replica(url: &str) -> Scheduler {
    Scheduler::builder(client(url))
        .replica_id("solo")
        .heartbeat(Duration::from_millis(200))
        .handler("work", |_ctx| async { Ok::<(), std::io::Error>(()) })
        .job(
            Job::new("tick", "* * * * * *", "Asia/Tokyo", |_ctx| async {
                Ok::<(), std::io::Error>(())
            })
            .unwrap(),
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_offs_are_listed_paused_before_any_ran_and_run_now_is_refused() {
    let server = redis();
    let url = server.url();
    let scheduler = replica(&url);
    let enqueuer = scheduler.clone();
    let (stop, task) = start(scheduler);
    let handler = eventually(Duration::from_secs(20), "the handler listed", || async {
        let run = dlock(&["--url", &url, "jobs", "--json"]).await;
        let doc = run.json();
        doc["one_off_handlers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == "work" && h["replicas"] == serde_json::json!(["solo"]))
            .cloned()
    })
    .await;
    assert_eq!(handler["job"], "once:work");
    assert_eq!(handler["paused"], false);
    assert_eq!(handler["queued"], 0);

    // Before any one-off of `work` ran.
    let paused = dlock(&["--url", &url, "pause", "once:work", "--json"])
        .await
        .expect(0);
    assert_eq!(paused.json()["paused"], true);
    assert_eq!(paused.json()["replicas"], serde_json::json!(["solo"]));
    assert!(!paused.stderr.contains("no running replica"), "{paused:?}");
    let refused = dlock(&["--url", &url, "run-now", "once:work"])
        .await
        .expect(2);
    assert!(refused.stderr.contains("run_at"), "{refused:?}");

    // Paused: enqueued one-offs wait, and are listed.
    let none = dlock(&["--url", &url, "once", "work"]).await.expect(3);
    assert!(none.stderr.contains("no pending one-off job"), "{none:?}");
    let keyed = enqueuer
        .run_after_keyed("work", "invoice-4711\tQ4", Duration::ZERO, &4711)
        .await
        .unwrap();
    let later = enqueuer
        .run_after(
            "work",
            Duration::from_secs(3600),
            &serde_json::json!({"tenant": "acme"}),
        )
        .await
        .unwrap();
    let listed = dlock(&["--url", &url, "once", "--json"]).await.expect(0);
    let doc = listed.json();
    let work = &doc["handlers"][0];
    assert_eq!(
        (&work["name"], &work["paused"], &work["queued"]),
        (&"work".into(), &true.into(), &2.into())
    );
    let pending = work["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 2, "{doc:#}");
    assert_eq!(pending[0]["id"], keyed.to_string());
    assert_eq!(pending[0]["keyed"], true);
    assert_eq!(
        pending[0]["key"], "invoice-4711\tQ4",
        "the key as given: {doc:#}"
    );
    assert_eq!(pending[0]["args"], 4711);
    assert_eq!(pending[0]["attempt"], 1);
    assert_eq!(pending[0]["enqueued_by"], "solo");
    assert_eq!(pending[1]["id"], later.to_string());
    assert_eq!(pending[1]["args"]["tenant"], "acme");
    assert_eq!(pending[1]["keyed"], false);
    assert_eq!(pending[1]["key"], serde_json::Value::Null);
    let table = dlock(&["--url", &url, "once"]).await.expect(0);
    assert_eq!(table.stdout.lines().count(), 3, "{table:?}");
    let row = |id: String| {
        let line = table.stdout.lines().find(|l| l.contains(&id));
        line.unwrap_or_else(|| panic!("no row of {id}: {table:?}"))
    };
    // The key's tab is escaped: it must not split the table's columns.
    assert!(
        row(keyed.to_string()).contains(" invoice-4711\\tQ4 "),
        "{table:?}"
    );
    assert!(row(later.to_string()).contains(" - "), "{table:?}");
    assert!(table.stderr.contains("is paused"), "{table:?}");
    let jobs = dlock(&["--url", &url, "jobs"]).await.expect(0);
    let row = jobs
        .stdout
        .lines()
        .find(|l| l.starts_with("work "))
        .unwrap();
    assert!(
        row.contains("once:work") && row.contains("yes") && row.contains("solo"),
        "{row}"
    );

    dlock(&["--url", &url, "resume", "once:work"])
        .await
        .expect(0);
    stop.send(()).unwrap();
    task.await.unwrap();
}

/// One zone policy: `dlock runs` shows a job's times in its zone, as `dlock jobs` does (it
/// printed UTC); `--utc` shows both in UTC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_and_jobs_show_the_jobs_zone_or_utc_on_request() {
    let server = redis();
    let url = server.url();
    let (stop, task) = start(replica(&url));
    eventually(Duration::from_secs(20), "a run of tick", || async {
        let run = dlock(&["--url", &url, "runs", "tick", "--json"]).await;
        (run.code == 0).then_some(())
    })
    .await;
    let zoned = dlock(&["--url", &url, "runs", "tick", "--limit", "1"])
        .await
        .expect(0);
    let row = zoned.stdout.lines().nth(1).unwrap();
    assert_eq!(row.matches(" JST").count(), 2, "{row}");
    let utc = dlock(&["--url", &url, "runs", "tick", "--limit", "1", "--utc"])
        .await
        .expect(0);
    let row = utc.stdout.lines().nth(1).unwrap();
    assert!(
        !row.contains("JST") && row.matches("Z ").count() >= 2,
        "{row}"
    );
    let jobs = dlock(&["--url", &url, "jobs", "--utc"]).await.expect(0);
    let row = jobs.stdout.lines().find(|l| l.starts_with("tick")).unwrap();
    assert!(!row.contains("JST"), "{row}");
    stop.send(()).unwrap();
    task.await.unwrap();
}

/// A replica running until its sender is used or dropped.
fn start(scheduler: Scheduler) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
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
