//! Run with: `make demo` (or `cargo run -p counter`).
//!
//! Several replica processes share one counter in Redis and increment it the unsafe way:
//! read, think for a moment, write. Without a lock, concurrent replicas overwrite each other's
//! updates. Each turn here happens under a dlock mutex, so the final count is exact, and every
//! holder prints the fencing token of its turn: always larger than the one before.
//!
//! The parent starts its own `redis-server` (or uses `DLOCK_REDIS_URL` when set), then starts
//! the replicas as child processes of this same binary.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::{Command, ExitCode};
use std::time::Duration;

use dlock_core::{Client, MutexOptions};
use redis::AsyncCommands;

const REPLICAS: usize = 3;
const TASKS: usize = 2;
const TURNS: usize = 5;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("replica") => replica(&args),
        _ => parent(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parent() -> Result<(), BoxError> {
    // Keep the server alive (it is killed on drop) while the replicas run.
    let (url, _server) = match std::env::var("DLOCK_REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = dlock_testkit::RedisServer::start()?;
            (server.url(), Some(server))
        }
    };
    println!(
        "redis at {url}; starting {REPLICAS} replica processes × {TASKS} tasks × {TURNS} turns"
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let mut con = runtime.block_on(async {
        let mut con = redis::Client::open(url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        // A reused server (DLOCK_REDIS_URL) keeps the last run's count: start from zero.
        let _: u64 = con.del("demo:counter").await?;
        Ok::<_, BoxError>(con)
    })?;
    let me = std::env::current_exe()?;
    let mut children = Vec::new();
    for replica in 0..REPLICAS {
        children.push(
            Command::new(&me)
                .args(["replica", &url, &replica.to_string()])
                .spawn()?,
        );
    }
    let mut failed = 0;
    for mut child in children {
        if !child.wait()?.success() {
            failed += 1;
        }
    }
    let counter: u64 = runtime.block_on(async {
        Ok::<_, BoxError>(
            con.get::<_, Option<u64>>("demo:counter")
                .await?
                .unwrap_or(0),
        )
    })?;
    let expected = u64::try_from(REPLICAS * TASKS * TURNS)?;
    println!("final counter: {counter} (expected {expected})");
    if failed > 0 || counter != expected {
        return Err(format!(
            "{failed} replicas failed; the counter is off by {}",
            expected.abs_diff(counter)
        )
        .into());
    }
    println!("no update was lost: each read-think-write ran alone, across {REPLICAS} processes");
    Ok(())
}

fn replica(args: &[String]) -> Result<(), BoxError> {
    let url = args.get(2).ok_or("missing url")?.clone();
    let replica = args.get(3).ok_or("missing replica number")?.clone();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let client = Client::open(url.as_str())?;
        let lock = client.mutex_with(
            "demo:counter",
            MutexOptions::new()
                .ttl(Duration::from_secs(10))
                .label(format!("replica {replica}")),
        )?;
        let plain = redis::Client::open(url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let (lock, mut con, replica) = (lock.clone(), plain.clone(), replica.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..TURNS {
                    let guard = lock.acquire_timeout(Duration::from_secs(30)).await?;
                    let value: Option<u64> = con.get("demo:counter").await?;
                    let value = value.unwrap_or(0);
                    // "Think": long enough that unlocked replicas would overwrite each other.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let () = con.set("demo:counter", value + 1).await?;
                    println!(
                        "replica {replica} (pid {}) task {task}: counter {value} -> {}  fencing token {}",
                        std::process::id(),
                        value + 1,
                        guard.fencing_token().await?
                    );
                    guard.release().await?;
                }
                Ok::<(), BoxError>(())
            }));
        }
        for task in tasks {
            task.await??;
        }
        // A clean exit leaves no lock or queue entry for the other replicas to wait out.
        let report = client.shutdown(Duration::from_secs(5)).await;
        if !report.is_complete() {
            eprintln!("replica {replica}: {report}");
        }
        Ok(())
    })
}
