//! Run with: `make demo` (or `cargo run -p lottery`); to look at the dashboard for as long as
//! you like, `cargo run -p lottery -- --keep-running` (or `DLOCK_DEMO_KEEP_RUNNING=1 make demo`),
//! then Enter to stop the replicas and print the report (Ctrl-C quits at once, without it).
//!
//! A service runs as three replicas. At every lottery draw — here every 2 seconds instead of
//! every noon, so the demo ends in about half a minute — ten winners must be drawn from the
//! registered users: once, not once per replica. Each replica runs a dlock `Scheduler` with the
//! same `#[scheduled]` job; the replicas' clocks are skewed on purpose (−300 ms, 0, +500 ms).
//! Each draw is claimed in Redis by (job, scheduled instant), so exactly one replica draws it,
//! and the live replicas take turns, so every replica draws some.
//!
//! The parent starts its own `redis-server` (or uses `DLOCK_REDIS_URL`), registers 100 users,
//! starts the replicas as child processes of this same binary, and when they are done prints
//! every draw (which replica, the winners), the scheduler's run ledger and how many draws each
//! replica made.
//!
//! Replica A also serves the scheduler dashboard (`dlock_scheduler::web`, mounted under
//! `/jobs`) and prints its address: the jobs, their next draw, who drew what, and buttons to
//! pause, resume or draw now. `DLOCK_DASHBOARD_ADDR` picks its address (default
//! `127.0.0.1:0`, a free port).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{JobContext, RunOutcome, Scheduler, SkewedClock, scheduled};
use redis::AsyncCommands;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the replicas run: about 12 draws.
const RUN_FOR: Duration = Duration::from_secs(25);
const REPLICAS: [(&str, i64); 3] = [("replica-a", -300), ("replica-b", 0), ("replica-c", 500)];

/// The lottery: ten distinct winners per draw, recorded under the draw's scheduled instant.
#[scheduled(name = "lottery", cron = "*/2 * * * * *", tz = "Europe/Berlin")]
async fn lottery(ctx: JobContext) -> Result<(), redis::RedisError> {
    let mut con = ctx.client().connection();
    let winners: Vec<String> = con.srandmember_multiple("lottery:users", 10).await?;
    let draw = ctx.occurrence().timestamp_millis();
    let record = format!(
        "{} fence={} {}",
        ctx.replica().id(),
        ctx.fencing_token(),
        winners.join(",")
    );
    // SET NX: even a second draw of the same instant could never overwrite the first.
    let _: bool = con.set_nx(format!("lottery:draw:{draw}"), record).await?;
    println!(
        "  {} drew {} → {}",
        ctx.replica().id(),
        ctx.occurrence().format("%H:%M:%S"),
        winners.join(" ")
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("replica") => replica(&args),
        None => parent(keep_running_from_env()),
        Some("--keep-running") if args.len() == 2 => parent(true),
        Some(other) => {
            Err(format!("unknown argument `{other}`; usage: lottery [--keep-running]").into())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `DLOCK_DEMO_KEEP_RUNNING=1` (for `make demo`, which passes no arguments).
fn keep_running_from_env() -> bool {
    std::env::var("DLOCK_DEMO_KEEP_RUNNING").is_ok_and(|v| v == "1")
}

fn parent(keep_running: bool) -> Result<(), BoxError> {
    let (url, _server) = match std::env::var("DLOCK_REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = dlock_testkit::RedisServer::start()?;
            (server.url(), Some(server))
        }
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(seed(&url))?;
    if keep_running {
        println!(
            "redis at {url}; 100 users registered; starting 3 replicas until you press Enter \
             (Ctrl-C quits without the report)\n"
        );
    } else {
        println!(
            "redis at {url}; 100 users registered; starting 3 replicas for {RUN_FOR:?} \
             (`--keep-running` keeps them and the dashboard up)\n"
        );
    }
    let me = std::env::current_exe()?;
    let mut children = Vec::new();
    for (id, skew) in REPLICAS {
        children.push(
            Command::new(&me)
                .args(["replica", &url, id, &skew.to_string()])
                .arg(if keep_running { "keep" } else { "timed" })
                // A kept replica runs until its stdin closes (Enter here). Not Ctrl-C: it
                // reaches the whole process group, redis-server included, before the report.
                .stdin(if keep_running {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .spawn()?,
        );
    }
    if keep_running {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        println!("stopping the replicas…");
        for child in &mut children {
            drop(child.stdin.take());
        }
    }
    let failed = children
        .iter_mut()
        .map(|child| child.wait())
        .filter(|status| !matches!(status, Ok(s) if s.success()))
        .count();
    let (exact, shared) = runtime.block_on(report(&url))?;
    if failed > 0 || !exact || !shared {
        return Err(format!(
            "{failed} replicas failed; every draw exactly once: {exact}; every replica drew: {shared}"
        )
        .into());
    }
    Ok(())
}

async fn seed(url: &str) -> Result<(), BoxError> {
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let users: Vec<String> = (1..=100).map(|i| format!("user{i:03}")).collect();
    let () = con.del("lottery:users").await?;
    let _: usize = con.sadd("lottery:users", users).await?;
    Ok(())
}

fn replica(args: &[String]) -> Result<(), BoxError> {
    let url = args.get(2).ok_or("missing url")?.clone();
    let id = args.get(3).ok_or("missing replica id")?.clone();
    let skew: i64 = args.get(4).ok_or("missing clock skew")?.parse()?;
    let keep_running = args.get(5).is_some_and(|a| a == "keep");
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let scheduler = Scheduler::builder(Client::open(url.as_str())?)
            .replica_id(id.clone())
            .clock(SkewedClock::millis(skew))
            .job(lottery::job()?)
            .build()?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let dashboard = if id == REPLICAS[0].0 {
            Some(tokio::spawn(
                serve_dashboard(scheduler.clone(), stopped).await?,
            ))
        } else {
            None
        };
        let until = async move {
            if keep_running {
                // Until the parent closes our stdin.
                let _ = tokio::task::spawn_blocking(|| {
                    std::io::copy(&mut std::io::stdin(), &mut std::io::sink())
                })
                .await;
            } else {
                tokio::time::sleep(RUN_FOR).await;
            }
        };
        scheduler.run_until(until, Duration::from_secs(5)).await;
        stop.send_replace(true);
        if let Some(server) = dashboard {
            server.await??;
        }
        Ok(())
    })
}

/// Binds the dashboard's address and prints it; the returned future serves the dashboard
/// under `/jobs` until `stopped` turns true.
async fn serve_dashboard(
    scheduler: Scheduler,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> Result<impl std::future::Future<Output = std::io::Result<()>>, BoxError> {
    let addr = std::env::var("DLOCK_DASHBOARD_ADDR").unwrap_or_else(|_| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("the dashboard cannot listen on {addr}: {e}"))?;
    println!(
        "dashboard: http://{}/jobs (served by {})",
        listener.local_addr()?,
        scheduler.replica().id()
    );
    let app = axum::Router::new().nest("/jobs", dlock_scheduler::web::router(scheduler));
    Ok(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
    })
}

/// Prints each draw and the ledger; returns whether every draw happened exactly once, and
/// whether every replica drew at least once (the scheduler spreads occurrences over replicas).
async fn report(url: &str) -> Result<(bool, bool), BoxError> {
    let client = Client::open(url)?;
    let admin = Scheduler::builder(client.clone()).build()?;
    let history = admin.history("lottery").await?;
    let mut con = client.connection();
    println!("\nrun ledger of `lottery` (from Redis):");
    println!(
        "  {:<10} {:<8} {:<10} {:>12} {:<10} fencing token",
        "draw", "how", "replica", "start delay", "outcome"
    );
    let mut exact = !history.is_empty();
    let mut per_replica: BTreeMap<&str, usize> = REPLICAS.iter().map(|(id, _)| (*id, 0)).collect();
    for run in &history {
        *per_replica.entry(run.replica.as_str()).or_insert(0) += 1;
        let delay = run
            .start_delay()
            .map_or("?".to_owned(), |d| format!("{} ms", d.as_millis()));
        let fence = run.fencing_token.map_or("-".to_owned(), |f| f.to_string());
        println!(
            "  {:<10} {:<8} {:<10} {:>12} {:<10} {fence}",
            run.occurrence.format("%H:%M:%S").to_string(),
            how(run.manual),
            run.replica,
            delay,
            run.outcome.to_string()
        );
        let draw: Option<String> = con
            .get(format!(
                "lottery:draw:{}",
                run.occurrence.timestamp_millis()
            ))
            .await?;
        exact &= run.outcome == RunOutcome::Succeeded && draw.is_some();
    }
    let draws: Vec<String> = con.keys("lottery:draw:*").await?;
    // The ledger keeps the last 100 runs (a long `--keep-running`): compare what it covers.
    let oldest = history
        .first()
        .map_or(0, |r| r.occurrence.timestamp_millis());
    let covered = draws
        .iter()
        .filter_map(|k| k.strip_prefix("lottery:draw:")?.parse::<i64>().ok())
        .filter(|&at| at >= oldest)
        .count();
    exact &= covered == history.len();
    let spread: Vec<String> = per_replica
        .iter()
        .map(|(id, n)| format!("{id} {n}"))
        .collect();
    let shared = per_replica.values().all(|&n| n > 0);
    println!(
        "\ndraws per replica: {}; every replica drew: {}",
        spread.join(", "),
        if shared { "yes" } else { "NO" }
    );
    let manual = history.iter().filter(|run| run.manual).count();
    println!("\n{}", summary(draws.len(), manual, REPLICAS.len(), exact));
    Ok((exact, shared))
}

/// How a draw came about: its cron occurrence, or a "Run now" (the dashboard, `dlock run-now`).
fn how(manual: bool) -> &'static str {
    if manual { "run-now" } else { "cron" }
}

/// The report's last line: the draws, how many of them were run-now requests (each of those is a
/// draw of its own, exactly once like the scheduled ones), and the verdict.
fn summary(draws: usize, manual: usize, replicas: usize, exact: bool) -> String {
    let verdict = if exact { "yes" } else { "NO" };
    if manual == 0 {
        return format!(
            "{draws} draws by {replicas} replicas; each draw ran exactly once: {verdict}"
        );
    }
    format!(
        "{draws} draws by {replicas} replicas ({} on schedule, {manual} run now); each draw, \
         run-now ones included, ran exactly once: {verdict}",
        draws.saturating_sub(manual)
    )
}

#[cfg(test)]
mod tests {
    use super::{how, summary};

    #[test]
    fn run_now_draws_are_marked_and_counted_next_to_the_verdict() {
        assert_eq!(how(true), "run-now");
        assert_eq!(how(false), "cron");
        let line = summary(12, 2, 3, true);
        assert!(line.contains("(10 on schedule, 2 run now)"), "{line}");
        assert!(
            line.contains("run-now ones included, ran exactly once: yes"),
            "{line}"
        );
        assert_eq!(
            summary(10, 0, 3, false),
            "10 draws by 3 replicas; each draw ran exactly once: NO"
        );
    }
}
