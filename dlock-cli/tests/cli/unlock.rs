//! `dlock unlock NAME`: forces a mutex open and the oldest waiter gets it; on a terminal it asks
//! first (a pseudo-terminal made by `script`); without `--yes` and without a terminal to confirm
//! on, it refuses and leaves the lock as it is.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{client, dlock, eventually, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_yes_hands_the_lock_to_the_waiter() {
    let server = redis();
    let url = server.url();
    let stuck = client(&url);
    let options = MutexOptions::new().ttl(Duration::from_secs(120));
    let held = stuck
        .mutex_with("stuck", options)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let waiting = client(&url);
    let lock = waiting
        .mutex_with("stuck", MutexOptions::new().label("next in line"))
        .unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(60)).await });
    eventually(Duration::from_secs(10), "the waiter is queued", || async {
        let info = stuck.inspect("stuck").await.unwrap()?;
        (info.waiters == 1).then_some(())
    })
    .await;

    let run = dlock(&["--url", &url, "unlock", "stuck", "--yes", "--json"])
        .await
        .expect(0);
    let doc = run.json();
    assert_eq!(doc["was_held_by"]["pid"], std::process::id());
    assert_eq!(doc["now_held_by"]["label"], "next in line", "{doc:#}");
    // The waiter gets the lock (long before its own 60 s wait ends).
    let granted = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter was handed the lock")
        .unwrap()
        .expect("the waiter holds the lock");
    let now = stuck.inspect("stuck").await.unwrap().unwrap();
    assert_eq!(now.label.as_deref(), Some("next in line"));
    granted.release().await.unwrap();
    // The forced holder's lease is gone: its release does not find it.
    assert!(!matches!(held.release().await, Ok(outcome) if outcome.was_held()));

    // Nothing held: exit 3.
    let run = dlock(&["--url", &url, "unlock", "stuck", "--yes"])
        .await
        .expect(3);
    assert!(run.stderr.contains("not held"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_without_yes_and_no_terminal_refuses() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let guard = holder
        .mutex("busy")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();

    let run = dlock(&["--url", &url, "unlock", "busy"]).await.expect(2);
    assert!(run.stderr.contains("stdin is not a terminal"), "{run:?}");
    assert!(run.stderr.contains("--yes"), "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "one line: {run:?}");
    let still = holder.inspect("busy").await.unwrap().expect("still held");
    assert_eq!(still.pid, std::process::id());
    guard.release().await.unwrap();
}

/// Runs `dlock args` on a terminal (a pty made by util-linux's `script`, essential on Debian)
/// with `answer` typed ahead; returns the exit code and everything the terminal showed.
async fn on_a_terminal(args: &[&str], answer: &str) -> (i32, String) {
    let line = std::iter::once(env!("CARGO_BIN_EXE_dlock"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let answer = answer.to_owned();
    tokio::task::spawn_blocking(move || {
        let output = assert_cmd::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .env_remove("DLOCK_REDIS_URL")
            .write_stdin(answer)
            .timeout(Duration::from_secs(60))
            .output()
            .expect("`script` (util-linux) runs dlock on a pseudo-terminal");
        let shown = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.code().unwrap_or(-1), shown)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_on_a_terminal_asks_first() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let guard = holder
        .mutex_with("asked", MutexOptions::new().ttl(Duration::from_secs(60)))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();

    // No: nothing changes, exit 4.
    let (code, shown) = on_a_terminal(&["--url", &url, "unlock", "asked"], "n\n").await;
    assert_eq!(code, 4, "{shown}");
    assert!(shown.contains("[y/N]"), "{shown}");
    assert!(
        shown.contains(&format!("pid {}", std::process::id())),
        "{shown}"
    );
    assert!(
        holder.inspect("asked").await.unwrap().is_some(),
        "still held"
    );

    // Yes: forced open.
    let (code, shown) = on_a_terminal(&["--url", &url, "unlock", "asked"], "y\n").await;
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("forced `asked` open"), "{shown}");
    assert_eq!(holder.inspect("asked").await.unwrap(), None);
    drop(guard);
}

/// `dlock unlock NAME --ask`: asks the holder without forcing anything (no confirmation
/// needed); the watchdog holder learns of it and keeps the lock until it decides. The forced
/// path says it forced (`"action": "forced"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_ask_asks_the_holder_and_forces_nothing() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(900))
        .watchdog();
    let guard = holder
        .mutex_with("asked", options)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lease = guard.lease();

    let run = dlock(&["--url", &url, "unlock", "asked", "--ask", "--json"])
        .await
        .expect(0);
    let doc = run.json();
    assert_eq!(doc["action"], "asked", "{doc:#}");
    assert_eq!(doc["kind"], "mutex", "{doc:#}");
    assert_eq!(doc["holders"], 1, "{doc:#}");
    tokio::time::timeout(Duration::from_secs(5), lease.release_requested())
        .await
        .expect("the holder learns of the request with its next renewal");
    let still = holder.inspect("asked").await.unwrap().expect("still held");
    assert_eq!(still.pid, std::process::id());

    let text = dlock(&["--url", &url, "unlock", "asked", "--ask"])
        .await
        .expect(0);
    assert!(text.stdout.contains("nothing was forced"), "{text:?}");

    let forced = dlock(&["--url", &url, "unlock", "asked", "--yes", "--json"])
        .await
        .expect(0);
    assert_eq!(forced.json()["action"], "forced");
    assert!(!guard.release().await.unwrap().was_held());

    // Nobody holds it any more: exit 3, nobody asked.
    let run = dlock(&["--url", &url, "unlock", "asked", "--ask"])
        .await
        .expect(3);
    assert!(run.stderr.contains("nobody to ask"), "{run:?}");
}
