//! `dlock inspect NAME`: who holds a lock (each kind of that name, or the one `--kind` names);
//! a free lock exits 3.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{client, dlock, me, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shows_the_holder_of_a_held_lock_and_says_a_free_one_is_free() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let options = MutexOptions::new()
        .ttl(Duration::from_secs(30))
        .label("nightly");
    let guard = holder
        .mutex_with("report", options)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let write = holder
        .rw_lock("report")
        .unwrap()
        .try_write()
        .await
        .unwrap()
        .unwrap();
    let (host, pid) = me();

    let run = dlock(&["--url", &url, "inspect", "report", "--json"])
        .await
        .expect(0);
    let doc = run.json();
    assert_eq!(doc["held"], true);
    let kinds: Vec<&str> = doc["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["mutex", "rw_lock"], "{doc:#}");
    assert_eq!(doc["locks"][0]["holders"][0]["label"], "nightly");
    assert_eq!(doc["locks"][0]["holders"][0]["host"], host.as_str());
    assert_eq!(doc["locks"][1]["holders"][0]["mode"], "write");

    let run = dlock(&["--url", &url, "inspect", "report", "--kind", "mutex"])
        .await
        .expect(0);
    assert!(run.stdout.contains(&format!("{pid}")), "{run:?}");
    assert!(!run.stdout.contains("rw-lock"), "{run:?}");

    // Free: exit 3, a note, and `held: false` in JSON.
    let run = dlock(&["--url", &url, "inspect", "report", "--kind", "semaphore"])
        .await
        .expect(3);
    assert!(run.stderr.contains("semaphore `report` is free"), "{run:?}");
    let run = dlock(&["--url", &url, "inspect", "elsewhere", "--json"])
        .await
        .expect(3);
    assert_eq!(run.json()["held"], false);
    assert_eq!(run.json()["locks"], serde_json::json!([]));

    // A name no lock can have is a usage error naming the rule.
    let run = dlock(&["--url", &url, "inspect", "a{b}"]).await.expect(2);
    assert!(run.stderr.contains("hash tag"), "{run:?}");

    write.release().await.unwrap();
    guard.release().await.unwrap();
}
