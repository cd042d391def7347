//! Watchdog workload (issue #4): what holding 10,000 locks under the watchdog costs per renewal
//! interval — script calls (round trips), Redis commands, client and server CPU — and whether
//! every lease survives.
//!
//! Runs in a fresh child process (`dlock-bench wd`), like the memory probes, so that the CPU
//! figures are this workload's alone: one `Client` (multi-thread runtime, 2 workers), warmed up,
//! acquires `wd:0..9999` one after the other with `try_acquire` (options
//! `MutexOptions::new().ttl(3 s).watchdog()`: renewed every 1 s) and keeps the guards.
//!
//! **Renewal rounds, not wall-clock seconds, delimit the window.** The watchdog renews its
//! leases in bursts, one per interval (a little over 1 s: the next renewal is due one interval
//! after the last was *sent*). A fixed 6 s window would hold 5 or 6 bursts depending on the
//! phase: an error of up to 17 %. The probe therefore watches the `safe_until` of 16 guards
//! spread over the range (a local read, no Redis traffic): a round is complete once every
//! sampled lease has advanced. After 2 rounds to settle, the window opens right after one round
//! and closes right after the 6th next (plus 20 ms for the last replies to be applied), so it
//! holds exactly 6 rounds; its duration divided by 6 is the measured renewal period.
//!
//! In the window: `INFO commandstats` (`evalsha` = renewal calls, `pexpire` = leases renewed, one
//! per lock and call), redis-server CPU (`INFO cpu`) and this process's CPU (`getrusage`). At
//! the end every lease must still be held (`guard.lease().is_held()`); the guards are then
//! released one after the other.
//!
//! Its section of the report: one table row, the acquisition and release phases, and the
//! watchdog targets.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use dlock_core::{Client, MutexGuard, MutexOptions};
use serde::{Deserialize, Serialize};

use crate::child::{Child, args, print_result};
use crate::cli::ChildArgs;
use crate::control::Control;
use crate::dlock::Dlock;
use crate::redis_stats::{PerCommand, WindowDelta, idle_server_cpu_ms_per_s, measure};
use crate::report::{Check, Entry, Section, Target, checked};
use crate::rt::{
    BoxError, current_thread_runtime, elapsed_ns, multi_thread_runtime, process_cpu_us,
};
use crate::spec::{Counts, WD_SETTLE_ROUNDS, WD_TTL};
use crate::stats::{float, millis, ns_to_s, ns_to_us, per_second, ratio};
use crate::subject::warm_up;
use crate::subjects::Setting;
use crate::table::{Col, int, joined, table_of};

/// Guards whose `safe_until` is watched to detect renewal rounds.
const SAMPLES: usize = 16;
/// How often the sampled leases are looked at while a round is expected.
const POLL: Duration = Duration::from_millis(5);
/// How long redis-server's idle CPU is measured before the locks are taken.
const IDLE_SPAN: Duration = Duration::from_secs(2);
/// Pause after a round is seen complete, so that every reply of it has been applied.
const ROUND_MARGIN: Duration = Duration::from_millis(20);

/// The figures of the watchdog workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WdResult {
    pub(crate) locks: u64,
    pub(crate) ttl_ms: u64,
    /// Renewal interval the watchdog is configured with (a third of the lease).
    pub(crate) interval_ms: u64,
    /// The acquisition phase: `locks` sequential `try_acquire`s.
    pub(crate) acquire_s: f64,
    pub(crate) acquire_per_s: f64,
    /// Mean time of one acquire in each tenth of the acquisition phase, µs: flat if an acquire
    /// costs the same whatever the number of locks already held.
    pub(crate) acquire_us_by_tenth: Vec<f64>,
    /// This process's CPU time per acquire over the acquisition phase, µs.
    pub(crate) acquire_cpu_us_each: f64,
    /// Renewal rounds in the measured window.
    pub(crate) rounds: u32,
    pub(crate) window_s: f64,
    pub(crate) figures: WdFigures,
    /// redis-server CPU per second before the locks were taken (nothing sent), ms/s.
    pub(crate) server_idle_cpu_ms_per_s: f64,
    /// `INFO commandstats` delta of the window.
    pub(crate) commands: PerCommand,
    /// Leases no longer held at the end (`!guard.lease().is_held()`): must be 0.
    pub(crate) lost: u64,
    /// The release phase: `locks` sequential releases.
    pub(crate) release_s: f64,
    pub(crate) release_per_s: f64,
    /// Releases that found the lease gone.
    pub(crate) released_not_held: u64,
}

/// What one renewal round costs, from the window's counters (pure, unit-tested).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct WdFigures {
    /// `evalsha` calls per round: the client's round trips per renewal interval.
    pub(crate) calls_per_round: f64,
    /// Leases renewed per call (`pexpire` ÷ `evalsha`).
    pub(crate) locks_per_call: f64,
    /// `pexpire` ÷ (locks × rounds): 1.00 when every lease is renewed once per round.
    pub(crate) renewals_per_lock_per_round: f64,
    /// Every command Redis ran per round, Lua-internal `GET`/`PEXPIRE` included.
    pub(crate) commands_per_round: f64,
    /// The measured renewal period: window ÷ rounds, s.
    pub(crate) period_s: f64,
    pub(crate) client_cpu_ms_per_round: f64,
    pub(crate) client_cpu_us_per_lock: f64,
    pub(crate) server_cpu_ms_per_round: f64,
    /// Server time in the renewal scripts per round (`usec` of `evalsha`), ms.
    pub(crate) server_ms_in_scripts_per_round: f64,
}

impl WdFigures {
    /// The per-round figures of a window of `rounds` rounds over `locks` held locks.
    pub(crate) fn compute(locks: u64, rounds: u32, window_ns: u64, delta: &WindowDelta) -> Self {
        let calls = delta.commands.get("evalsha");
        let renewals = delta.commands.get("pexpire");
        let script_usec = delta.usec.get("evalsha");
        let rounds = u64::from(rounds);
        let per_round = |n: u64| ratio(n, rounds);
        Self {
            calls_per_round: per_round(calls),
            locks_per_call: ratio(renewals, calls),
            renewals_per_lock_per_round: ratio(renewals, locks.saturating_mul(rounds)),
            commands_per_round: per_round(delta.commands.total()),
            period_s: per_round(window_ns) / 1e9,
            client_cpu_ms_per_round: per_round(delta.client_cpu_us) / 1e3,
            client_cpu_us_per_lock: ratio(delta.client_cpu_us, locks.saturating_mul(rounds)),
            server_cpu_ms_per_round: per_round(delta.server_cpu_us) / 1e3,
            server_ms_in_scripts_per_round: per_round(script_usec) / 1e3,
        }
    }
}

/// Runs the workload in a fresh child process, after a `FLUSHALL`.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let url = s.url.as_str();
    current_thread_runtime()?.block_on(Control::fresh(url))?;
    let result: WdResult = Child::spawn(&args("wd", url, &s.counts, &[]))?.result()?;
    Entry::new("wd", result)
}

/// Entry point of `dlock-bench wd --url URL`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let runtime = multi_thread_runtime()?;
    print_result(&runtime.block_on(probe(&args.url, &args.counts))?)
}

async fn probe(url: &str, counts: &Counts) -> Result<WdResult, BoxError> {
    let mut control = Control::connect(url).await?;
    let client = crate::dlock::client(url)?;
    warm_up(&Dlock::from(client.clone()), "wd:warm:", 0..10).await?;
    let server_idle_cpu_ms_per_s = idle_server_cpu_ms_per_s(&mut control, IDLE_SPAN).await?;
    let cpu_before = process_cpu_us()?;
    let (guards, tenths_ns) = acquire_all(&client, counts.wd_locks).await?;
    let acquire_cpu_us = process_cpu_us()?.saturating_sub(cpu_before);
    let acquire_ns: u64 = tenths_ns.iter().sum();
    // The watchdog's default renewal interval: a third of the lease.
    let interval = WD_TTL / 3;
    let sample = sample_indices(guards.len(), SAMPLES);

    let mut marks = marks(&guards, &sample);
    for _ in 0..WD_SETTLE_ROUNDS {
        marks = next_round(&guards, &sample, &marks, interval).await?;
    }
    let rounds = async {
        for _ in 0..counts.wd_rounds {
            marks = next_round(&guards, &sample, &marks, interval).await?;
        }
        Ok(())
    };
    let ((), window_ns, delta) = measure(&mut control, rounds).await?;
    let lost = guards.iter().filter(|g| !g.lease().is_held()).count();

    let locks = counts.wd_locks;
    let (release_ns, released_not_held) = release_all(guards).await?;
    Ok(WdResult {
        locks,
        ttl_ms: millis(WD_TTL),
        interval_ms: millis(interval),
        acquire_s: ns_to_s(acquire_ns),
        acquire_per_s: per_second(locks, acquire_ns),
        acquire_us_by_tenth: tenths_ns
            .iter()
            .map(|&ns| ns_to_us(ns) / ratio(locks, 10))
            .collect(),
        acquire_cpu_us_each: ratio(acquire_cpu_us, locks),
        rounds: counts.wd_rounds,
        window_s: ns_to_s(window_ns),
        figures: WdFigures::compute(locks, counts.wd_rounds, window_ns, &delta),
        server_idle_cpu_ms_per_s,
        commands: delta.commands,
        lost: u64::try_from(lost)?,
        release_s: ns_to_s(release_ns),
        release_per_s: per_second(locks, release_ns),
        released_not_held,
    })
}

/// Acquires `wd:0..n` one after the other; returns the guards and the time each tenth of them
/// took (ns).
async fn acquire_all(client: &Client, n: u64) -> Result<(Vec<MutexGuard>, Vec<u64>), BoxError> {
    let options = MutexOptions::new().ttl(WD_TTL).watchdog();
    let mut guards = Vec::with_capacity(usize::try_from(n)?);
    let mut tenths = Vec::with_capacity(10);
    let mut start = Instant::now();
    for i in 0..n {
        if i > 0 && (i * 10) % n == 0 {
            tenths.push(elapsed_ns(start));
            start = Instant::now();
        }
        let name = format!("wd:{i}");
        let lock = client.mutex_with(&name, options.clone())?;
        let guard = lock
            .try_acquire()
            .await?
            .ok_or_else(|| format!("`{name}` was not free"))?;
        guards.push(guard);
    }
    tenths.push(elapsed_ns(start));
    Ok((guards, tenths))
}

/// Releases every guard one after the other; returns the time it took (ns) and how many found
/// their lease gone.
async fn release_all(guards: Vec<MutexGuard>) -> Result<(u64, u64), BoxError> {
    let start = Instant::now();
    let mut not_held = 0;
    for guard in guards {
        if !guard.release().await?.was_held() {
            not_held += 1;
        }
    }
    Ok((elapsed_ns(start), not_held))
}

/// `count` indices spread evenly over `0..len`, the first and the last included.
fn sample_indices(len: usize, count: usize) -> Vec<usize> {
    if len == 0 || count == 0 {
        return Vec::new();
    }
    if count == 1 || len == 1 {
        return vec![0];
    }
    let mut indices: Vec<usize> = (0..count).map(|k| k * (len - 1) / (count - 1)).collect();
    indices.dedup();
    indices
}

/// The `safe_until` of the sampled guards.
fn marks(guards: &[MutexGuard], sample: &[usize]) -> Vec<Instant> {
    sample
        .iter()
        .filter_map(|&i| guards.get(i))
        .map(MutexGuard::safe_until)
        .collect()
}

/// Waits until every sampled lease has been renewed since `previous` (one renewal round), then
/// [`ROUND_MARGIN`] more; returns the new marks. Sleeps most of an interval before it starts
/// looking, so that polling costs next to no CPU.
async fn next_round(
    guards: &[MutexGuard],
    sample: &[usize],
    previous: &[Instant],
    interval: Duration,
) -> Result<Vec<Instant>, BoxError> {
    let deadline = Instant::now() + interval * 3;
    tokio::time::sleep(interval.mul_f64(0.7)).await;
    loop {
        let now = marks(guards, sample);
        if now.iter().zip(previous).all(|(now, before)| now > before) {
            tokio::time::sleep(ROUND_MARGIN).await;
            return Ok(marks(guards, sample));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the watchdog did not renew the sampled leases within {:?}",
                interval * 3
            )
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Issue #4: "holding 10,000 locks costs ~100 round trips per tick": met when the renewal calls
/// per round stay within 5 % of one call per 100 locks (the watchdog's batch size).
const WD_CALLS_SLACK: f64 = 1.05;

/// The watchdog's table: one row, per renewal round.
const COLUMNS: [Col<WdResult>; 9] = [
    ("round trips (EVALSHA) per round", |w| {
        format!("{:.1}", w.figures.calls_per_round)
    }),
    ("locks renewed per call", |w| {
        format!("{:.1}", w.figures.locks_per_call)
    }),
    ("renewals per lock per round", |w| {
        format!("{:.2}", w.figures.renewals_per_lock_per_round)
    }),
    ("Redis commands per round", |w| {
        int(w.figures.commands_per_round)
    }),
    ("client CPU per round", |w| {
        format!("{:.1} ms", w.figures.client_cpu_ms_per_round)
    }),
    ("client CPU per lock per round", |w| {
        format!("{:.2} µs", w.figures.client_cpu_us_per_lock)
    }),
    ("redis-server CPU per round (idle: per s)", |w| {
        let (round, idle) = (
            w.figures.server_cpu_ms_per_round,
            w.server_idle_cpu_ms_per_s,
        );
        format!("{round:.1} ms ({idle:.1} ms)")
    }),
    ("in the renewal scripts per round", |w| {
        format!("{:.1} ms", w.figures.server_ms_in_scripts_per_round)
    }),
    ("leases lost", |w| w.lost.to_string()),
];

/// Issue #4's targets.
const CHECKS: [Check<WdResult>; 2] = [
    (
        "watchdog: renewal round trips per interval",
        "~1 per 100 locks (≤ 105 for 10,000)",
        |w| {
            let f = &w.figures;
            let calls = format!(
                "{:.1} ({:.1} locks per call)",
                f.calls_per_round, f.locks_per_call
            );
            (
                calls,
                f.calls_per_round <= ratio(w.locks, 100) * WD_CALLS_SLACK,
            )
        },
    ),
    ("watchdog: leases lost while held", "0", |w| {
        (w.lost.to_string(), w.lost == 0)
    }),
];

impl Section for WdResult {
    /// One table row, then the acquisition and release phases.
    fn details(&self, out: &mut String) {
        let (f, locks) = (&self.figures, int(float(self.locks)));
        let _ = writeln!(out, "### Watchdog: {locks} locks held (issue #4)\n");
        let _ = writeln!(
            out,
            "One `Client` in a fresh child process holds {locks} locks taken with \
             `MutexOptions::new().ttl({} ms).watchdog()` (renewed every {} ms). Window: {} renewal \
             rounds after 2 to settle, {:.2} s (measured period {:.3} s); per round = per renewal \
             interval.\n",
            self.ttl_ms, self.interval_ms, self.rounds, self.window_s, f.period_s
        );
        table_of(out, "rrrrrrrrr", &COLUMNS, std::slice::from_ref(self));
        let _ = writeln!(
            out,
            "Acquisition: {locks} sequential `try_acquire` in {:.2} s ({}/s; client CPU {:.0} µs \
             per acquire); µs per acquire in each tenth of the phase: {}. Release: {locks} \
             sequential releases in {:.2} s ({}/s), {} of which found the lease gone.  \n\
             Commands in the window: {}\n",
            self.acquire_s,
            int(self.acquire_per_s),
            self.acquire_cpu_us_each,
            joined(&self.acquire_us_by_tenth, " · ", |us| format!("{us:.0}")),
            self.release_s,
            int(self.release_per_s),
            self.released_not_held,
            self.commands.summary()
        );
    }

    fn targets(&self) -> Vec<Target> {
        checked(self, &CHECKS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_cover_both_ends() {
        assert_eq!(sample_indices(10_000, 16).first(), Some(&0));
        assert_eq!(sample_indices(10_000, 16).last(), Some(&9_999));
        assert_eq!(sample_indices(10_000, 16).len(), 16);
        assert_eq!(sample_indices(3, 16), vec![0, 1, 2]);
        assert_eq!(sample_indices(1, 16), vec![0]);
        assert!(sample_indices(0, 16).is_empty());
    }

    #[test]
    fn figures_per_round() {
        let mut delta = WindowDelta {
            server_cpu_us: 120_000,
            client_cpu_us: 60_000,
            ..WindowDelta::default()
        };
        // 6 rounds of 10,000 locks in 100 calls of 100 each.
        delta.commands.0.insert("evalsha".into(), 600);
        delta.commands.0.insert("get".into(), 60_000);
        delta.commands.0.insert("pexpire".into(), 60_000);
        delta.usec.0.insert("evalsha".into(), 90_000);
        let f = WdFigures::compute(10_000, 6, 6_060_000_000, &delta);
        assert!((f.calls_per_round - 100.0).abs() < 1e-9);
        assert!((f.locks_per_call - 100.0).abs() < 1e-9);
        assert!((f.renewals_per_lock_per_round - 1.0).abs() < 1e-9);
        assert!((f.commands_per_round - 20_100.0).abs() < 1e-9);
        assert!((f.period_s - 1.01).abs() < 1e-9);
        assert!((f.client_cpu_ms_per_round - 10.0).abs() < 1e-9);
        assert!((f.client_cpu_us_per_lock - 1.0).abs() < 1e-9);
        assert!((f.server_cpu_ms_per_round - 20.0).abs() < 1e-9);
        assert!((f.server_ms_in_scripts_per_round - 15.0).abs() < 1e-9);
        // No renewal at all: NaN per call, not a panic.
        let empty = WdFigures::compute(10, 1, 1, &WindowDelta::default());
        assert!(empty.locks_per_call.is_nan());
    }
}
