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

use std::fmt::Write as _;

use dlock_core::Quota;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::control::{Control, raw_connection};
use crate::dlock::client;
use crate::redis_stats::{PerOp, measure};
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, current_thread_runtime};
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

/// The stage's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RateFigures {
    pub(crate) runs: Vec<RateRun>,
}

/// Runs the stage.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let decisions = if s.counts.quick { 2_048 } else { 20_480 };
    let runtime = current_thread_runtime()?;
    let runs = runtime.block_on(measure_all(&s.url, decisions))?;
    Entry::new("rate", RateFigures { runs })
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
            &["incr", "expire"],
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
        window(&mut control, "dlock, 1 connection", decisions, &[], async {
            for _ in 0..decisions {
                one.try_acquire(1).await?;
            }
            Ok(())
        })
        .await?,
    );
    let each = decisions / TASKS;
    let cons = plains.clone();
    runs.push(
        window(
            &mut control,
            "fixed window, 64 connections",
            each * TASKS,
            &["incr", "expire"],
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
            &[],
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
    own_plain: &[&str],
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
    }

    fn targets(&self) -> Vec<Target> {
        Vec::new()
    }
}
