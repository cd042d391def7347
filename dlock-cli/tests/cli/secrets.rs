//! A password in the URL never appears in what `dlock` prints: not in tables, JSON, notes,
//! errors (a wrong password, a server that is down, a malformed URL) nor in `--help`.

use std::time::Duration;

use dlock_core::MutexOptions;
use dlock_testkit::{RedisServer, ServerOptions};

use crate::support::{Run, client, dlock, dlock_env};

const PASSWORD: &str = "s3cr3t-Pa55";

fn assert_clean(run: &Run, secret: &str) {
    assert!(
        !run.stdout.contains(secret) && !run.stderr.contains(secret),
        "the password leaked: {run:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_never_appears_in_any_output() {
    let options = ServerOptions::new().arg("requirepass", PASSWORD);
    let server = RedisServer::start_with(options).unwrap();
    let url = server.url();
    assert!(
        url.contains(PASSWORD),
        "the test needs a URL with the password: {url}"
    );
    let holder = client(&url);
    let options = MutexOptions::new().ttl(Duration::from_secs(30));
    let guard = holder
        .mutex_with("guarded", options)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();

    let port = url.rsplit(':').next().unwrap().trim_end_matches('/');
    let wrong = format!("redis://:wrong-Pa55word@127.0.0.1:{port}/");
    let down = format!("redis://:{PASSWORD}@127.0.0.1:1/");
    let malformed = format!("redis://:{PASSWORD}@127.0.0.1:notaport/");
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["--url", &url, "locks"], 0),
        (vec!["--url", &url, "locks", "--json"], 0),
        (vec!["--url", &url, "inspect", "guarded"], 0),
        (vec!["--url", &url, "inspect", "guarded", "--json"], 0),
        (vec!["--url", &url, "unlock", "guarded"], 2),
        (vec!["--url", &url, "jobs"], 3),
        (vec!["--url", &url, "runs", "none"], 3),
        (vec!["--url", &url, "pause", "none"], 3),
        (vec!["--url", &url, "pause", "none", "--force"], 0),
        (vec!["--url", &down, "locks"], 1),
        (vec!["--url", &malformed, "locks"], 2),
        (vec!["--url", &url, "--timeout", "nope", "locks"], 2),
    ];
    for (args, code) in cases {
        let run = dlock(&args).await.expect(code);
        assert_clean(&run, PASSWORD);
    }
    let run = dlock(&["--url", &wrong, "locks"]).await.expect(1);
    assert_clean(&run, "wrong-Pa55word");
    // The environment's value is not shown by --help (clap would print it otherwise).
    let run = dlock_env(&["--help"], &[("DLOCK_REDIS_URL", &url)])
        .await
        .expect(0);
    assert_clean(&run, PASSWORD);
    let run = dlock_env(&["locks"], &[("DLOCK_REDIS_URL", &url)])
        .await
        .expect(0);
    assert_clean(&run, PASSWORD);
    guard.release().await.unwrap();
}

/// Only passwords are secret, and only messages are scrubbed: connected as the user `billing`
/// with the prefix `billing:`, the JSON says `"prefix": "billing:"`, the lock `billing-report`
/// keeps its name in the table and in `inspect` (they read `***:` and `***-report` before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_name_is_not_a_secret_and_data_is_never_rewritten() {
    let server = crate::support::redis();
    let mut con = server.connection().unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "billing",
            "on",
            ">bill-Pa55",
            "~*",
            "&*",
            "+@all",
        ])
        .query(&mut con)
        .unwrap();
    let port = server.port();
    let url = format!("redis://billing:bill-Pa55@127.0.0.1:{port}/");
    let holder = dlock_core::Client::builder(url.as_str())
        .key_prefix("billing:")
        .build()
        .unwrap();
    let guard = holder
        .mutex_with(
            "billing-report",
            MutexOptions::new().label("billing nightly"),
        )
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let base = ["--url", url.as_str(), "--prefix", "billing:"];
    let run = dlock(&[&base[..], &["locks", "--json"]].concat())
        .await
        .expect(0);
    let doc = run.json();
    assert_eq!(doc["prefix"], "billing:", "{doc:#}");
    assert_eq!(doc["locks"][0]["name"], "billing-report", "{doc:#}");
    assert_eq!(doc["locks"][0]["holders"][0]["label"], "billing nightly");
    let run = dlock(&[&base[..], &["locks"]].concat()).await.expect(0);
    assert!(run.stdout.contains("billing-report"), "{run:?}");
    assert!(run.stdout.contains("billing nightly"), "{run:?}");
    assert!(!run.stdout.contains("***"), "{run:?}");
    let run = dlock(&[&base[..], &["inspect", "billing-other"]].concat())
        .await
        .expect(3);
    assert!(run.stderr.contains("billing-other"), "{run:?}");
    assert_clean(&run, "bill-Pa55");
    guard.release().await.unwrap();
}
