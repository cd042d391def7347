//! The numbers of WORKLOADS.md in one place: TTL, waits, and the sizes of every workload (full,
//! or the much smaller `--quick` smoke run), plus those of the workloads issues #4, #6 and #30
//! add (the watchdog holding many locks, scheduler replicas, and their delivery modes).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Lease of every lock (WORKLOADS.md: "TTL 10 s for every lock").
pub(crate) const TTL: Duration = Duration::from_secs(10);
/// The same lease in milliseconds, for the raw floor's `SET … PX`.
pub(crate) const TTL_MS: u64 = 10_000;
/// Wait limit of every blocking acquire (W3: "waiting up to 30 s").
pub(crate) const ACQUIRE_WAIT: Duration = Duration::from_secs(30);
/// W3's pause inside the lock; W4 and W5 pause as long in every hold.
pub(crate) const W3_PAUSE: Duration = Duration::from_millis(1);
/// W4 and W5: worker processes, and tasks in each.
pub(crate) const FAMILY_PROCESSES: u32 = 2;
pub(crate) const FAMILY_TASKS: u32 = 8;
/// W4: every tenth ticket is a write (10 % writes).
pub(crate) const W4_WRITE_EVERY: u64 = 10;
/// W5: the semaphore's permits.
pub(crate) const W5_PERMITS: u32 = 4;
/// Tokio worker threads of the multi-thread runtimes (W1 1-CPU multi-thread, W2, W3, memory):
/// one per vCPU here.
pub(crate) const WORKER_THREADS: usize = 2;
/// The CPU that W1 1-CPU (both runtimes) pins the benchmark and redis-server to (`taskset -c 1`).
pub(crate) const PINNED_CPU: usize = 1;

/// W6: renewal rounds left to settle before the held window opens (the watchdog merges leases
/// acquired over time into one schedule within a round or two).
pub(crate) const W6_SETTLE_ROUNDS: u32 = 2;

/// W8: acquisitions of each task (two tasks per name, so every name changes hands; see `w8.rs`).
pub(crate) const W8_ROUNDS: u32 = 2;

/// Scheduler workload: replica processes.
pub(crate) const SCHED_REPLICAS: u32 = 3;
/// Scheduler workload: the job's cron expression (every second) and time zone.
pub(crate) const SCHED_CRON: &str = "* * * * * *";
pub(crate) const SCHED_TZ: &str = "UTC";
/// Scheduler workload: time the replicas run before the measured window may open (their first
/// occurrences load the scheduler's scripts).
pub(crate) const SCHED_WARMUP: Duration = Duration::from_secs(3);
/// Scheduler workload: how far past a whole second the window opens and closes (ms). An
/// occurrence's requests span from 500 ms before its instant (a replica whose clock runs 500 ms
/// ahead asks early, and is told to wait) to ~300 ms after it (a replica 300 ms late), so a
/// window edge at .400 cuts between two occurrences.
pub(crate) const SCHED_EDGE_MS: u64 = 400;
/// Scheduler workload: clock skews of the replicas (ms; positive = ahead), one row each.
pub(crate) const SCHED_SKEWS: [[i64; 3]; 2] = [[0, 0, 0], [-300, 0, 500]];

/// Scheduler delivery comparison (issue #30): the run lease of its job in both modes, short so
/// that the time to a retry after a kill is readable (the attempt lease is the run lease).
pub(crate) const SCHED_DELIVERY_LEASE: Duration = Duration::from_secs(1);
/// At-least-once delivery as measured: attempts in all (the first included), and the backoff
/// before the second (doubling after).
pub(crate) const SCHED_RETRY_ATTEMPTS: u32 = 3;
pub(crate) const SCHED_RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Kill phase: the first attempt of every occurrence whose Unix second is a multiple of this is
/// a long run (the one to kill); the others are one `INCR`.
pub(crate) const SCHED_LONG_EVERY_S: i64 = 4;
/// Kill phase: how long a long run works (it is killed well before).
pub(crate) const SCHED_LONG_RUN: Duration = Duration::from_secs(3);
/// Kill phase: the first kill comes this long after the long run announced itself; kill `k`
/// of `n` a further `k/n` of a renewal interval (lease / 3) later, so that the kills sample
/// every phase of the leases' renewal.
pub(crate) const SCHED_KILL_AFTER: Duration = Duration::from_millis(400);
/// How long a killed replica stays down before it is started again: past the attempt lease's
/// lapse and the backoff, so that the retry is the surviving replicas' to take (a replica
/// restarted at once would look for retries on start and take most of them itself).
pub(crate) const SCHED_RESTART_AFTER: Duration = Duration::from_secs(2);

/// Scheduler scale stage (issue #31): the handler every replica registers, which the run-time
/// schedules name (`Scheduler::add_schedule`), each on [`SCHED_CRON`] in [`SCHED_TZ`].
pub(crate) const SCHED_SCALE_HANDLER: &str = "scale_tick";
/// Scheduler scale stage: time from the last schedule added to the measured window (every
/// replica picks the schedules up within a heartbeat, and runs them for two seconds or more
/// before the window opens).
pub(crate) const SCHED_SCALE_WARMUP: Duration = Duration::from_secs(3);
/// Scheduler scale stage: the profile window after the measured one (whole seconds), in which
/// redis-server logs every command with its duration (`SLOWLOG`, threshold 0) so that the time
/// of `EVALSHA` is split by script. Five seconds: the `run_now` poll (`request_poll`, 5 s) of
/// schedules added together comes in bursts, once per job and replica in any 5 s.
pub(crate) const SCHED_SCALE_PROFILE_S: u64 = 5;

/// One-off stage (issue #31, `sched-oneoff`): the due instant T of the burst is the first whole
/// second at least this long after the enqueue starts, plus [`SCHED_ONEOFF_BUDGET_PER_JOB`] per
/// one-off: room for the enqueue (one `run_at` after the other), so that it ends before T.
pub(crate) const SCHED_ONEOFF_LEAD: Duration = Duration::from_secs(2);
/// One-off stage: the enqueue time allowed per one-off when T is chosen (measured: well under).
pub(crate) const SCHED_ONEOFF_BUDGET_PER_JOB: Duration = Duration::from_millis(1);
/// One-off stage: the enqueue must end at least this long before T, or the stage fails (the
/// burst would overlap the enqueue).
pub(crate) const SCHED_ONEOFF_MARGIN: Duration = Duration::from_secs(1);
/// One-off stage: the profile burst (`SLOWLOG`, after the measured one) is this fraction of the
/// measured burst's size (1,000 of 10,000): its `SLOWLOG GET` stays a few tens of MB.
pub(crate) const SCHED_ONEOFF_PROFILE_DIVISOR: u64 = 10;

/// A delivery mode of the scheduler's job, as the delivery comparison runs it (issue #30).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum SchedDelivery {
    /// `Delivery::AtMostOnce` (the default).
    AtMostOnce,
    /// `Delivery::at_least_once(SCHED_RETRY_ATTEMPTS, SCHED_RETRY_BACKOFF)`.
    AtLeastOnce,
}

impl SchedDelivery {
    /// Both modes, in report order.
    pub(crate) const ALL: [SchedDelivery; 2] = [Self::AtMostOnce, Self::AtLeastOnce];

    /// The name on the command line (`sched-replica --delivery NAME`) and in job names.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::AtMostOnce => "at-most-once",
            Self::AtLeastOnce => "at-least-once",
        }
    }

    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| format!("unknown delivery `{name}`: use at-most-once or at-least-once"))
    }

    /// The job's delivery.
    pub(crate) fn delivery(self) -> dlock_scheduler::Delivery {
        match self {
            Self::AtMostOnce => dlock_scheduler::Delivery::AtMostOnce,
            Self::AtLeastOnce => {
                dlock_scheduler::Delivery::at_least_once(SCHED_RETRY_ATTEMPTS, SCHED_RETRY_BACKOFF)
            }
        }
    }

    /// How the report names it, with its settings.
    pub(crate) fn label(self) -> String {
        let lease = SCHED_DELIVERY_LEASE.as_millis();
        match self {
            Self::AtMostOnce => format!("at most once, lease {lease} ms"),
            Self::AtLeastOnce => format!(
                "at least once ({SCHED_RETRY_ATTEMPTS} attempts, backoff {} ms), lease {lease} ms",
                SCHED_RETRY_BACKOFF.as_millis()
            ),
        }
    }
}

/// How much work each workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counts {
    pub(crate) quick: bool,
    /// Rounds of the rate stages (W1 1-CPU, W2, W2-fence): each subject's figure is its median
    /// round ([`crate::pairs::median_of_rounds`]).
    pub(crate) rate_rounds: usize,
    pub(crate) w1_warmup: u64,
    pub(crate) w1_pairs: u64,
    pub(crate) w2_tasks: u64,
    pub(crate) w2_pairs: u64,
    pub(crate) w2_warmup_per_task: u64,
    pub(crate) w3_processes: u32,
    pub(crate) w3_tasks: u32,
    pub(crate) w3_acquisitions: u64,
    /// W4: operations (read or write holds) of each lock, in all.
    pub(crate) w4_ops: u64,
    /// W5: acquisitions in all.
    pub(crate) w5_acquisitions: u64,
    pub(crate) mem_guards: u64,
    pub(crate) mem_waiters: u64,
    pub(crate) mem_held_locks: u64,
    /// Occurrences in the scheduler's measured window (one per second).
    pub(crate) sched_occurrences: u64,
    /// Kills of a replica mid-run per delivery mode (the delivery comparison's kill phase).
    pub(crate) sched_kills: u32,
    /// Scheduler scale stage (issue #31): numbers of run-time schedules on the 1-second cron,
    /// one measured window each (0: not run).
    pub(crate) sched_scale_jobs: [u64; 3],
    /// Scheduler scale stage: seconds (= occurrences of each schedule) in each window.
    pub(crate) sched_scale_window_s: u64,
    /// Scheduler one-off stage (issue #31): one-off jobs due at the same instant.
    pub(crate) sched_oneoff_jobs: u64,
    /// `--scale` (`make bench-scale`): the scale workloads (W6–W8, Cluster) at their full sizes.
    pub(crate) scale: bool,
    /// W6: numbers of locks one client holds under the watchdog, one run each (0: not run).
    pub(crate) w6_locks: [u64; 3],
    /// W6: leases (s) of the held locks, one run each per number of locks (0: not run).
    pub(crate) w6_ttl_s: [u64; 2],
    /// W6: lease periods each run holds its locks for.
    pub(crate) w6_periods: u32,
    /// W7: worker processes, and waiting tasks in each (each acquires the one lock once).
    pub(crate) w7_processes: u32,
    pub(crate) w7_tasks: u32,
    /// W8: distinct lock names (two tasks contend on each), and the worker processes they are
    /// spread over.
    pub(crate) w8_names: u64,
    pub(crate) w8_processes: u32,
}

impl Counts {
    /// The figures of WORKLOADS.md.
    pub(crate) const FULL: Counts = Counts {
        quick: false,
        rate_rounds: 5,
        w1_warmup: 1_000,
        w1_pairs: 20_000,
        w2_tasks: 64,
        w2_pairs: 50_000,
        w2_warmup_per_task: 10,
        w3_processes: 2,
        w3_tasks: 4,
        w3_acquisitions: 2_000,
        w4_ops: 20_000,
        w5_acquisitions: 4_000,
        mem_guards: 10_000,
        mem_waiters: 10_000,
        mem_held_locks: 100,
        sched_occurrences: 20,
        sched_kills: 6,
        sched_scale_jobs: [100, 300, 1_000],
        sched_scale_window_s: 10,
        sched_oneoff_jobs: 10_000,
        scale: false,
        w6_locks: [10_000, 0, 0],
        w6_ttl_s: [3, 0],
        w6_periods: 5,
        w7_processes: 8,
        w7_tasks: 125,
        w8_names: 10_000,
        w8_processes: 4,
    };

    /// A smoke run: same shapes, about a tenth of the work. Not comparable with full runs.
    pub(crate) const QUICK: Counts = Counts {
        quick: true,
        rate_rounds: 1,
        w1_warmup: 100,
        w1_pairs: 2_000,
        w2_tasks: 64,
        w2_pairs: 5_000,
        w2_warmup_per_task: 2,
        w3_processes: 2,
        w3_tasks: 4,
        w3_acquisitions: 200,
        w4_ops: 2_000,
        w5_acquisitions: 400,
        mem_guards: 1_000,
        mem_waiters: 1_000,
        mem_held_locks: 10,
        sched_occurrences: 5,
        sched_kills: 2,
        sched_scale_jobs: [100, 0, 0],
        sched_scale_window_s: 3,
        sched_oneoff_jobs: 1_000,
        scale: false,
        w6_locks: [1_000, 0, 0],
        w6_ttl_s: [3, 0],
        w6_periods: 2,
        w7_processes: 2,
        w7_tasks: 100,
        w8_names: 1_000,
        w8_processes: 2,
    };

    /// `make bench-scale` (`--scale`): the scale workloads at the sizes of issue #29 (W6: 10k,
    /// 50k and 100k held locks at a 3 s and a 30 s lease; W7: 10,000 waiters in 8 processes;
    /// W8: 100,000 contended names in 4 processes); the other workloads as in a full run.
    pub(crate) const SCALE: Counts = Counts {
        scale: true,
        w6_locks: [10_000, 50_000, 100_000],
        w6_ttl_s: [3, 30],
        w6_periods: 5,
        w7_processes: 8,
        w7_tasks: 1_250,
        w8_names: 100_000,
        w8_processes: 4,
        ..Counts::FULL
    };

    /// Pairs of W2 task `task`: the total split as evenly as possible, the first tasks taking one
    /// more (50,000 over 64: 782 for tasks 0–15, 781 for 16–63).
    pub(crate) fn w2_pairs_of(&self, task: u64) -> u64 {
        let base = self.w2_pairs / self.w2_tasks;
        let extra = self.w2_pairs % self.w2_tasks;
        base + u64::from(task < extra)
    }

    /// W3 workers in all.
    pub(crate) fn w3_workers(&self) -> u32 {
        self.w3_processes * self.w3_tasks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w2_split_matches_the_spec() {
        let c = Counts::FULL;
        assert_eq!(c.w2_pairs_of(0), 782);
        assert_eq!(c.w2_pairs_of(15), 782);
        assert_eq!(c.w2_pairs_of(16), 781);
        assert_eq!(c.w2_pairs_of(63), 781);
        let total: u64 = (0..c.w2_tasks).map(|t| c.w2_pairs_of(t)).sum();
        assert_eq!(total, 50_000);
        let q = Counts::QUICK;
        let total: u64 = (0..q.w2_tasks).map(|t| q.w2_pairs_of(t)).sum();
        assert_eq!(total, q.w2_pairs);
    }

    #[test]
    fn delivery_modes_round_trip_their_names() {
        for mode in SchedDelivery::ALL {
            assert_eq!(SchedDelivery::parse(mode.name()), Ok(mode));
        }
        assert!(SchedDelivery::parse("exactly-once").is_err());
        assert_eq!(
            SchedDelivery::AtLeastOnce.delivery().attempts(),
            SCHED_RETRY_ATTEMPTS
        );
        assert!(!SchedDelivery::AtMostOnce.delivery().retries());
    }
}
