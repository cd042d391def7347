//! The results of one run: the markdown report printed on stdout (the WORKLOADS.md table, the
//! ratios to the floor, command counts, W3 details, memory, the watchdog and scheduler workloads,
//! and the targets of issues #3, #4 and #6) and the JSON written next to it.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::memory::MemoryResult;
use crate::pairs::{self, PairResult};
use crate::rt::BoxError;
use crate::sched::SchedResult;
use crate::spec::Counts;
use crate::subjects::Kind;
use crate::targets::{Ratios, Target};
use crate::w3::{W3, W3Result};
use crate::wd::WdResult;

/// Where and how the run happened.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Meta {
    pub(crate) quick: bool,
    pub(crate) counts: Counts,
    pub(crate) redis_version: String,
    pub(crate) cpus: usize,
    pub(crate) cpu_model: String,
    pub(crate) kernel: String,
    /// Both subjects' connections: RESP3, `TCP_NODELAY` on (as dlock's client sets it).
    pub(crate) connection: &'static str,
    pub(crate) runtimes: &'static str,
    /// `/proc/loadavg` (1, 5, 15 min) when the run started and when it ended: other work on
    /// this shared machine shows up here.
    pub(crate) loadavg_start: String,
    pub(crate) loadavg_end: String,
}

impl Meta {
    pub(crate) fn collect(counts: Counts, redis_version: String) -> Meta {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, m)| m.trim().to_owned());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |k| k.trim().to_owned());
        Meta {
            quick: counts.quick,
            counts,
            redis_version,
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model,
            kernel,
            connection: "one multiplexed RESP3 connection per client, TCP_NODELAY on (as dlock sets it)",
            runtimes: "W1 and W1 1-CPU: current-thread; W2, W3 workers, memory: multi-thread with 2 \
                       workers; the same for the floor and dlock",
            loadavg_start: loadavg(),
            loadavg_end: String::new(),
        }
    }
}

/// The three load averages of `/proc/loadavg`.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// What the selected workloads measured (`None`: not run).
#[derive(Clone, Debug, Default)]
pub(crate) struct Measured {
    pub(crate) w1: Option<Vec<PairResult>>,
    pub(crate) w1_pinned: Option<Vec<PairResult>>,
    pub(crate) w2: Option<Vec<PairResult>>,
    pub(crate) w3: Option<W3>,
    pub(crate) memory: Option<MemoryResult>,
    pub(crate) wd: Option<WdResult>,
    pub(crate) sched: Option<SchedResult>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Results {
    pub(crate) meta: Meta,
    pub(crate) w1: Option<Vec<PairResult>>,
    pub(crate) w1_pinned: Option<Vec<PairResult>>,
    pub(crate) w2: Option<Vec<PairResult>>,
    pub(crate) w3: Option<W3>,
    pub(crate) memory: Option<MemoryResult>,
    pub(crate) wd: Option<WdResult>,
    pub(crate) sched: Option<SchedResult>,
    pub(crate) ratios: Ratios,
    pub(crate) targets: Vec<Target>,
}

impl Results {
    /// Gathers the figures of one run, with the ratios to the floor and the targets checked.
    pub(crate) fn new(meta: Meta, measured: Measured) -> Results {
        let Measured {
            w1,
            w1_pinned,
            w2,
            w3,
            memory,
            wd,
            sched,
        } = measured;
        let mut meta = meta;
        meta.loadavg_end = loadavg();
        let mut ratios = Ratios::compute(w1.as_ref(), w1_pinned.as_ref(), w2.as_ref());
        let w3_dlock = w3.as_ref().and_then(|w| w.runs.first());
        ratios.w3_cross_gap_p50 = w3
            .as_ref()
            .zip(w3_dlock)
            .map(|(w3, dlock)| dlock.contention.cross_gap_p50_us / w3.handoff_floor.p50_us);
        let targets = crate::targets::evaluate(
            &ratios,
            w3_dlock,
            memory.as_ref(),
            wd.as_ref(),
            sched.as_ref(),
        );
        Results {
            meta,
            w1,
            w1_pinned,
            w2,
            w3,
            memory,
            wd,
            sched,
            ratios,
            targets,
        }
    }

    /// Writes the JSON to `path`, creating its directory.
    pub(crate) fn write_json(&self, path: &Path) -> Result<(), BoxError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(())
    }

    /// The markdown report.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        self.header(&mut out);
        self.main_table(&mut out);
        self.ratio_table(&mut out);
        self.command_table(&mut out);
        if let Some(w3) = self.w3.as_ref().and_then(|w| w.runs.first()) {
            w3_details(&mut out, w3);
        }
        if let Some(memory) = &self.memory {
            memory_table(&mut out, memory);
        }
        if let Some(wd) = &self.wd {
            crate::report_wd_sched::watchdog_section(&mut out, wd);
        }
        if let Some(sched) = &self.sched {
            crate::report_wd_sched::scheduler_section(&mut out, sched);
        }
        self.target_table(&mut out);
        out
    }

    fn header(&self, out: &mut String) {
        let m = &self.meta;
        let kind = if m.quick {
            "QUICK smoke run (--quick: about a tenth of the work; not comparable with full runs)"
        } else {
            "full run"
        };
        let _ = writeln!(out, "## dlock benchmark (WORKLOADS.md): {kind}\n");
        let _ = writeln!(
            out,
            "Redis {} · {} CPUs ({}) · kernel {} · load average {} at the start, {} at the end  \n\
             Connections: {}.  \nRuntimes: {}.\n",
            m.redis_version,
            m.cpus,
            m.cpu_model,
            m.kernel,
            m.loadavg_start,
            m.loadavg_end,
            m.connection,
            m.runtimes
        );
    }

    fn main_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "| subject | W1 pairs/s | W1 p50/p99 µs | W1 1-CPU pairs/s | W2 pairs/s | W3 acq/s | \
             W3 cross-worker gap p50/p99 µs | W3 self-handoff % | W3 fairness min–max | W3 lost | \
             W3 overlaps | W3 round trips/acq |"
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for floor in [true, false] {
            let w1 = pick(self.w1.as_ref(), floor);
            let pinned = pick(self.w1_pinned.as_ref(), floor);
            let w2 = pick(self.w2.as_ref(), floor);
            let label = if floor { "raw floor" } else { "dlock" };
            let w3 = if floor {
                floor_w3_cells(self.w3.as_ref().map(|w| &w.handoff_floor))
            } else {
                w3_cells(self.w3.as_ref().and_then(|w| w.runs.first()))
            };
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} | {} | {w3} |",
                opt(w1, |r| int(r.pairs_per_s)),
                opt(w1, |r| format!("{:.1} / {:.1}", r.p50_us, r.p99_us)),
                opt(pinned, |r| int(r.pairs_per_s)),
                opt(w2, |r| int(r.pairs_per_s)),
            );
        }
        if self.w3.is_some() {
            let _ = writeln!(
                out,
                "\nThe floor's W3 gap is not a lock: it is the one-way latency of a raw `PUBLISH` \
                 from one process to a RESP3 push in another, in W3's rhythm (1 ms blocking pause \
                 before each send), the trip every push-based hand-off makes."
            );
        }
        out.push('\n');
    }

    fn ratio_table(&self, out: &mut String) {
        let r = &self.ratios;
        let _ = writeln!(
            out,
            "### Ratios to the floor (dlock ÷ raw floor, same run)\n"
        );
        let _ = writeln!(
            out,
            "| | W1 pairs/s | W1 p50 latency | W1 p99 latency | W1 1-CPU pairs/s | W2 pairs/s | W3 cross-worker gap p50 |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        let x = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| format!("{v:.2}×"));
        let _ = writeln!(
            out,
            "| dlock | {} | {} | {} | {} | {} | {} |\n",
            x(r.w1_pairs_per_s),
            x(r.w1_p50_latency),
            x(r.w1_p99_latency),
            x(r.w1_pinned_pairs_per_s),
            x(r.w2_pairs_per_s),
            x(r.w3_cross_gap_p50)
        );
    }

    fn command_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### Commands (`INFO commandstats` delta over the measured window, `info` left out)\n"
        );
        let _ = writeln!(
            out,
            "| workload | subject | commands/op | client round trips/op | µs/op in commands | redis-server CPU µs/op | client CPU µs/op | commands in the window |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---|");
        let workloads = [
            ("W1 (per pair)", &self.w1),
            ("W1 1-CPU (per pair)", &self.w1_pinned),
            ("W2 (per pair)", &self.w2),
        ];
        for (name, subjects) in workloads {
            let Some(s) = subjects else { continue };
            for r in s {
                command_row(out, name, r);
            }
        }
        if let Some(w3) = self.w3.as_ref().and_then(|w| w.runs.first()) {
            let _ = writeln!(
                out,
                "| W3 (per acquisition, less the workload's INCR/GET/SET) | dlock | {:.2} | {:.2} | {:.1} | {:.1} | — | {} |",
                w3.commands_per_acq,
                w3.round_trips_per_acq,
                w3.server_us_per_acq,
                w3.server_cpu_us_per_acq,
                w3.commands.summary()
            );
        }
        out.push('\n');
    }

    fn target_table(&self, out: &mut String) {
        if self.targets.is_empty() {
            return;
        }
        let _ = writeln!(out, "### Targets (issues #3, #4, #6)\n");
        let _ = writeln!(out, "| target | wanted | measured | met |");
        let _ = writeln!(out, "|---|---|---|---|");
        for t in &self.targets {
            let met = match t.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "—",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {met} |",
                t.name, t.wanted, t.measured
            );
        }
        out.push('\n');
    }
}

fn pick(subjects: Option<&Vec<PairResult>>, floor: bool) -> Option<&PairResult> {
    let kind = if floor { Kind::Floor } else { Kind::Dlock };
    subjects.and_then(|s| pairs::of(s, kind))
}

fn command_row(out: &mut String, workload: &str, r: &PairResult) {
    let subject = r.subject.label();
    let _ = writeln!(
        out,
        "| {workload} | {subject} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {} |",
        r.commands_per_pair,
        r.round_trips_per_pair,
        r.server_us_per_pair,
        r.server_cpu_us_per_pair,
        r.client_cpu_us_per_pair,
        r.commands.summary()
    );
}

fn w3_cells(w3: Option<&W3Result>) -> String {
    let Some(w3) = w3 else {
        return ["—"; 7].join(" | ");
    };
    let c = &w3.contention;
    [
        int(w3.acquisitions_per_s),
        format!("{:.0} / {:.0}", c.cross_gap_p50_us, c.cross_gap_p99_us),
        format!("{:.1}", c.self_handoff_pct),
        format!("{}–{}", c.fairness_min, c.fairness_max),
        w3.lost_updates.to_string(),
        c.overlaps.to_string(),
        format!("{:.2}", w3.round_trips_per_acq),
    ]
    .join(" | ")
}

fn floor_w3_cells(floor: Option<&crate::handoff_floor::HandoffFloor>) -> String {
    let gap = floor.map_or_else(
        || "—".to_owned(),
        |f| format!("{:.0} / {:.0} (raw pub/sub)", f.p50_us, f.p99_us),
    );
    ["—".to_owned(), gap]
        .into_iter()
        .chain(std::iter::repeat_n("—".to_owned(), 5))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn w3_details(out: &mut String, w3: &W3Result) {
    let c = &w3.contention;
    let _ = writeln!(out, "### W3 details\n");
    let _ = writeln!(
        out,
        "{} processes × {} tasks; {} acquisitions of {} tickets in {:.2} s; final counter {}; \
         timeouts {}; releases that found the lease gone {}.  \nHand-off gap, all hand-offs: \
         p50 {:.0} µs, p99 {:.0} µs; cross-worker only: p50 {:.0} µs, p99 {:.0} µs; \
         self-hand-offs {:.1} %.\n",
        w3.processes,
        w3.workers / w3.processes.max(1),
        c.acquisitions,
        w3.tickets,
        w3.window_s,
        w3.final_counter,
        w3.timeouts,
        w3.not_held_at_release,
        c.gap_p50_us,
        c.gap_p99_us,
        c.cross_gap_p50_us,
        c.cross_gap_p99_us,
        c.self_handoff_pct
    );
}

fn memory_table(out: &mut String, m: &MemoryResult) {
    let g = &m.guards;
    let w = &m.waiters;
    let _ = writeln!(out, "### Memory (fresh child process per probe)\n");
    let _ = writeln!(
        out,
        "| | client (RSS growth) | Redis (`used_memory` growth) |"
    );
    let _ = writeln!(out, "|---|---:|---:|");
    let _ = writeln!(
        out,
        "| held guard ({} guards) | {:.0} B per guard ({} B inline) | {:.0} B per held lock; \
         {:.0} B left per released lock (fence key) |",
        g.guards,
        g.bytes_per_guard,
        g.guard_inline_bytes,
        g.redis_bytes_per_held_lock,
        g.redis_bytes_per_released_lock
    );
    let _ = writeln!(
        out,
        "| waiting task ({} tasks on {} held locks, {} queued) | {:.0} B per task (task future {} \
         B, of which `acquire_timeout` {} B) | {:.0} B per queued waiter |\n",
        w.waiters,
        w.held_locks,
        w.queued,
        w.bytes_per_waiter,
        w.task_future_bytes,
        w.acquire_future_bytes,
        w.redis_bytes_per_waiter
    );
}

fn opt<T>(value: Option<&T>, f: impl Fn(&T) -> String) -> String {
    value.map_or_else(|| "—".to_owned(), f)
}

/// A rate with thousands separators, rounded to an integer.
pub(crate) fn int(v: f64) -> String {
    if !v.is_finite() {
        return "—".to_owned();
    }
    #[allow(clippy::cast_possible_truncation)] // rates are far below i64::MAX
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    if n < 0 {
        format!("-{grouped}")
    } else {
        grouped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_get_thousands_separators() {
        assert_eq!(int(0.4), "0");
        assert_eq!(int(999.0), "999");
        assert_eq!(int(1_000.0), "1,000");
        assert_eq!(int(12_345.6), "12,346");
        assert_eq!(int(-1_234_567.0), "-1,234,567");
        assert_eq!(int(f64::NAN), "—");
    }
}
