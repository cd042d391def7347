//! Misfires: which occurrences to attempt after a replica was paused, slow or down.
//!
//! A pure function of (schedule, what this replica already handled, now, policy), so it can be
//! tested without Redis or clocks. Attempting an occurrence late is always *safe* in dlock's
//! design, because each occurrence is claimed in Redis under its own key (job name + nominal
//! instant): a replica that wakes late finds an occurrence that another replica ran already
//! claimed, and does nothing. The policy decides only what happens to occurrences that *no*
//! replica ran on time.
//!
//! Two instants matter for an occurrence `o` and the current time `now`:
//!
//! - **on time**: `now - grace <= o <= now`. Timers wake a few milliseconds late; the grace
//!   ([`DEFAULT_GRACE`], one second) absorbs that. On-time occurrences are due under every
//!   policy.
//! - **missed**: `o < now - grace` and `o` after `last_seen`. What happens to these is the
//!   [`MisfirePolicy`].

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use dlock_cron::Schedule;

/// How late an occurrence may be attempted and still count as on time: one second.
///
/// It only has to cover timer and scheduling latency, since anything later is handled by the
/// explicit [`MisfirePolicy`]. (Quartz's misfire threshold is 60 s because Quartz has no
/// per-occurrence claim; here a late attempt is harmless either way.) The job loop delays runs
/// by [jitter](crate::jitter_for), so it adds the jitter's maximum to the grace, through
/// [`due_occurrences_with_grace`].
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(1);

/// The most occurrences one call of [`due_occurrences_with_grace`] returns: 100 (the number of
/// missed schedules at which Kubernetes gives up on a CronJob). Catching up on more takes
/// several calls; each continues after the last occurrence the previous one returned.
pub(crate) const MAX_DUE: usize = 100;

/// What to do with occurrences that no replica attempted on time (after downtime, a long pause,
/// a Redis outage or a clock jump). On time means within one second of the occurrence, plus the
/// job's [jitter](crate::Job::jitter); anything later is *missed*.
///
/// The default is [`FireOnce`](Self::FireOnce). `#[non_exhaustive]`: more policies may come,
/// so a `match` needs a `_` arm.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dlock_scheduler::MisfirePolicy;
///
/// assert_eq!(MisfirePolicy::default(), MisfirePolicy::FireOnce);
/// let hourly_billing = MisfirePolicy::CatchUp { window: Duration::from_secs(24 * 3600) };
/// # let _ = hourly_billing;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MisfirePolicy {
    /// Missed occurrences are dropped; only on-time ones run. Spring's `@Scheduled` (and so
    /// ShedLock) behaves like this. Use it when a late run is worse than none, e.g. a
    /// "good morning" notification.
    Skip,
    /// Of the missed occurrences, only the most recent runs, once, late; the older ones are
    /// dropped. This is Quartz's default for cron triggers (its "smart policy" fires once now),
    /// and what a Kubernetes CronJob does when it missed schedules.
    ///
    /// The default: the lottery of the seeds' example must still be drawn when every replica
    /// was down at noon, yet a one-second job must not run 3600 times after an hour of
    /// downtime.
    #[default]
    FireOnce,
    /// Every missed occurrence no older than `window` (`now - occurrence <= window`) runs,
    /// oldest first, one at a time (each waits for the previous run; at most 100 are queued at
    /// once, the rest follow as they drain). Like Temporal's catch-up window. Use it when
    /// each occurrence matters, e.g. hourly billing. Claims in Redis must then be kept at least
    /// `window` long, or a late replica could run an occurrence a second time.
    CatchUp {
        /// How far back missed occurrences are still run.
        window: Duration,
    },
}

/// Which nominal occurrences this replica should attempt now, oldest first: those on time
/// (`now - grace <= o <= now`; the job loop's grace is [`DEFAULT_GRACE`] plus the job's
/// maximum jitter) and the missed ones that `policy` chooses (see [`MisfirePolicy`]).
///
/// - `last_seen`: the instant up to which this replica has already dealt with the schedule:
///   the last occurrence it attempted, or the `now` of its previous call. Only occurrences
///   strictly after it are considered. `None` (start-up with no history) means nothing is
///   known, so nothing counts as missed: only on-time occurrences are returned, under every
///   policy. The job loop seeds `last_seen` from the run ledger, so that misfires are handled
///   across restarts.
/// - `now`: this replica's current time.
/// - `grace`: how late an occurrence may be and still count as on time. A zero grace makes
///   only occurrences at exactly `now` on time. Durations too large for the calendar saturate.
///
/// The result is sorted, has no duplicates and at most [`MAX_DUE`] entries. After attempting
/// them, set `last_seen = now`, or, when the result has [`MAX_DUE`] entries, to its last entry
/// and call again. A clock that went back (`now < last_seen`) yields nothing.
#[must_use]
pub(crate) fn due_occurrences_with_grace(
    schedule: &Schedule,
    last_seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    policy: MisfirePolicy,
    grace: Duration,
) -> Vec<DateTime<Utc>> {
    // Occurrences at or after `on_time_from` are on time; earlier ones (after last_seen) missed.
    let on_time_from = saturating_sub(now, grace);
    let Some(last_seen) = last_seen else {
        return between(schedule, just_before(on_time_from), now, MAX_DUE);
    };
    let on_time_after = last_seen.max(just_before(on_time_from));
    match policy {
        MisfirePolicy::Skip => between(schedule, on_time_after, now, MAX_DUE),
        MisfirePolicy::FireOnce => {
            // Usually nothing was missed: check that cheaply before searching backwards.
            let missed_any = schedule
                .next_after(last_seen)
                .is_some_and(|first| first < on_time_from);
            let latest_missed = missed_any
                .then(|| schedule.previous_before(on_time_from))
                .flatten()
                .filter(|missed| *missed > last_seen);
            let mut due: Vec<_> = latest_missed.into_iter().collect();
            let room = MAX_DUE - due.len();
            due.extend(between(schedule, on_time_after, now, room));
            due
        }
        MisfirePolicy::CatchUp { window } => {
            let oldest = saturating_sub(now, window).min(on_time_from);
            between(schedule, last_seen.max(just_before(oldest)), now, MAX_DUE)
        }
    }
}

/// [`due_occurrences_with_grace`] with the [`DEFAULT_GRACE`], for the tests.
#[cfg(test)]
#[must_use]
pub(crate) fn due_occurrences(
    schedule: &Schedule,
    last_seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    policy: MisfirePolicy,
) -> Vec<DateTime<Utc>> {
    due_occurrences_with_grace(schedule, last_seen, now, policy, DEFAULT_GRACE)
}

fn between(
    schedule: &Schedule,
    from_exclusive: DateTime<Utc>,
    to_inclusive: DateTime<Utc>,
    cap: usize,
) -> Vec<DateTime<Utc>> {
    schedule
        .occurrences_between(from_exclusive, to_inclusive)
        .take(cap)
        .collect()
}

/// The instant one nanosecond earlier, so that an exclusive bound includes `instant` itself.
fn just_before(instant: DateTime<Utc>) -> DateTime<Utc> {
    instant
        .checked_sub_signed(TimeDelta::nanoseconds(1))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn saturating_sub(instant: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(duration)
        .ok()
        .and_then(|delta| instant.checked_sub_signed(delta))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 5, 1, h, m, s).unwrap()
    }

    fn ms(n: i64) -> TimeDelta {
        TimeDelta::milliseconds(n)
    }

    fn every_minute() -> Schedule {
        Schedule::new("* * * * *", "UTC").unwrap()
    }

    const ALL: [MisfirePolicy; 3] = [
        MisfirePolicy::Skip,
        MisfirePolicy::FireOnce,
        MisfirePolicy::CatchUp {
            window: Duration::from_secs(3600),
        },
    ];

    #[test]
    fn five_minutes_down_under_each_policy() {
        let s = every_minute();
        // Handled 10:00, then down until 10:05:00.2.
        let now = at(10, 5, 0) + ms(200);
        let due = |policy| due_occurrences(&s, Some(at(10, 0, 0)), now, policy);
        assert_eq!(due(MisfirePolicy::Skip), [at(10, 5, 0)]);
        assert_eq!(due(MisfirePolicy::FireOnce), [at(10, 4, 0), at(10, 5, 0)]);
        let window = Duration::from_secs(150);
        assert_eq!(
            due(MisfirePolicy::CatchUp { window }),
            [at(10, 3, 0), at(10, 4, 0), at(10, 5, 0)]
        );
        // At start-up nothing counts as missed.
        let at_start_up = due_occurrences(&s, None, now, MisfirePolicy::FireOnce);
        assert_eq!(at_start_up, [at(10, 5, 0)]);
    }

    #[test]
    fn a_grace_as_wide_as_the_jitter_keeps_a_jittered_start_on_time() {
        let noon = Schedule::new("0 12 * * *", "UTC").unwrap();
        let occurrence = at(12, 0, 0);
        let now = occurrence + TimeDelta::seconds(4); // woke after a 4 s jitter
        let due = |grace| due_occurrences_with_grace(&noon, None, now, MisfirePolicy::Skip, grace);
        assert_eq!(due(Duration::from_secs(5)), [occurrence]);
        assert!(due(Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn steady_state_fires_the_current_occurrence_under_every_policy() {
        let s = every_minute();
        for policy in ALL {
            let due = due_occurrences(&s, Some(at(10, 0, 0)), at(10, 1, 0) + ms(3), policy);
            assert_eq!(due, [at(10, 1, 0)], "{policy:?}");
            // Exactly on the nominal instant.
            let due = due_occurrences(&s, Some(at(10, 0, 0)), at(10, 1, 0), policy);
            assert_eq!(due, [at(10, 1, 0)], "{policy:?}");
            // Before the occurrence: nothing yet.
            let due = due_occurrences(&s, Some(at(10, 0, 0)), at(10, 1, 0) - ms(1), policy);
            assert!(due.is_empty(), "{policy:?}");
        }
    }

    #[test]
    fn grace_boundary_is_inclusive() {
        let s = every_minute();
        let last = Some(at(10, 0, 0));
        let on_edge = at(10, 1, 0) + TimeDelta::seconds(1);
        assert_eq!(
            due_occurrences(&s, last, on_edge, MisfirePolicy::Skip),
            [at(10, 1, 0)]
        );
        let past_edge = on_edge + TimeDelta::nanoseconds(1);
        assert!(due_occurrences(&s, last, past_edge, MisfirePolicy::Skip).is_empty());
        // FireOnce still runs it, now as a missed occurrence.
        assert_eq!(
            due_occurrences(&s, last, past_edge, MisfirePolicy::FireOnce),
            [at(10, 1, 0)]
        );
    }

    #[test]
    fn zero_grace_only_counts_exactly_now() {
        let s = every_minute();
        let grace = Duration::ZERO;
        let last = Some(at(10, 0, 0));
        let due = |now| due_occurrences_with_grace(&s, last, now, MisfirePolicy::Skip, grace);
        assert_eq!(due(at(10, 1, 0)), [at(10, 1, 0)]);
        assert!(due(at(10, 1, 0) + TimeDelta::nanoseconds(1)).is_empty());
    }

    #[test]
    fn skip_drops_missed_occurrences() {
        let s = every_minute();
        let now = at(10, 30, 0) + ms(500);
        let due = due_occurrences(&s, Some(at(10, 0, 0)), now, MisfirePolicy::Skip);
        assert_eq!(due, [at(10, 30, 0)]);
        let between_occurrences = at(10, 30, 30);
        assert!(
            due_occurrences(
                &s,
                Some(at(10, 0, 0)),
                between_occurrences,
                MisfirePolicy::Skip
            )
            .is_empty()
        );
    }

    #[test]
    fn fire_once_runs_only_the_latest_missed() {
        let s = every_minute();
        let now = at(10, 30, 30);
        let due = due_occurrences(&s, Some(at(10, 0, 0)), now, MisfirePolicy::FireOnce);
        assert_eq!(due, [at(10, 30, 0)]);
        // The latest missed one plus the on-time one.
        let now = at(10, 31, 0) + ms(10);
        let due = due_occurrences(&s, Some(at(10, 0, 0)), now, MisfirePolicy::FireOnce);
        assert_eq!(due, [at(10, 30, 0), at(10, 31, 0)]);
    }

    #[test]
    fn fire_once_does_not_repeat_what_was_seen() {
        let s = every_minute();
        let now = at(10, 30, 30);
        let due = due_occurrences(&s, Some(at(10, 30, 0)), now, MisfirePolicy::FireOnce);
        assert!(due.is_empty());
        // `last_seen` may be any instant, such as the previous call's `now`.
        let due = due_occurrences(&s, Some(at(10, 30, 10)), now, MisfirePolicy::FireOnce);
        assert!(due.is_empty());
    }

    #[test]
    fn catch_up_runs_the_window_oldest_first() {
        let s = every_minute();
        let now = at(10, 10, 0) + ms(200);
        let window = Duration::from_secs(180);
        let policy = MisfirePolicy::CatchUp { window };
        let due = due_occurrences(&s, Some(at(10, 0, 0)), now, policy);
        // now - window = 10:07:00.2, so 10:07 is 180.2 s old: outside.
        assert_eq!(due, [at(10, 8, 0), at(10, 9, 0), at(10, 10, 0)]);
        // Window boundary is inclusive.
        let now = at(10, 10, 0);
        let due = due_occurrences(&s, Some(at(10, 0, 0)), now, policy);
        assert_eq!(
            due,
            [at(10, 7, 0), at(10, 8, 0), at(10, 9, 0), at(10, 10, 0)]
        );
        // The window never reaches before last_seen.
        let due = due_occurrences(&s, Some(at(10, 8, 30)), now, policy);
        assert_eq!(due, [at(10, 9, 0), at(10, 10, 0)]);
    }

    #[test]
    fn catch_up_is_capped_and_continues() {
        let s = Schedule::new("* * * * * *", "UTC").unwrap();
        let policy = MisfirePolicy::CatchUp {
            window: Duration::from_secs(3600),
        };
        let now = at(11, 0, 0);
        let first = due_occurrences(&s, Some(at(9, 0, 0)), now, policy);
        assert_eq!(first.len(), MAX_DUE);
        assert_eq!(first[0], at(10, 0, 0));
        assert!(first.windows(2).all(|w| w[0] < w[1]));
        let last = first[MAX_DUE - 1];
        assert_eq!(last, at(10, 1, 39));
        let second = due_occurrences(&s, Some(last), now, policy);
        assert_eq!(second[0], at(10, 1, 40));
    }

    #[test]
    fn start_up_counts_nothing_as_missed() {
        let s = every_minute();
        for policy in ALL {
            assert_eq!(
                due_occurrences(&s, None, at(10, 0, 0) + ms(5), policy),
                [at(10, 0, 0)],
                "{policy:?}"
            );
            assert!(
                due_occurrences(&s, None, at(10, 0, 30), policy).is_empty(),
                "{policy:?}"
            );
        }
    }

    #[test]
    fn clock_going_back_yields_nothing() {
        let s = every_minute();
        for policy in ALL {
            let due = due_occurrences(&s, Some(at(10, 5, 0)), at(10, 0, 0), policy);
            assert!(due.is_empty(), "{policy:?}");
        }
    }

    #[test]
    fn extreme_durations_and_instants_do_not_panic() {
        let s = every_minute();
        let huge = MisfirePolicy::CatchUp {
            window: Duration::MAX,
        };
        let due = due_occurrences_with_grace(&s, None, at(10, 0, 0), huge, Duration::MAX);
        assert_eq!(due.len(), MAX_DUE);
        for instant in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
            for policy in ALL {
                let _ = due_occurrences(&s, Some(instant), instant, policy);
                let _ = due_occurrences(&s, None, instant, policy);
            }
        }
    }
}
