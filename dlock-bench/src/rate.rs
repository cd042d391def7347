//! W9, the rate limiter (issue #34): decisions per second and what each costs Redis, beside a
//! fixed-window counter (`INCR` + `EXPIRE … NX` in one round trip: the cheapest limiter there
//! is, and a loose one — it admits up to twice its limit across a window's edge).
//!
//! * **one connection**: one task asks, one decision at a time (each waits for its answer);
//! * **64 connections**: 64 clients (one connection each), one task each, all at once.
//!
//! dlock's limiter is `Quota::per_second(1_000_000)`, so every decision is admitted (the
//! script takes the same path either way but for the `SET`). Per decision: round trips,
//! commands Redis ran (the script's inner calls included), server time (`usec` of `INFO
//! commandstats`), redis-server CPU and this process's CPU.
//!
//! * **accuracy**: 4 worker processes (`rate-worker`), 4 tasks each, ask one limiter of
//!   1,000/s with a burst of 100 as fast as they can for 5 s (1 s in a quick run). On the
//!   decisions' own server times: the cells admitted against `burst + rate × span` (what GCRA
//!   allows from a full bucket over the span from the first decision to the last), and the
//!   most admitted in any 1-second window against `rate + burst`.

use std::fmt::Write as _;

use dlock_core::Quota;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::child::{GO, Group, args, print_result, ready_then_wait_for_go};
use crate::cli::ChildArgs;
use crate::control::{Control, raw_connection};
use crate::dlock::client;
use crate::redis_stats::{PerOp, Plain, measure};
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, current_thread_runtime, multi_thread_runtime};
use crate::stats::float;
use crate::subjects::Setting;
use crate::table::{Col, int, table_of};

/// Tasks (and connections) of the concurrent windows.
const TASKS: u64 = 64;

/// One way of deciding, measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RateRun {
    pub(crate) label: String,
    pub(crate) decisions: u64,
    pub(crate) decisions_per_s: f64,
    pub(crate) per_decision: PerOp,
}

/// The accuracy run's quota, workers and tasks per worker.
const ACCURACY_RATE: u32 = 1_000;
const ACCURACY_BURST: u32 = 100;
const WORKERS: usize = 4;
const WORKER_TASKS: usize = 4;
/// The accuracy run's limiter.
const ACCURACY_NAME: &str = "w9:accuracy";

/// What one worker process saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    decisions: u64,
    /// The server time of every admitted decision, µs since the epoch.
    admitted_us: Vec<u64>,
}

/// The accuracy run, on the decisions' server times.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Accuracy {
    pub(crate) rate: u32,
    pub(crate) burst: u32,
    pub(crate) processes: usize,
    pub(crate) decisions: u64,
    pub(crate) admitted: u64,
    /// From the first decision to the last, seconds.
    pub(crate) span_s: f64,
    /// `burst + rate × span`: what the quota admits over the span from a full bucket.
    pub(crate) allowed: f64,
    /// The most admitted in any window of one second.
    pub(crate) max_in_1s: u64,
}

/// The stage's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RateFigures {
    pub(crate) runs: Vec<RateRun>,
    pub(crate) accuracy: Option<Accuracy>,
}

/// Runs the stage.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let decisions = if s.counts.quick { 2_048 } else { 20_480 };
    let runtime = current_thread_runtime()?;
    let runs = runtime.block_on(measure_all(&s.url, decisions))?;
    runtime.block_on(async {
        let mut con = raw_connection(&s.url).await?;
        redis::cmd("DEL")
            .arg(format!("dlock:rl:{{{ACCURACY_NAME}}}"))
            .query_async::<()>(&mut con)
            .await?;
        Ok::<_, BoxError>(())
    })?;
    let mut workers =
        Group::ready((0..WORKERS).map(|_| args("rate-worker", &s.url, &s.counts, &[])))?;
    workers.send(GO)?;
    let reports: Vec<WorkerReport> = workers.results()?;
    let accuracy = accuracy(&reports);
    Entry::new("rate", RateFigures { runs, accuracy })
}

/// The accuracy figures of the workers' reports; `None` if nothing was admitted.
fn accuracy(reports: &[WorkerReport]) -> Option<Accuracy> {
    let mut times: Vec<u64> = reports
        .iter()
        .flat_map(|r| r.admitted_us.iter().copied())
        .collect();
    times.sort_unstable();
    let (first, last) = (*times.first()?, *times.last()?);
    let span_s = float(last - first) / 1e6;
    let mut max_in_1s = 0;
    let mut from = 0;
    for (to, &at) in times.iter().enumerate() {
        while times[from] + 1_000_000 <= at {
            from += 1;
        }
        max_in_1s = max_in_1s.max(u64::try_from(to - from + 1).unwrap_or(u64::MAX));
    }
    Some(Accuracy {
        rate: ACCURACY_RATE,
        burst: ACCURACY_BURST,
        processes: reports.len(),
        decisions: reports.iter().map(|r| r.decisions).sum(),
        admitted: u64::try_from(times.len()).unwrap_or(u64::MAX),
        span_s,
        allowed: f64::from(ACCURACY_BURST) + f64::from(ACCURACY_RATE) * span_s,
        max_in_1s,
    })
}

/// `rate-worker`: asks the accuracy limiter from [`WORKER_TASKS`] tasks as fast as they can,
/// from `GO` for 5 s (1 s with `--quick`), and reports every admitted decision's server time.
pub(crate) fn worker_main(args: &ChildArgs) -> Result<(), BoxError> {
    let runtime = multi_thread_runtime()?;
    let limiter = runtime.block_on(async {
        let c = client(&args.url)?;
        // The script loaded and the connection open, on a limiter of its own.
        c.rate_limiter("w9:warm", Quota::per_second(1_000_000))?
            .try_acquire(1)
            .await?;
        let quota = Quota::per_second(ACCURACY_RATE).burst(ACCURACY_BURST);
        Ok::<_, BoxError>(c.rate_limiter(ACCURACY_NAME, quota)?)
    })?;
    ready_then_wait_for_go()?;
    let seconds = if args.counts.quick { 1 } else { 5 };
    let report = runtime.block_on(async move {
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(seconds);
        let mut set = JoinSet::new();
        for _ in 0..WORKER_TASKS {
            let limiter = limiter.clone();
            set.spawn(async move {
                let mut report = WorkerReport::default();
                while tokio::time::Instant::now() < until {
                    let decision = limiter.try_acquire(1).await?;
                    report.decisions += 1;
                    if let dlock_core::Decision::Allowed { decided_at, .. } = decision {
                        let at = decided_at.duration_since(std::time::UNIX_EPOCH)?;
                        report.admitted_us.push(u64::try_from(at.as_micros())?);
                    }
                }
                Ok::<_, BoxError>(report)
            });
        }
        let mut all = WorkerReport::default();
        while let Some(done) = set.join_next().await {
            let report = done??;
            all.decisions += report.decisions;
            all.admitted_us.extend(report.admitted_us);
        }
        Ok::<_, BoxError>(all)
    })?;
    print_result(&report)
}

async fn measure_all(url: &str, decisions: u64) -> Result<Vec<RateRun>, BoxError> {
    let mut control = Control::fresh(url).await?;
    let quota = Quota::per_second(1_000_000);
    let clients = (0..TASKS)
        .map(|_| client(url))
        .collect::<Result<Vec<_>, _>>()?;
    let limiters = clients
        .iter()
        .map(|c| c.rate_limiter("w9", quota))
        .collect::<Result<Vec<_>, _>>()?;
    let mut plains = Vec::new();
    for _ in 0..TASKS {
        plains.push(raw_connection(url).await?);
    }
    // Warm: the script loaded, every connection open.
    for limiter in &limiters {
        limiter.try_acquire(1).await?;
    }
    for plain in &mut plains {
        fixed_window(plain).await?;
    }

    let mut runs = Vec::new();
    let one = &limiters[0];
    runs.push(
        window(
            &mut control,
            "fixed window, 1 connection",
            decisions,
            Plain::client_only(&["incr", "expire"]),
            async {
                let plain = &mut plains[0];
                for _ in 0..decisions {
                    fixed_window(plain).await?;
                }
                Ok(())
            },
        )
        .await?,
    );
    runs.push(
        window(
            &mut control,
            "dlock, 1 connection",
            decisions,
            Plain::NONE,
            async {
                for _ in 0..decisions {
                    one.try_acquire(1).await?;
                }
                Ok(())
            },
        )
        .await?,
    );
    let each = decisions / TASKS;
    let cons = plains.clone();
    runs.push(
        window(
            &mut control,
            "fixed window, 64 connections",
            each * TASKS,
            Plain::client_only(&["incr", "expire"]),
            all_at_once(cons, move |mut con| async move {
                for _ in 0..each {
                    fixed_window(&mut con).await?;
                }
                Ok(())
            }),
        )
        .await?,
    );
    let handles = limiters.clone();
    runs.push(
        window(
            &mut control,
            "dlock, 64 connections",
            each * TASKS,
            Plain::NONE,
            all_at_once(handles, move |limiter| async move {
                for _ in 0..each {
                    limiter.try_acquire(1).await?;
                }
                Ok(())
            }),
        )
        .await?,
    );
    Ok(runs)
}

/// Runs `work` on each of `items` in a task of its own (all at once), and waits for all.
async fn all_at_once<T, F, Fut>(items: Vec<T>, work: F) -> Result<(), BoxError>
where
    T: Send + 'static,
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for item in items {
        set.spawn(work(item));
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    Ok(())
}

/// One decision of a fixed-window counter: `INCR` the current second's key, give it a 1 s
/// expiry if it has none, in one round trip.
async fn fixed_window(con: &mut redis::aio::MultiplexedConnection) -> Result<(), BoxError> {
    let (_count, _set): (u64, bool) = redis::pipe()
        .incr("w9:floor", 1)
        .cmd("EXPIRE")
        .arg("w9:floor")
        .arg(1)
        .arg("NX")
        .query_async(con)
        .await?;
    Ok(())
}

async fn window(
    control: &mut Control,
    label: &str,
    decisions: u64,
    own_plain: Plain,
    work: impl std::future::Future<Output = Result<(), BoxError>>,
) -> Result<RateRun, BoxError> {
    let ((), window_ns, delta) = measure(control, work).await?;
    Ok(RateRun {
        label: label.to_owned(),
        decisions,
        decisions_per_s: float(decisions) / (float(window_ns) / 1e9),
        per_decision: PerOp::of(&delta, decisions, own_plain),
    })
}

const COLUMNS: [Col<RateRun>; 7] = [
    ("decisions", |r| r.label.clone()),
    ("decisions/s", |r| int(r.decisions_per_s)),
    ("round trips", |r| {
        format!("{:.2}", r.per_decision.round_trips)
    }),
    ("commands in Redis", |r| {
        format!("{:.2}", r.per_decision.commands)
    }),
    ("server µs", |r| format!("{:.1}", r.per_decision.server_us)),
    ("redis CPU µs", |r| {
        format!("{:.1}", r.per_decision.server_cpu_us)
    }),
    ("client CPU µs", |r| {
        r.per_decision
            .client_cpu_us
            .map_or_else(|| "—".into(), |us| format!("{us:.1}"))
    }),
];

impl RateFigures {
    fn run(&self, label: &str) -> Option<&RateRun> {
        self.runs.iter().find(|r| r.label == label)
    }
}

impl Section for RateFigures {
    fn details(&self, out: &mut String) {
        let _ = writeln!(out, "### W9: the rate limiter (issue #34)\n");
        let _ = writeln!(
            out,
            "Decisions of dlock's limiter (GCRA in one script) beside a fixed-window counter \
             (`INCR` + `EXPIRE NX`, one round trip), one at a time on one connection, then 64 \
             connections at once.\n"
        );
        table_of(out, "lrrrrrr", &COLUMNS, &self.runs);
        for n in ["1 connection", "64 connections"] {
            if let (Some(floor), Some(dlock)) = (
                self.run(&format!("fixed window, {n}")),
                self.run(&format!("dlock, {n}")),
            ) {
                let _ = writeln!(
                    out,
                    "\n{n}: dlock ÷ fixed window {:.2}× the decisions/s, {:.1}× the server \
                     time, {:.1}× the redis-server CPU.",
                    dlock.decisions_per_s / floor.decisions_per_s,
                    dlock.per_decision.server_us / floor.per_decision.server_us,
                    dlock.per_decision.server_cpu_us / floor.per_decision.server_cpu_us,
                );
            }
        }
        if let Some(a) = &self.accuracy {
            let _ = writeln!(
                out,
                "\nAccuracy: {} processes × {WORKER_TASKS} tasks asking one limiter of {}/s \
                 (burst {}) as fast as they can: {} decisions, {} admitted over {:.3} s of \
                 server time, {:.4}× the {:.1} that `burst + rate × span` allows; the most in \
                 any 1-second window {} (rate + burst = {}).",
                a.processes,
                a.rate,
                a.burst,
                int(float(a.decisions)),
                int(float(a.admitted)),
                a.span_s,
                float(a.admitted) / a.allowed,
                a.allowed,
                int(float(a.max_in_1s)),
                a.rate + a.burst,
            );
        }
    }

    fn targets(&self) -> Vec<Target> {
        let Some(a) = &self.accuracy else {
            return Vec::new();
        };
        let ratio = float(a.admitted) / a.allowed;
        vec![
            Target::new(
                "W9 accuracy: admitted against burst + rate × span",
                "within ±1 %",
                format!("{ratio:.4}×"),
                (ratio - 1.0).abs() <= 0.01,
            ),
            Target::new(
                "W9 accuracy: the most admitted in any 1 s window",
                "≤ rate + burst",
                format!("{} (≤ {})", a.max_in_1s, a.rate + a.burst),
                a.max_in_1s <= u64::from(a.rate + a.burst),
            ),
        ]
    }
}
