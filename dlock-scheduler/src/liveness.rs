//! The replica's liveness for its jobs' turns: occurrences go round the live replicas
//! (`claim.lua`), so each replica tells Redis every heartbeat that it is live
//! (`heartbeat.lua`) — only for the jobs it did not try to claim lately, since a claim says as
//! much — and takes itself out at shutdown, so that the others do not wait for its turns.
//!
//! **Only for jobs whose loop runs.** The heartbeat is a task of its own, so it could go on
//! vouching for a job whose loop no longer runs — its task panicked, or it is stuck behind a
//! thread that a handler blocks while the heartbeat runs on another — and the other replicas
//! would wait the turn grace for that replica's turns for ever. So each loop's task marks
//! every poll ([`ticking`], which also wakes it once per heartbeat), and a loop silent for
//! [`LOOP_STALL_BEATS`] heartbeats is *stalled*: the heartbeat logs one error naming the job and
//! how long its loop has been silent, takes the replica out of the job's live set at once (and
//! again at every heartbeat while it stays stalled: an attempt the loop started before may
//! still claim, which puts the replica back for one liveness), and the registry entry says
//! so ([`crate::RegisteredJob::loop_stalled_for`]). When the loop runs again, the heartbeat
//! vouches for it again at once. Claims cannot keep a stalled loop live: they come from
//! attempts, which only the loop starts.
//!
//! A whole process that stalls (a current-thread runtime blocked by a handler, SIGSTOP) stops
//! heartbeating altogether: its liveness runs out after three heartbeats, and registry readers
//! show it stalled from then on ([`crate::RegisteredReplica::stalled`]). When it resumes, its
//! heartbeat may run before its loops do; a heartbeat that finds itself late by more than a
//! heartbeat counts the loops' silence from its own resumption, so a process-wide pause is not
//! also reported as stalled loops.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dlock_core::ext;
use futures_util::future::join_all;
use redis::Value;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::replica_state::{JobEntry, Shared};
use crate::scripts::{self, millis};

/// A job's loop that has not run for this many heartbeats is stalled. Its task is woken once
/// per heartbeat at least, so one heartbeat of margin for a busy executor; a heartbeat looks
/// every heartbeat, so the stall is seen within three heartbeats of its start, when the rest
/// of the process still runs.
pub(crate) const LOOP_STALL_BEATS: u32 = 2;

/// Runs `job_loop` (a job's loop) in the task that awaits this, marking every poll of the task
/// in the job's [`crate::replica_state::LoopBeat`], and waking the task once per heartbeat so that an
/// idle loop is seen running too. A panic of the loop ends the marks; so does a thread that
/// blocks, in the loop or in another task, while this task is queued on it.
pub(crate) async fn ticking<F: Future>(
    shared: Arc<Shared>,
    entry: Arc<JobEntry>,
    job_loop: F,
) -> F::Output {
    let mut job_loop = std::pin::pin!(job_loop);
    let mut every = tokio::time::interval(shared.heartbeat);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    std::future::poll_fn(|cx| {
        if let Some(hook) = &shared.loop_hook {
            hook(&entry.job.name);
        }
        entry.loop_beat.tick();
        // Until it is pending: registers the wake-up for the next heartbeat.
        while every.poll_tick(cx).is_ready() {}
        job_loop.as_mut().poll(cx)
    })
    .await
}

/// What the heartbeat does for one job this round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vouch {
    /// The loop runs: tell Redis the replica is live if no claim did lately.
    Live,
    /// The loop runs again after a stall: tell Redis at once.
    Again,
    /// The loop is stalled: take the replica out of the job's live set.
    Out,
}

/// Beats until `stop`, then unregisters the replica from every job (best effort: its liveness
/// runs out by itself within three heartbeats).
pub(crate) async fn heartbeat(shared: Arc<Shared>, stop: CancellationToken) {
    let every_ms = i64::try_from(shared.heartbeat.as_millis()).unwrap_or(i64::MAX);
    // The loops start with this task: their silence counts from now.
    for entry in shared.jobs.all() {
        entry.loop_beat.tick();
    }
    loop {
        let now_ms = shared.clock.local().timestamp_millis();
        // Judged before the registry entry below is written: it shows this round's state.
        let vouches: Vec<_> = shared
            .jobs
            .all()
            .into_iter()
            .map(|entry| {
                let vouch = judge(&shared, &entry);
                (entry, vouch)
            })
            .collect();
        let shared = &shared;
        let beats = vouches.into_iter().map(|(entry, vouch)| async move {
            let due = now_ms.saturating_sub(entry.beat_ms.load(Ordering::Relaxed)) >= every_ms;
            let live = match vouch {
                Vouch::Live if !due => return,
                Vouch::Live | Vouch::Again => true,
                Vouch::Out => false,
            };
            if let Err(e) = beat(shared, &entry, live).await {
                tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: heartbeat failed");
            }
        });
        let registered = async {
            if let Err(e) = crate::registry::publish(shared, true).await {
                tracing::debug!(error = %e, "dlock-scheduler: could not renew the job registry entry");
            }
        };
        // The beats first: once the entry says a loop stalled, its replica is already out of
        // that job's turns (a reader of the registry never sees "stalled" while the others
        // still wait for its turn). One round trip more per heartbeat, once a heartbeat.
        join_all(beats).await;
        registered.await;
        let asleep = Instant::now();
        let slept = stop.run_until_cancelled(tokio::time::sleep(shared.heartbeat));
        if slept.await.is_none() {
            break;
        }
        // Woken late by more than a heartbeat: the whole process stalled (the registry shows
        // that), and its loops may not have been polled yet since it resumed.
        if asleep.elapsed() > shared.heartbeat.saturating_mul(2) {
            for entry in shared.jobs.all() {
                entry.loop_beat.tick();
            }
        }
    }
    let shared = &shared;
    let leave = shared.jobs.all().into_iter().map(|entry| async move {
        if let Err(e) = beat(shared, &entry, false).await {
            tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: could not unregister; the replica's liveness will run out");
        }
    });
    let withdrawn = async {
        if let Err(e) = crate::registry::publish(shared, false).await {
            tracing::debug!(error = %e, "dlock-scheduler: could not withdraw the job registry entry; it expires by itself");
        }
    };
    tokio::join!(join_all(leave), withdrawn);
}

/// Whether the job's loop runs, noted in its entry, with one log line when that changes.
fn judge(shared: &Shared, entry: &JobEntry) -> Vouch {
    let silence = entry.loop_beat.silence();
    let stalled = is_stalled(silence, shared.heartbeat);
    let was = entry.loop_beat.set_stalled(stalled);
    let job = &entry.job.name;
    match (was, stalled) {
        (false, true) => {
            tracing::error!(%job, replica = %shared.replica.id, silent_ms = millis(silence), "dlock-scheduler: the job's loop has not run for {silence:?} (its task panicked, or a blocked thread holds it up); this replica leaves the job's turns to the others until it runs again");
            Vouch::Out
        }
        (true, true) => Vouch::Out,
        (true, false) => {
            tracing::warn!(%job, replica = %shared.replica.id, "dlock-scheduler: the job's loop runs again; this replica takes its turns again");
            Vouch::Again
        }
        (false, false) => Vouch::Live,
    }
}

/// Whether a loop silent for `silence` is stalled, with heartbeats every `heartbeat`.
fn is_stalled(silence: Duration, heartbeat: Duration) -> bool {
    silence >= heartbeat.saturating_mul(LOOP_STALL_BEATS)
}

/// Tells Redis that this replica is live for the job (`live`), or no longer (`!live`, at
/// shutdown or while the job's loop is stalled, so that the others do not wait for its turns).
async fn beat(shared: &Shared, entry: &JobEntry, live: bool) -> Result<(), Error> {
    let mut invocation = scripts::HEARTBEAT.prepare_invoke();
    invocation.key(&entry.keys.replicas);
    if entry.job.delivery.retries() {
        // Only an at-least-once job has pending runs to hear of.
        invocation.key(&entry.keys.retries);
    }
    invocation
        .arg(&shared.replica.id)
        .arg(if live { millis(shared.liveness()) } else { 0 });
    let sent = shared.clock.local();
    let reply: Vec<i64> = ext::invoke(&shared.client, &invocation, "heartbeat").await?;
    if live && let [server_ms, due_ms, ..] = reply.as_slice() {
        shared.heard(Some(entry), sent, Some(&Value::Int(*server_ms)));
        entry.note_retry_due(*due_ms);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_stalled_after_two_silent_heartbeats() {
        let beat = Duration::from_millis(1000);
        assert!(!is_stalled(Duration::ZERO, beat));
        // Woken once per heartbeat: one heartbeat of silence, and a late wake-up, are normal.
        assert!(!is_stalled(Duration::from_millis(1999), beat));
        assert!(is_stalled(Duration::from_millis(2000), beat));
    }
}
