//! `dlock schedule add|remove|list` (issue #51) against a replica running in this process with
//! the handler `export`: a schedule added from the command line runs on the replica; what the
//! API refuses (a bad cron expression or zone, a handler no live replica has, arguments that
//! are not JSON, the name of a job in code) is refused with exit 2 and the API's own message;
//! removing it twice exits 3 the second time; `--json` for each.

use std::time::Duration;

use dlock_scheduler::{Job, Scheduler};
use tokio::sync::oneshot;

use crate::support::{client, dlock, eventually, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_added_listed_and_removed_with_the_apis_checks() {
    let server = redis();
    let url = server.url();
    let replica = Scheduler::builder(client(&url))
        .replica_id("solo")
        .heartbeat(Duration::from_millis(200))
        .handler("export", |_ctx| async { Ok::<(), std::io::Error>(()) })
        .job(
            Job::new("tick", "0 0 1 1 *", "UTC", |_ctx| async {
                Ok::<(), std::io::Error>(())
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    // The API's own refusals, to compare with the command's.
    let api = replica.clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        replica
            .run_until(
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
            )
            .await;
    });
    let none = dlock(&["--url", &url, "schedule", "list"]).await.expect(3);
    assert!(none.stderr.contains("no run-time schedule"), "{none:?}");
    eventually(
        Duration::from_secs(20),
        "the replica registered",
        || async {
            let run = dlock(&["--url", &url, "jobs", "--json"]).await;
            (run.code == 0).then_some(())
        },
    )
    .await;

    let add = |cron: &'static str, tz: &'static str, handler: &'static str| {
        let url = url.clone();
        async move {
            let args = [
                "--url",
                &url,
                "schedule",
                "add",
                "export:acme",
                "--handler",
                handler,
                "--cron",
                cron,
                "--tz",
                tz,
                "--args",
                r#"{"tenant": "acme"}"#,
                "--json",
            ];
            dlock(&args).await
        }
    };
    // Refused as the API refuses, with its message.
    for (cron, tz) in [("0 25 * * *", "UTC"), ("0 3 * * *", "Mars/Olympus")] {
        let refused = add(cron, tz, "export").await.expect(2);
        let why = api
            .add_schedule("export:acme", "export", cron, tz, &())
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.stderr.contains(&why), "{refused:?} vs {why}");
    }
    let typo = add("0 3 * * *", "UTC", "exprot").await.expect(2);
    assert!(typo.stderr.contains("did you mean export"), "{typo:?}");
    let clash = dlock(&[
        "--url",
        &url,
        "schedule",
        "add",
        "tick",
        "--handler",
        "export",
        "--cron",
        "0 3 * * *",
        "--tz",
        "UTC",
    ])
    .await
    .expect(2);
    assert!(
        clash.stderr.contains("job in a live replica's code"),
        "{clash:?}"
    );
    let not_json = dlock(&[
        "--url",
        &url,
        "schedule",
        "add",
        "x",
        "--handler",
        "export",
        "--cron",
        "0 3 * * *",
        "--tz",
        "UTC",
        "--args",
        "{tenant",
    ])
    .await
    .expect(2);
    assert!(not_json.stderr.contains("not JSON"), "{not_json:?}");
    let none = dlock(&["--url", &url, "schedule", "list"]).await.expect(3);
    assert!(none.stdout.is_empty(), "nothing was stored: {none:?}");

    let added = add("0 3 * * *", "Europe/Berlin", "export").await.expect(0);
    assert_eq!(added.json()["replicas"], serde_json::json!(["solo"]));
    let listed = dlock(&["--url", &url, "schedule", "list", "--json"])
        .await
        .expect(0);
    let schedule = &listed.json()["schedules"][0];
    assert_eq!(schedule["name"], "export:acme");
    assert_eq!(schedule["cron"], "0 3 * * *");
    assert_eq!(schedule["time_zone"], "Europe/Berlin");
    assert_eq!(schedule["args"]["tenant"], "acme");
    // The replica runs it: `dlock jobs` lists it as a run-time schedule of `export` on solo.
    eventually(
        Duration::from_secs(20),
        "the replica took it up",
        || async {
            let run = dlock(&["--url", &url, "jobs", "--json"]).await;
            let doc = run.json();
            doc["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| {
                    j["name"] == "export:acme"
                        && j["handler"] == "export"
                        && j["replicas"][0]["id"] == "solo"
                })
                .then_some(())
        },
    )
    .await;

    let removed = dlock(&["--url", &url, "schedule", "remove", "export:acme", "--json"])
        .await
        .expect(0);
    assert_eq!(removed.json()["removed"], true);
    let again = dlock(&["--url", &url, "schedule", "remove", "export:acme"])
        .await
        .expect(3);
    assert!(
        again.stderr.contains("no run-time schedule `export:acme`"),
        "{again:?}"
    );
    stop.send(()).unwrap();
    task.await.unwrap();
}
