//! The scheduler's kill phase (issue #30), the parent side: 3 replica processes run the
//! delivery comparison's job with `--faults` (every run announces itself; the first attempt of
//! every occurrence on a multiple of 4 s works 3 s), and the parent SIGKILLs the replica running
//! each long run, a little into it, then starts that replica again 2 s later (same replica id,
//! a new process; `SCHED_RESTART_AFTER`, after the retry is due). After the last kill it waits until a later occurrence has started (and, at
//! least once, the killed run's next attempt), stops the replicas and reads the ledger;
//! [`crate::sched_faults`] works out what became of each kill.
//!
//! **When the kills come.** Kill `k` of `n` comes [`SCHED_KILL_AFTER`] + `k/n` of a renewal
//! interval (lease / 3) after the run's handler started, by the wall clock: the run's leases
//! (its lock's and, at least once, its attempt's in the ledger) are renewed every third of
//! the lease from when the run took them, so the kills sample every phase of that renewal, as
//! crashes at random instants would. The run's lease then lapses between ⅔ of a lease and one
//! lease after the kill.

use serde::{Deserialize, Serialize};

use crate::child::{GO, Group, STOP, args};
use crate::control::Control;
use crate::rt::{BoxError, current_thread_runtime, sleep_until_wall_us};
use crate::sched::read_outcome;
use crate::sched_faults::{Announcement, Kill, KillOutcome, KillSummary, LedgerRun};
use crate::sched_replica::{ReplicaReport, started_key};
use crate::spec::{
    Counts, SCHED_DELIVERY_LEASE, SCHED_KILL_AFTER, SCHED_REPLICAS, SCHED_RESTART_AFTER,
    SCHED_WARMUP, SchedDelivery,
};
use crate::stats::{count, millis};

/// The longest wait for the next announcement (a long run comes every 4 s).
const ANNOUNCE_LIMIT_S: f64 = 10.0;

/// One delivery mode's kill phase.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct KillRun {
    pub(crate) delivery: SchedDelivery,
    pub(crate) job: String,
    pub(crate) summary: KillSummary,
    pub(crate) kills: Vec<KillOutcome>,
    /// Handler starts announced after the warm-up.
    pub(crate) announced: u64,
    /// Occurrences whose handler completed more than once (counters): must be 0.
    pub(crate) completed_twice: u64,
    /// The replicas that were still running at the end (reports).
    pub(crate) replicas: Vec<ReplicaReport>,
}

/// Runs the kill phase of `delivery` on `job`.
pub(crate) fn run(
    url: &str,
    counts: &Counts,
    delivery: SchedDelivery,
    job: &str,
) -> Result<KillRun, BoxError> {
    let runtime = current_thread_runtime()?;
    let mut control = runtime.block_on(Control::fresh(url))?;
    let mut watch = Watch {
        // BLPOP blocks for longer than a default connection's response timeout.
        watcher: runtime.block_on(Control::patient(url))?,
        runtime,
        key: started_key(job),
        announced: Vec::new(),
    };
    let replica_args = |replica: usize| {
        let replica = replica.to_string();
        let extra = [
            "--process",
            &replica,
            "--job",
            job,
            "--delivery",
            delivery.name(),
            "--faults",
        ];
        args("sched-replica", url, &Counts::FULL, &extra)
    };
    let replicas = usize::try_from(SCHED_REPLICAS)?;
    let mut group = Group::ready((0..replicas).map(replica_args))?;
    group.send(GO)?;
    // The first runs load the scheduler's scripts; a long run that starts meanwhile is left
    // to finish, and the announcements so far are dropped.
    std::thread::sleep(SCHED_WARMUP);
    watch.drain()?;
    watch.announced.clear();
    let n = counts.sched_kills;
    let kills = (0..n)
        .map(|k| watch.kill_next_long_run(&mut group, kill_offset_us(k, n), &replica_args))
        .collect::<Result<Vec<Kill>, BoxError>>()?;
    if let Some(last) = kills.last() {
        while !followed_up(delivery, last, &watch.announced) {
            watch.next()?;
        }
    }
    group.send(STOP)?;
    let replicas = group.results::<ReplicaReport>()?;
    watch.drain()?;
    let (history, counters) = watch
        .runtime
        .block_on(read_outcome(url, &mut control, job))?;
    let runs: Vec<LedgerRun> = history.iter().map(LedgerRun::of).collect();
    let outcomes: Vec<KillOutcome> = kills
        .iter()
        .map(|kill| KillOutcome::of(kill, &runs, &watch.announced))
        .collect();
    Ok(KillRun {
        delivery,
        job: job.to_owned(),
        summary: KillSummary::of(&outcomes),
        kills: outcomes,
        announced: count(watch.announced.len()),
        completed_twice: count(counters.values().filter(|&&n| n > 1).count()),
        replicas,
    })
}

/// The parent's view of the runs' announcements, kept in order.
struct Watch {
    runtime: tokio::runtime::Runtime,
    watcher: Control,
    key: String,
    announced: Vec<Announcement>,
}

impl Watch {
    /// Waits for the next announcement (`BLPOP`, up to [`ANNOUNCE_LIMIT_S`]) and keeps it.
    fn next(&mut self) -> Result<Announcement, BoxError> {
        let popped: Option<(String, String)> = self.runtime.block_on(
            redis::cmd("BLPOP")
                .arg(&self.key)
                .arg(ANNOUNCE_LIMIT_S)
                .query_async(self.watcher.conn()),
        )?;
        let (_, line) = popped.ok_or_else(|| {
            format!("no run was announced within {ANNOUNCE_LIMIT_S} s (is a replica stuck?)")
        })?;
        let next = Announcement::parse(&line)?;
        self.announced.push(next.clone());
        Ok(next)
    }

    /// Keeps every announcement left on the list, and empties it.
    fn drain(&mut self) -> Result<(), BoxError> {
        let (lines, _): (Vec<String>, u64) = self.runtime.block_on(
            redis::pipe()
                .atomic()
                .cmd("LRANGE")
                .arg(&self.key)
                .arg(0)
                .arg(-1)
                .cmd("DEL")
                .arg(&self.key)
                .query_async(self.watcher.conn()),
        )?;
        for line in lines {
            self.announced.push(Announcement::parse(&line)?);
        }
        Ok(())
    }

    /// Waits for the next long run, SIGKILLs its replica `offset_us` after the run's handler
    /// started, and starts that replica again [`SCHED_RESTART_AFTER`] later (`replica_args`).
    fn kill_next_long_run(
        &mut self,
        group: &mut Group,
        offset_us: u64,
        replica_args: &dyn Fn(usize) -> Vec<String>,
    ) -> Result<Kill, BoxError> {
        let target = loop {
            let next = self.next()?;
            if next.is_long() {
                break next;
            }
        };
        sleep_until_wall_us(target.at_us + offset_us)?;
        let index = target.replica_number()?;
        let restarted = group.kill_and_restart(index, &replica_args(index), SCHED_RESTART_AFTER)?;
        if restarted.killed_pid != target.pid {
            return Err(format!(
                "replica {} is process {}, not {} that announced the run",
                target.replica, restarted.killed_pid, target.pid
            )
            .into());
        }
        Ok(Kill {
            occurrence_ms: target.occurrence_ms,
            replica: target.replica,
            killed_pid: restarted.killed_pid,
            respawned_pid: restarted.pid,
            started_us: target.at_us,
            killed_us: restarted.killed_at_us,
            respawned_us: restarted.running_at_us,
        })
    }
}

/// How long after the handler started kill `k` of `n` comes (µs): [`SCHED_KILL_AFTER`] plus
/// `k/n` of a renewal interval.
fn kill_offset_us(k: u32, n: u32) -> u64 {
    let renewal_us = millis(SCHED_DELIVERY_LEASE) * 1_000 / 3;
    millis(SCHED_KILL_AFTER) * 1_000 + renewal_us * u64::from(k) / u64::from(n.max(1))
}

/// Whether the announcements show what follows `kill`: a later occurrence ran and, at least
/// once, the killed occurrence's next attempt.
fn followed_up(delivery: SchedDelivery, kill: &Kill, announced: &[Announcement]) -> bool {
    let later = announced
        .iter()
        .any(|a| a.occurrence_ms > kill.occurrence_ms);
    let retried = announced
        .iter()
        .any(|a| a.occurrence_ms == kill.occurrence_ms && a.attempt >= 2);
    later && (retried || delivery == SchedDelivery::AtMostOnce)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_sample_one_renewal_interval() {
        assert_eq!(kill_offset_us(0, 6), 400_000);
        assert_eq!(kill_offset_us(3, 6), 400_000 + 166_666);
        assert!(kill_offset_us(5, 6) < 400_000 + 333_333);
        assert_eq!(kill_offset_us(0, 0), 400_000);
    }

    #[test]
    fn a_kill_is_followed_up_by_its_retry_or_a_later_occurrence() {
        let kill = Kill {
            occurrence_ms: 8_000,
            replica: "r0".into(),
            killed_pid: 1,
            respawned_pid: 2,
            started_us: 0,
            killed_us: 0,
            respawned_us: 0,
        };
        let at = |occurrence_ms, attempt| Announcement {
            occurrence_ms,
            attempt,
            replica: "r1".into(),
            pid: 3,
            at_us: 0,
        };
        let retry = [at(8_000, 1), at(8_000, 2)];
        let later = [at(8_000, 1), at(10_000, 1)];
        let both = [at(8_000, 1), at(8_000, 2), at(10_000, 1)];
        assert!(followed_up(SchedDelivery::AtLeastOnce, &kill, &both));
        assert!(!followed_up(SchedDelivery::AtLeastOnce, &kill, &retry));
        assert!(!followed_up(SchedDelivery::AtLeastOnce, &kill, &later));
        assert!(followed_up(SchedDelivery::AtMostOnce, &kill, &later));
        assert!(!followed_up(SchedDelivery::AtMostOnce, &kill, &retry));
    }
}
