//! Checks of job names and job options, shared by `build()` and the control calls, each error
//! naming the fix. The rules match what `#[scheduled]` checks at compile time.

use std::time::Duration;

use chrono::Utc;
use dlock_cron::Schedule;

use crate::error::Error;
use crate::job::{Job, MIN_RUN_LEASE};

/// The longest job name accepted, in bytes: the lock name `sched:<name>` must stay within
/// dlock-core's 512 bytes (`dlock_core::MAX_NAME_LEN`). Same limit as `#[scheduled]`.
pub(crate) const MAX_JOB_NAME_LEN: usize = 500;

/// How far ahead the shortest interval of a schedule is looked for: 10,000 occurrences (a
/// dense schedule shows its shortest gap within them) or 5 years (a sparse one repeats within
/// them, leap days included), whichever comes first.
const INTERVAL_SCAN: usize = 10_000;
const INTERVAL_SCAN_YEARS: i64 = 5;

/// Checks a job name: not empty, at most [`MAX_JOB_NAME_LEN`] bytes, no braces (they delimit
/// the Redis Cluster hash tag) and no control characters.
pub(crate) fn job_name(name: &str) -> Result<(), Error> {
    let problem = if name.is_empty() {
        "is empty; name the job, e.g. \"lottery\" (its key in Redis: keep it stable)".to_owned()
    } else if name.len() > MAX_JOB_NAME_LEN {
        format!(
            "is {} bytes long; the limit is {MAX_JOB_NAME_LEN} bytes",
            name.len()
        )
    } else if let Some(c) = name.chars().find(|c| matches!(c, '{' | '}')) {
        format!(
            "contains `{c}`; braces are reserved for the Redis Cluster hash tag, use another \
             character such as `:` or `-`"
        )
    } else if let Some(c) = name.chars().find(|c| c.is_control()) {
        format!("contains the control character {c:?}; use printable characters")
    } else {
        return Ok(());
    };
    let shown: String = name.chars().take(40).collect();
    Err(Error::invalid_job(format!(
        "the job name {shown:?} {problem}"
    )))
}

/// Checks what `build()` checks of one job, but the lock options (dlock-core checks those).
pub(crate) fn job(job: &Job) -> Result<(), Error> {
    job_name(&job.name)?;
    if job.lease < MIN_RUN_LEASE {
        return Err(Error::invalid_job(format!(
            "job `{}`: the run lease {:?} is shorter than {MIN_RUN_LEASE:?}; the watchdog renews \
             it every third, so lengthen it (a crashed run frees the job after at most the lease)",
            job.name, job.lease
        )));
    }
    if !job.jitter.is_zero()
        && let Some(interval) = shortest_interval(&job.schedule)
        && job.jitter >= interval
    {
        return Err(Error::invalid_job(format!(
            "job `{}`: jitter {:?} must be shorter than the shortest interval of its schedule \
             `{}` ({interval:?}), or an occurrence could start after the next one; shorten the \
             jitter",
            job.name,
            job.jitter,
            job.schedule.cron()
        )));
    }
    if let Some(max_run) = job.max_run
        && max_run <= job.lease
    {
        return Err(Error::invalid_job(format!(
            "job `{}`: max_run {max_run:?} is not longer than the lease {:?}, so the lease would \
             never be renewed; remove max_run or shorten the lease",
            job.name, job.lease
        )));
    }
    Ok(())
}

/// The shortest time between two consecutive occurrences of `schedule`, looked for over the
/// next 10,000 occurrences or 5 years; `None` if it fires less than twice in that span.
pub(crate) fn shortest_interval(schedule: &Schedule) -> Option<Duration> {
    let from = Utc::now();
    let to = from.checked_add_signed(chrono::TimeDelta::days(366 * INTERVAL_SCAN_YEARS))?;
    let mut previous: Option<chrono::DateTime<Utc>> = None;
    let mut shortest: Option<Duration> = None;
    for occurrence in schedule.occurrences_between(from, to).take(INTERVAL_SCAN) {
        if let Some(previous) = previous
            && let Ok(gap) = (occurrence - previous).to_std()
        {
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        }
        previous = Some(occurrence);
    }
    shortest
}

/// Checks a replica id: 1 to 128 printable characters.
pub(crate) fn replica_id(id: &str) -> Result<(), Error> {
    if id.is_empty() || id.chars().any(char::is_control) || id.len() > 128 {
        return Err(Error::invalid_job(format!(
            "replica id {id:?} must be 1 to 128 printable characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_checked_with_the_fix_in_the_message() {
        assert!(job_name("lottery").is_ok());
        assert!(job_name(&"x".repeat(MAX_JOB_NAME_LEN)).is_ok());
        let empty = job_name("").unwrap_err().to_string();
        assert!(
            empty.contains("empty") && empty.contains("lottery"),
            "{empty}"
        );
        assert!(
            job_name(&"x".repeat(501))
                .unwrap_err()
                .to_string()
                .contains("500 bytes")
        );
        assert!(job_name("a{b}").unwrap_err().to_string().contains("braces"));
        assert!(
            job_name("a\nb")
                .unwrap_err()
                .to_string()
                .contains("control")
        );
    }

    #[test]
    fn shortest_intervals() {
        let interval = |cron| shortest_interval(&Schedule::new(cron, "UTC").unwrap());
        assert_eq!(interval("* * * * * *"), Some(Duration::from_secs(1)));
        assert_eq!(interval("*/10 * * * * *"), Some(Duration::from_secs(10)));
        assert_eq!(interval("0 12 * * *"), Some(Duration::from_secs(24 * 3600)));
        // Twice an hour, unevenly: the shorter gap counts.
        assert_eq!(interval("0,10 * * * *"), Some(Duration::from_secs(600)));
        // A short gap only once a year is still found.
        assert_eq!(interval("0,1 0 1 1 *"), Some(Duration::from_secs(60)));
    }
}
