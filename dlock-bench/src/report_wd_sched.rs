//! The markdown of the two workloads without a floor: 10,000 locks held under the watchdog
//! (issue #4) and scheduler replicas on a 1-second cron (issue #6). Kept apart from `report` so
//! that each file stays about one thing.

use std::fmt::Write as _;

use crate::report::int;
use crate::sched::{SchedResult, SchedRow};
use crate::wd::WdResult;

/// The watchdog section: one table row, then the acquisition and release phases.
pub(crate) fn watchdog_section(out: &mut String, wd: &WdResult) {
    let f = &wd.figures;
    let _ = writeln!(
        out,
        "### Watchdog: {} locks held (issue #4)\n",
        int(as_f64(wd.locks))
    );
    let _ = writeln!(
        out,
        "One `Client` in a fresh child process holds {} locks taken with \
         `MutexOptions::new().ttl({} ms).watchdog()` (renewed every {} ms). Window: {} renewal \
         rounds after 2 to settle, {:.2} s (measured period {:.3} s); per round = per renewal \
         interval.\n",
        int(as_f64(wd.locks)),
        wd.ttl_ms,
        wd.interval_ms,
        wd.rounds,
        wd.window_s,
        f.period_s
    );
    let _ = writeln!(
        out,
        "| round trips (EVALSHA) per round | locks renewed per call | renewals per lock per round \
         | Redis commands per round | client CPU per round | client CPU per lock per round \
         | redis-server CPU per round (idle: per s) | in the renewal scripts per round | leases lost |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| {:.1} | {:.1} | {:.2} | {} | {:.1} ms | {:.2} µs | {:.1} ms ({:.1} ms) | {:.1} ms | {} |\n",
        f.calls_per_round,
        f.locks_per_call,
        f.renewals_per_lock_per_round,
        int(f.commands_per_round),
        f.client_cpu_ms_per_round,
        f.client_cpu_us_per_lock,
        f.server_cpu_ms_per_round,
        wd.server_idle_cpu_ms_per_s,
        f.server_ms_in_scripts_per_round,
        wd.lost
    );
    watchdog_phases(out, wd);
}

/// The acquisition and release phases of the watchdog workload, and its commands.
fn watchdog_phases(out: &mut String, wd: &WdResult) {
    let _ = writeln!(
        out,
        "Acquisition: {} sequential `try_acquire` in {:.2} s ({}/s; client CPU {:.0} µs per \
         acquire); µs per acquire in each tenth of the phase: {}. Release: {} sequential \
         releases in {:.2} s ({}/s), {} of which found the lease gone.  \n\
         Commands in the window: {}\n",
        int(as_f64(wd.locks)),
        wd.acquire_s,
        int(wd.acquire_per_s),
        wd.acquire_cpu_us_each,
        wd.acquire_us_by_tenth
            .iter()
            .map(|us| format!("{us:.0}"))
            .collect::<Vec<_>>()
            .join(" · "),
        int(as_f64(wd.locks)),
        wd.release_s,
        int(wd.release_per_s),
        wd.released_not_held,
        wd.commands.summary()
    );
}

/// The scheduler section: timing and correctness per row, then cost per row.
pub(crate) fn scheduler_section(out: &mut String, sched: &SchedResult) {
    let _ = writeln!(out, "### Scheduler: 3 replicas, 1-second cron (issue #6)\n");
    let _ = writeln!(
        out,
        "3 replica processes (`Scheduler`, default options, replica ids r0 r1 r2), one job \
         `* * * * * *` (UTC) whose handler does one `INCR`. Window: the occurrences whose \
         nominal instant falls inside it, edges at whole second + 400 ms. Fire delay = \
         `RunRecord::start_delay()` (start by the Redis server's clock − nominal instant, ms \
         resolution).\n"
    );
    let _ = writeln!(
        out,
        "| replica clock skews (r0 / r1 / r2) | occurrences | fire delay p50 / p99 / max ms | \
         started early | ran by r0 / r1 / r2 | ran exactly once (window) | whole run: once / \
         more / missed | ledger = counters |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---:|---:|---|");
    for row in &sched.rows {
        timing_row(out, row);
    }
    let _ = writeln!(
        out,
        "\n| replica clock skews | Redis commands / occurrence / replica | client round trips / \
         occurrence / replica | winner's round trips / occurrence | each loser's claims / \
         occurrence | too-early claims / occurrence | `run_now` polls / replica / occurrence | \
         µs in commands / occurrence | redis-server CPU µs / occurrence (idle: per s) | CPU of \
         a replica, ms/s |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &sched.rows {
        cost_row(out, row);
    }
    out.push('\n');
    for row in &sched.rows {
        let _ = writeln!(
            out,
            "Commands in the window ({}, less the handler's `INCR`): {}  ",
            row.skew_label(),
            row.commands.summary()
        );
    }
    out.push('\n');
}

fn timing_row(out: &mut String, row: &SchedRow) {
    let d = &row.delay;
    let ran_by = ["r0", "r1", "r2"]
        .iter()
        .map(|r| row.winners.get(*r).copied().unwrap_or(0).to_string())
        .collect::<Vec<_>>()
        .join(" / ");
    let w = &row.whole_run;
    let _ = writeln!(
        out,
        "| {} | {} | {:.0} / {:.0} / {:.0} | {} | {ran_by} | {} of {} | {} / {} / {} | {} |",
        row.skew_label(),
        row.occurrences,
        d.p50_ms,
        d.p99_ms,
        d.max_ms,
        d.early,
        row.once.once,
        row.once.occurrences,
        w.once,
        w.repeated,
        w.missed,
        agreement(row)
    );
}

/// Whether the ledger and the counters name the same occurrences, and every run succeeded.
fn agreement(row: &SchedRow) -> String {
    let mut text = if row.ledger_mismatches == 0 {
        "yes".to_owned()
    } else {
        format!("**no** ({} differ)", row.ledger_mismatches)
    };
    if row.not_succeeded > 0 {
        text.push_str(&format!("; **{} runs did not succeed**", row.not_succeeded));
    }
    text
}

fn cost_row(out: &mut String, row: &SchedRow) {
    let c = &row.costs;
    let b = c.breakdown.as_ref();
    let cell = |f: &dyn Fn(&crate::sched_stats::Breakdown) -> f64| {
        b.map_or_else(|| "—".to_owned(), |b| format!("{:.2}", f(b)))
    };
    let _ = writeln!(
        out,
        "| {} | {:.2} | {:.2} | {} | {} | {} | {} | {:.1} | {:.0} ({:.0}) | {:.2} |",
        row.skew_label(),
        c.commands_per_occurrence_per_replica,
        c.round_trips_per_occurrence_per_replica,
        cell(&|b| b.winner_per_occurrence),
        cell(&|b| b.loser_per_occurrence),
        cell(&|b| b.too_early_per_occurrence),
        cell(&|b| b.polls_per_replica_per_occurrence),
        c.server_us_in_commands_per_occurrence,
        c.server_cpu_us_per_occurrence,
        c.server_idle_cpu_ms_per_s * 1e3,
        c.client_cpu_ms_per_replica_per_s
    );
}

fn as_f64(n: u64) -> f64 {
    crate::stats::ratio(n, 1)
}
