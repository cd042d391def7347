//! Guarded writes (issue #32): what it costs to make a write conditional on the hold, beside
//! the same write sent plainly. One task on a current-thread runtime sends the writes one after
//! another (each waits for its reply), so the figures are per write with nothing overlapping:
//!
//! * **plain SET**: `SET guarded:{bench}:v <i>` on a plain multiplexed connection (the floor);
//! * **guarded SET**: the same `SET` through `guard.guarded().set(…).exec()` under a held mutex
//!   (the owner check and the key's type check in `guarded.lua`);
//! * **guarded 3 writes**: `INCRBY`, `RPUSH` (trimmed by an `LTRIM`: four commands) and `HSET`
//!   in one guarded batch;
//! * **fenced_set**: `client.fenced_set(key, fence, value)` (`fenced.lua`: the stored fence
//!   read and compared, then both keys set).
//!
//! Per write: requests sent (round trips), every command Redis ran (a script's inner calls
//! included), server time (`usec` of `INFO commandstats`), redis-server CPU, and this process's
//! CPU. Target: a guarded write is one round trip, as a plain write.

use std::fmt::Write as _;

use dlock_core::{Client, FencingToken};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use crate::control::{Control, raw_connection};
use crate::dlock::client;
use crate::redis_stats::{PerOp, Plain, measure};
use crate::report::{Check, Entry, Section, Target, checked};
use crate::rt::{BoxError, current_thread_runtime};
use crate::stats::float;
use crate::subjects::Setting;
use crate::table::{Col, int, table_of};

/// The lock whose hold guards the writes, and the keys written (its hash tag).
const LOCK: &str = "bench";
const VALUE_KEY: &str = "guarded:{bench}:v";

/// One way of writing, measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WriteRun {
    pub(crate) label: String,
    pub(crate) writes: u64,
    pub(crate) writes_per_s: f64,
    pub(crate) per_write: PerOp,
}

/// The stage's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct GuardedFigures {
    pub(crate) runs: Vec<WriteRun>,
}

/// Runs the stage.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let writes = if s.counts.quick { 2_000 } else { 20_000 };
    let runtime = current_thread_runtime()?;
    let runs = runtime.block_on(measure_all(&s.url, writes))?;
    Entry::new("guarded", GuardedFigures { runs })
}

async fn measure_all(url: &str, writes: u64) -> Result<Vec<WriteRun>, BoxError> {
    let mut control = Control::fresh(url).await?;
    let client = client(url)?;
    let mut plain = raw_connection(url).await?;
    let guard = client.mutex(LOCK)?.acquire().await?;
    let fence = guard.fencing_token().await?;
    // Warm: the scripts loaded, the connections open.
    let _: () = plain.set(VALUE_KEY, 0).await?;
    guard.guarded().set(VALUE_KEY, 0).exec().await?;
    client.fenced_set(VALUE_KEY, fence, 0).await?;
    let _: () = plain.del(VALUE_KEY).await?;

    let mut runs = Vec::new();
    runs.push(
        window(
            &mut control,
            "plain SET",
            writes,
            Plain::client_only(&["set"]),
            async {
                for i in 0..writes {
                    let _: () = plain.set(VALUE_KEY, i).await?;
                }
                Ok(())
            },
        )
        .await?,
    );
    runs.push(
        window(&mut control, "guarded SET", writes, Plain::NONE, async {
            for i in 0..writes {
                applied(guard.guarded().set(VALUE_KEY, i).exec().await?)?;
            }
            Ok(())
        })
        .await?,
    );
    runs.push(
        window(
            &mut control,
            "guarded 3 writes",
            writes,
            Plain::NONE,
            async {
                for i in 0..writes {
                    let batch = guard
                        .guarded()
                        .incr("guarded:{bench}:n", 1)
                        .rpush("guarded:{bench}:log", i)
                        .ltrim("guarded:{bench}:log", -10, -1)
                        .hset("guarded:{bench}:h", "last", i)
                        .exec()
                        .await?;
                    applied(batch)?;
                }
                Ok(())
            },
        )
        .await?,
    );
    let fenced_key = "fenced:{bench}:v";
    runs.push(
        window(&mut control, "fenced_set", writes, Plain::NONE, async {
            for i in 0..writes {
                written(&client, fenced_key, fence, i).await?;
            }
            Ok(())
        })
        .await?,
    );
    guard.release().await?;
    Ok(runs)
}

fn applied(outcome: dlock_core::Guarded) -> Result<(), BoxError> {
    if outcome.is_applied() {
        Ok(())
    } else {
        Err(format!("a guarded write under a held lock was refused: {outcome:?}").into())
    }
}

async fn written(client: &Client, key: &str, fence: FencingToken, i: u64) -> Result<(), BoxError> {
    let outcome = client.fenced_set(key, fence, i).await?;
    if outcome.is_written() {
        Ok(())
    } else {
        Err(format!("a fenced write with the largest token was refused: {outcome}").into())
    }
}

/// One measured window of `writes` writes; `own_plain`: the plain commands the loop sends.
async fn window(
    control: &mut Control,
    label: &str,
    writes: u64,
    own_plain: Plain,
    work: impl std::future::Future<Output = Result<(), BoxError>>,
) -> Result<WriteRun, BoxError> {
    let ((), window_ns, delta) = measure(control, work).await?;
    Ok(WriteRun {
        label: label.to_owned(),
        writes,
        writes_per_s: float(writes) / (float(window_ns) / 1e9),
        per_write: PerOp::of(&delta, writes, own_plain),
    })
}

impl GuardedFigures {
    fn run(&self, label: &str) -> Option<&WriteRun> {
        self.runs.iter().find(|r| r.label == label)
    }
}

const COLUMNS: [Col<WriteRun>; 7] = [
    ("write", |r| r.label.clone()),
    ("writes/s", |r| int(r.writes_per_s)),
    ("round trips", |r| format!("{:.2}", r.per_write.round_trips)),
    ("commands in Redis", |r| {
        format!("{:.2}", r.per_write.commands)
    }),
    ("server µs", |r| format!("{:.1}", r.per_write.server_us)),
    ("redis CPU µs", |r| {
        format!("{:.1}", r.per_write.server_cpu_us)
    }),
    ("client CPU µs", |r| {
        r.per_write
            .client_cpu_us
            .map_or_else(|| "—".into(), |us| format!("{us:.1}"))
    }),
];

const CHECKS: [Check<GuardedFigures>; 2] = [
    ("Guarded write round trips", "1, as a plain write", |f| {
        let trips = f
            .run("guarded SET")
            .map_or(f64::NAN, |r| r.per_write.round_trips);
        (format!("{trips:.2}"), (trips - 1.0).abs() < 0.01)
    }),
    ("fenced_set round trips", "1", |f| {
        let trips = f
            .run("fenced_set")
            .map_or(f64::NAN, |r| r.per_write.round_trips);
        (format!("{trips:.2}"), (trips - 1.0).abs() < 0.01)
    }),
];

impl Section for GuardedFigures {
    fn details(&self, out: &mut String) {
        let _ = writeln!(out, "### Guarded writes (issue #32)\n");
        let writes = self.runs.first().map_or(0, |r| r.writes);
        let _ = writeln!(
            out,
            "One task, one write at a time ({writes} each), on a current-thread runtime: a plain \
             `SET` on a multiplexed connection; the same `SET` as a guarded write under a held \
             mutex; a guarded batch of `INCRBY`, `RPUSH`, `LTRIM`, `HSET`; `fenced_set`. Per \
             write: requests sent, commands Redis ran (inner calls of a script included), server \
             time, redis-server CPU and this process's CPU.\n"
        );
        table_of(out, "lrrrrrr", &COLUMNS, &self.runs);
        if let (Some(plain), Some(guarded)) = (self.run("plain SET"), self.run("guarded SET")) {
            let _ = writeln!(
                out,
                "\nA guarded SET against a plain one: {:.2}× the writes/s, {:.1}× the server \
                 time, {:.1}× the redis-server CPU.",
                guarded.writes_per_s / plain.writes_per_s,
                guarded.per_write.server_us / plain.per_write.server_us,
                guarded.per_write.server_cpu_us / plain.per_write.server_cpu_us,
            );
        }
    }

    fn targets(&self) -> Vec<Target> {
        checked(self, &CHECKS)
    }
}
