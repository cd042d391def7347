//! The Redis-stats sampler: what Redis and this process did over a measured window. Commands and
//! server time per command (`INFO commandstats`), redis-server CPU (`INFO cpu`), this process's
//! CPU (`getrusage`) and allocations (its counting global allocator), read before and after
//! ([`Snapshot`], [`WindowDelta`], [`measure`]), and what one operation cost ([`PerOp`]). The CPU figures show where the time of a pair goes (client,
//! server, or waiting).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::control::{Control, info_field};
use crate::rt::{Allocations, BoxError, elapsed_ns, process_cpu_us};
use crate::stats::{float, ratio};

/// Commands only a client can send (never issued by a Lua script; `script` and `client` with any
/// subcommand): every call of one of these is a client round trip. Everything else (`get`,
/// `set`, `lpop` …) may run inside a script and is counted as a round trip only where the
/// benchmark itself sent it. `multi` is left out: it goes in the same trip as the `exec` that
/// closes it (a transaction is one round trip, counted once by its `exec`).
const CLIENT_ONLY: &str = "evalsha eval evalsha_ro eval_ro fcall fcall_ro subscribe unsubscribe \
    psubscribe punsubscribe ssubscribe sunsubscribe ping hello select auth exec script client";

fn is_client_only(name: &str) -> bool {
    let base = name.split('|').next().unwrap_or(name);
    CLIENT_ONLY.split_whitespace().any(|c| c == base)
}

/// One figure per command name from `INFO commandstats` (without `info` itself): its calls, or
/// its server time in µs (`usec`; a script's includes the time of the commands it calls, which
/// are also listed on their own).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PerCommand(pub(crate) BTreeMap<String, u64>);

impl PerCommand {
    /// Field `field` (`calls=`, `usec=`) of every `cmdstat_<name>` line but `info`.
    pub(crate) fn parse(text: &str, field: &str) -> Self {
        let mut map = BTreeMap::new();
        for line in text.lines() {
            let Some((name, fields)) = line
                .trim()
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let value = fields.split(',').find_map(|f| f.strip_prefix(field));
            if let Some(value) = value
                .and_then(|v| v.parse().ok())
                .filter(|_| name != "info")
            {
                map.insert(name.to_owned(), value);
            }
        }
        Self(map)
    }

    /// `after − self`, per command (commands that did not grow are left out).
    pub(crate) fn delta(&self, after: &PerCommand) -> PerCommand {
        let grown = after.0.iter().filter_map(|(name, &value)| {
            let grown = value.saturating_sub(self.get(name));
            (grown > 0).then(|| (name.clone(), grown))
        });
        PerCommand(grown.collect())
    }

    /// The figure of `name` (0 when absent).
    pub(crate) fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Takes `count` away from `name` (a workload's own commands).
    pub(crate) fn subtract(&mut self, name: &str, count: u64) {
        if let Some(calls) = self.0.get_mut(name) {
            *calls = calls.saturating_sub(count);
            if *calls == 0 {
                self.0.remove(name);
            }
        }
    }

    /// The sum over every command (of calls: every command Redis executed, Lua-internal
    /// `redis.call`s included).
    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Of calls: client round trips, the calls of commands only a client sends (scripts, pub/sub,
    /// `PING` …), plus `own_plain` plain commands the caller knows it sent (the floor's `SET`).
    pub(crate) fn round_trips(&self, own_plain: u64) -> u64 {
        self.client_only() + own_plain
    }

    /// Of `usec`: server time spent on what the client sent, the scripts (their inner commands
    /// included) and client-only commands, plus the plain commands named in `plain`.
    pub(crate) fn client_usec(&self, plain: &[&str]) -> u64 {
        self.client_only() + plain.iter().map(|name| self.get(name)).sum::<u64>()
    }

    fn client_only(&self) -> u64 {
        let sent = self.0.iter().filter(|(name, _)| is_client_only(name));
        sent.map(|(_, n)| n).sum()
    }

    /// `name=value` pairs, for the report.
    pub(crate) fn summary(&self) -> String {
        let pairs: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.join(" ")
    }
}

/// Counters at one instant.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot(WindowDelta);

/// What happened inside a window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct WindowDelta {
    /// Calls per command.
    pub(crate) commands: PerCommand,
    /// Server time per command (µs, `usec` of `INFO commandstats`).
    pub(crate) usec: PerCommand,
    /// CPU time of the whole redis-server process (user + system), µs.
    pub(crate) server_cpu_us: u64,
    /// CPU time of this process, every thread (user + system), µs.
    pub(crate) client_cpu_us: u64,
    /// Allocator calls of this process, every thread (new blocks and reallocations).
    pub(crate) client_allocs: u64,
    /// Bytes those calls asked for.
    pub(crate) client_alloc_bytes: u64,
}

impl WindowDelta {
    /// Takes `calls` calls of `name` away (a workload's own commands), and the same share of its
    /// server time: `INFO commandstats` sums the time of every call of one name, so a workload's
    /// `SET` and a lock's own `SET NX` can only be told apart in proportion.
    pub(crate) fn subtract_calls(&mut self, name: &str, calls: u64) {
        let all = self.commands.get(name);
        let usec = self.usec.get(name);
        let share = if all == 0 {
            usec
        } else {
            let scaled = u128::from(usec) * u128::from(calls.min(all)) / u128::from(all);
            u64::try_from(scaled).unwrap_or(usec)
        };
        self.commands.subtract(name, calls);
        self.usec.subtract(name, share);
    }
}

impl Snapshot {
    /// Reads every counter (one `INFO commandstats cpu`).
    pub(crate) async fn take(control: &mut Control) -> Result<Snapshot, BoxError> {
        let text = control.info(&["commandstats", "cpu"]).await?;
        let seconds = |name: &str| -> Result<f64, BoxError> {
            info_field(&text, name)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| format!("INFO cpu has no {name} field").into())
        };
        let cpu = seconds("used_cpu_user")? + seconds("used_cpu_sys")?;
        // Seconds with 6 decimals: whole microseconds, far below 2^53.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let server_cpu_us = (cpu * 1e6).round() as u64;
        let commands = PerCommand::parse(&text, "calls=");
        let usec = PerCommand::parse(&text, "usec=");
        let client_cpu_us = process_cpu_us()?;
        // Last: the parsing above allocates, and must not count in the window that follows.
        let allocations = Allocations::now();
        Ok(Snapshot(WindowDelta {
            commands,
            usec,
            server_cpu_us,
            client_cpu_us,
            client_allocs: allocations.calls,
            client_alloc_bytes: allocations.bytes,
        }))
    }

    /// What happened from this snapshot to a `later` one (both already taken): a series of
    /// snapshots read at a steady pace gives the server's figures slice by slice (W7's sampler).
    pub(crate) fn until(&self, later: &Snapshot) -> WindowDelta {
        let (before, after) = (&self.0, &later.0);
        WindowDelta {
            commands: before.commands.delta(&after.commands),
            usec: before.usec.delta(&after.usec),
            server_cpu_us: after.server_cpu_us.saturating_sub(before.server_cpu_us),
            client_cpu_us: after.client_cpu_us.saturating_sub(before.client_cpu_us),
            client_allocs: after.client_allocs.saturating_sub(before.client_allocs),
            client_alloc_bytes: after
                .client_alloc_bytes
                .saturating_sub(before.client_alloc_bytes),
        }
    }

    /// Reads the counters again and returns the difference.
    pub(crate) async fn delta(&self, control: &mut Control) -> Result<WindowDelta, BoxError> {
        // First: reading `INFO` below allocates, and must not count in the window that ended.
        let allocations = Allocations::now();
        let client_cpu_us = process_cpu_us()?;
        let Snapshot(after) = Snapshot::take(control).await?;
        let before = &self.0;
        let allocs = Allocations {
            calls: before.client_allocs,
            bytes: before.client_alloc_bytes,
        }
        .until(allocations);
        Ok(WindowDelta {
            commands: before.commands.delta(&after.commands),
            usec: before.usec.delta(&after.usec),
            server_cpu_us: after.server_cpu_us.saturating_sub(before.server_cpu_us),
            client_cpu_us: client_cpu_us.saturating_sub(before.client_cpu_us),
            client_allocs: allocs.calls,
            client_alloc_bytes: allocs.bytes,
        })
    }
}

/// Runs `work` as a measured window: the counters are read right before and right after it, and
/// its wall time (ns) is taken around it alone.
pub(crate) async fn measure<T>(
    control: &mut Control,
    work: impl Future<Output = Result<T, BoxError>>,
) -> Result<(T, u64, WindowDelta), BoxError> {
    let before = Snapshot::take(control).await?;
    let start = Instant::now();
    let out = work.await?;
    let window_ns = elapsed_ns(start);
    let delta = before.delta(control).await?;
    Ok((out, window_ns, delta))
}

/// redis-server's CPU time per second while this process sends nothing (its timers, `INFO`
/// itself), measured over `span`, ms/s: the baseline under a workload's server CPU figure when
/// that workload is as light as a few requests per second.
pub(crate) async fn idle_server_cpu_ms_per_s(
    control: &mut Control,
    span: Duration,
) -> Result<f64, BoxError> {
    let before = Snapshot::take(control).await?;
    let start = Instant::now();
    tokio::time::sleep(span).await;
    let delta = before.delta(control).await?;
    Ok(float(delta.server_cpu_us) / 1e3 / start.elapsed().as_secs_f64())
}

/// What one operation (a pair, an acquisition) cost over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PerOp {
    /// Every command Redis ran, Lua-internal calls included.
    pub(crate) commands: f64,
    /// Requests the client sent (EVALSHA/EVAL, pub/sub and its own plain commands).
    pub(crate) round_trips: f64,
    /// Server time in what the client sent (`usec` of `INFO commandstats`: the scripts, inner
    /// commands included, and the plain commands), µs.
    pub(crate) server_us: f64,
    /// CPU time of the whole redis-server process (`INFO cpu`: commands, parsing, networking), µs.
    pub(crate) server_cpu_us: f64,
    /// CPU time of the benchmark process (`getrusage`, every thread), µs; `None` where the
    /// process that read the window is not the client (W3's parent).
    pub(crate) client_cpu_us: Option<f64>,
    /// Allocator calls of the benchmark process (new blocks and reallocations, every thread);
    /// `None` where the process that read the window is not the client.
    pub(crate) client_allocs: Option<f64>,
    /// Bytes those calls asked for.
    pub(crate) client_alloc_bytes: Option<f64>,
}

/// The plain (non-script) commands a subject's client sends itself, which `INFO commandstats`
/// cannot tell apart from the same commands called inside a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plain {
    /// Commands no script of the subject calls: every call is one the client sent (the `SET NX`
    /// of the floor and of rslock).
    pub(crate) client_only: &'static [&'static str],
    /// A command the client sends exactly once per operation, which its scripts call too
    /// (dlock's uncontended acquire is a plain `SET NX`, and its scripts write with `SET`): its
    /// client calls are the operations, and its server time the share of them.
    pub(crate) once_per_op: Option<&'static str>,
}

impl Plain {
    /// No plain command: scripts and client-only commands (`EVALSHA`, `EXEC`, pub/sub) only.
    pub(crate) const NONE: Plain = Plain::client_only(&[]);

    /// Plain commands that no script of the subject calls.
    pub(crate) const fn client_only(names: &'static [&'static str]) -> Plain {
        Plain {
            client_only: names,
            once_per_op: None,
        }
    }

    /// One plain `name` per operation, a command the subject's scripts call too.
    pub(crate) const fn once_per_op(name: &'static str) -> Plain {
        Plain {
            client_only: &[],
            once_per_op: Some(name),
        }
    }

    /// The same in a contended workload (W3, W8), where the per-operation count is not known:
    /// dlock's acquire skips its `SET` while its client has a waiter on the lock already (8
    /// of 2,000 W3 acquisitions sent it in run N), and its scripts' `SET`s cannot be told
    /// apart. That `SET` is left uncounted there, as a script's.
    pub(crate) const fn contended(self) -> Plain {
        Plain {
            once_per_op: None,
            ..self
        }
    }
}

impl PerOp {
    /// The costs of `ops` operations in `window`, whose client sent the plain commands `plain`
    /// says it sent.
    pub(crate) fn of(window: &WindowDelta, ops: u64, plain: Plain) -> PerOp {
        let per_op = |n: u64| ratio(n, ops);
        let client_only_calls: u64 = plain
            .client_only
            .iter()
            .map(|name| window.commands.get(name))
            .sum();
        // The client's share of a command its scripts call too: its calls are the operations,
        // and its time that share of the command's time (the same command, the same cost).
        let (shared_calls, shared_usec) = plain.once_per_op.map_or((0, 0.0), |name| {
            let calls = window.commands.get(name);
            let sent = ops.min(calls);
            (
                sent,
                float(window.usec.get(name)) * ratio(sent, calls.max(1)),
            )
        });
        PerOp {
            commands: per_op(window.commands.total()),
            round_trips: per_op(
                window
                    .commands
                    .round_trips(client_only_calls + shared_calls),
            ),
            server_us: (float(window.usec.client_usec(plain.client_only)) + shared_usec)
                / float(ops),
            server_cpu_us: per_op(window.server_cpu_us),
            client_cpu_us: Some(per_op(window.client_cpu_us)),
            client_allocs: Some(per_op(window.client_allocs)),
            client_alloc_bytes: Some(per_op(window.client_alloc_bytes)),
        }
    }

    /// This operation's cost without the client's own figures (the window was read by a
    /// process other than the client: W3's parent).
    pub(crate) fn server_side(self) -> PerOp {
        PerOp {
            client_cpu_us: None,
            client_allocs: None,
            client_alloc_bytes: None,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# Commandstats\r\n\
        cmdstat_set:calls=10,usec=12,usec_per_call=1.20,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_get:calls=5,usec=3,usec_per_call=0.60,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=4,usec=90,usec_per_call=22.5,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_script|load:calls=1,usec=9,usec_per_call=9.0,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=2,usec=64,usec_per_call=32.00,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn a_transaction_is_one_round_trip() {
        let text = "cmdstat_multi:calls=5,usec=1\r\ncmdstat_incr:calls=5,usec=5\r\n\
                    cmdstat_exec:calls=5,usec=9\r\n";
        let stats = PerCommand::parse(text, "calls=");
        assert_eq!(stats.total(), 15);
        assert_eq!(stats.round_trips(0), 5, "MULTI … EXEC is sent in one trip");
    }

    #[test]
    fn parses_commandstats_without_info() {
        let stats = PerCommand::parse(SAMPLE, "calls=");
        assert_eq!(stats.0.get("set"), Some(&10));
        assert_eq!(stats.0.get("script|load"), Some(&1));
        assert!(!stats.0.contains_key("info"));
        assert_eq!(stats.total(), 20);
        // evalsha + script|load are client-only; plus 3 plain commands we sent ourselves.
        assert_eq!(stats.round_trips(3), 8);
        let usec = PerCommand::parse(SAMPLE, "usec=");
        assert_eq!(usec.client_usec(&[]), 99);
        assert_eq!(usec.client_usec(&["set"]), 111);
        assert_eq!(PerCommand::default().delta(&usec).get("get"), 3);
    }

    #[test]
    fn delta_and_subtract() {
        let before = PerCommand::parse(SAMPLE, "calls=");
        let mut after = before.clone();
        after.0.insert("set".into(), 15);
        after.0.insert("incr".into(), 7);
        let mut delta = before.delta(&after);
        assert_eq!(delta.summary(), "incr=7 set=5");
        delta.subtract("incr", 7);
        delta.subtract("missing", 1);
        assert_eq!(delta.summary(), "set=5");
    }

    #[test]
    fn subtracting_calls_takes_their_share_of_the_time() {
        let mut window = WindowDelta {
            commands: PerCommand::parse(SAMPLE, "calls="),
            usec: PerCommand::parse(SAMPLE, "usec="),
            ..WindowDelta::default()
        };
        // set: 10 calls, 12 µs; the workload sent 5 of them.
        window.subtract_calls("set", 5);
        assert_eq!((window.commands.get("set"), window.usec.get("set")), (5, 6));
        window.subtract_calls("get", 5);
        assert_eq!((window.commands.get("get"), window.usec.get("get")), (0, 0));
        window.subtract_calls("missing", 1);
        assert_eq!(window.commands.get("missing"), 0);
    }

    #[test]
    fn costs_per_operation() {
        let mut window = WindowDelta {
            server_cpu_us: 300,
            client_cpu_us: 200,
            client_allocs: 350,
            client_alloc_bytes: 40_000,
            ..WindowDelta::default()
        };
        window.commands = PerCommand::parse(SAMPLE, "calls=");
        window.usec = PerCommand::parse(SAMPLE, "usec=");
        let per_op = PerOp::of(&window, 10, Plain::client_only(&["set"]));
        assert!((per_op.commands - 2.0).abs() < 1e-9);
        // 5 client-only calls and 10 own SETs in 10 operations.
        assert!((per_op.round_trips - 1.5).abs() < 1e-9);
        assert!((per_op.server_us - 11.1).abs() < 1e-9);
        assert_eq!(per_op.client_cpu_us, Some(20.0));
        assert_eq!(per_op.client_allocs, Some(35.0));
        assert_eq!(per_op.client_alloc_bytes, Some(4_000.0));
        // The same window with `SET` shared with scripts, one client SET per operation: 4 of
        // the 10 operations' SETs came from the client, 6 from scripts.
        let shared = PerOp::of(&window, 4, Plain::once_per_op("set"));
        // 5 client-only calls and 4 plain SETs in 4 operations.
        assert!((shared.round_trips - 9.0 / 4.0).abs() < 1e-9);
        // EVALSHA 90 + SCRIPT LOAD 9 + 4/10 of SET's 12 µs.
        assert!((shared.server_us - (99.0 + 4.8) / 4.0).abs() < 1e-9);
        let server_side = per_op.server_side();
        assert_eq!(server_side.client_allocs, None);
        assert_eq!(server_side.client_cpu_us, None);
    }
}
