//! Checks of job names and job options, shared by `build()` and the control calls, each error
//! naming the fix. The rules match what `#[scheduled]` checks at compile time.

use crate::error::Error;
use crate::job::{Delivery, Job, MAX_ATTEMPTS, MAX_BACKOFF, MIN_RUN_LEASE};

/// The longest job name accepted, in bytes: the lock name `sched:<name>` must stay within
/// dlock-core's 512 bytes (`dlock_core::MAX_NAME_LEN`). Same limit as `#[scheduled]`.
pub(crate) const MAX_JOB_NAME_LEN: usize = 500;

/// The prefix of the hidden jobs that run one-off jobs: `once:<handler>` (see `once_loop.rs`).
pub(crate) const ONE_OFF_PREFIX: &str = "once:";

/// Checks that a job with a schedule (in code, or a run-time schedule) does not take a name
/// reserved for the hidden jobs of one-off jobs: its runs and theirs would share keys.
pub(crate) fn not_reserved(name: &str) -> Result<(), Error> {
    if let Some(handler) = name.strip_prefix(ONE_OFF_PREFIX) {
        return Err(Error::invalid_job(format!(
            "the job name {name:?} starts with `{ONE_OFF_PREFIX}`, which is reserved: the one-off \
             jobs of handler `{handler}` are runs of a hidden job of that name, and would share \
             its ledger and locks; rename the job (e.g. `once-{handler}`)"
        )));
    }
    Ok(())
}

/// Checks a job name: not empty, at most [`MAX_JOB_NAME_LEN`] bytes, no braces (they delimit
/// the Redis Cluster hash tag) and no control characters.
pub(crate) fn job_name(name: &str) -> Result<(), Error> {
    checked_name(
        "job",
        name,
        "name the job, e.g. \"lottery\" (its key in Redis: keep it stable)",
    )
}

/// Checks a job group's name by the rules of job names ([`job_name`]): its semaphore
/// `sched-group:<name>` is 12 bytes longer than the name, within dlock-core's 512 bytes too.
pub(crate) fn group_name(name: &str) -> Result<(), Error> {
    checked_name(
        "group",
        name,
        "name the group, e.g. \"db-maintenance\" (its key in Redis: the same on every replica)",
    )
}

/// Checks a handler's name (the rules of job names: it is stored with schedules and one-off
/// jobs) and its options (those `build()` checks of a job, but the schedule's).
pub(crate) fn handler_name(name: &str) -> Result<(), Error> {
    checked_name(
        "handler",
        name,
        "name the handler, e.g. \"send_report\" (schedules and one-off jobs name it)",
    )
}

/// Checks a registered handler: its name ([`handler_name`]) and options.
pub(crate) fn handler(handler: &crate::handler::RegisteredHandler) -> Result<(), Error> {
    handler_name(&handler.name)?;
    let options = &handler.options;
    let bad = if options.lease < MIN_RUN_LEASE {
        format!(
            "the run lease {:?} is shorter than {MIN_RUN_LEASE:?}; lengthen it",
            options.lease
        )
    } else if let Some(max_run) = options.max_run
        && max_run <= options.lease
    {
        format!(
            "max_run {max_run:?} is not longer than the lease {:?}, so the lease would never be \
             renewed; remove max_run or shorten the lease",
            options.lease
        )
    } else {
        return Ok(());
    };
    Err(Error::invalid_job(format!(
        "handler `{}`: {bad}",
        handler.name
    )))
}

/// The rules of job, group and handler names; `what` names which, `example` says how to name one.
fn checked_name(what: &str, name: &str, example: &str) -> Result<(), Error> {
    let problem = if name.is_empty() {
        format!("is empty; {example}")
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
        "the {what} name {shown:?} {problem}"
    )))
}

/// Checks what `build()` checks of one job, but the lock options (dlock-core checks those).
pub(crate) fn job(job: &Job) -> Result<(), Error> {
    job_name(&job.name)?;
    // Only the hidden job of a handler's one-off jobs has no schedule, and takes the name.
    if job.schedule.is_some() {
        not_reserved(&job.name)?;
    }
    if job.lease < MIN_RUN_LEASE {
        return Err(Error::invalid_job(format!(
            "job `{}`: the run lease {:?} is shorter than {MIN_RUN_LEASE:?}; the watchdog renews \
             it every third, so lengthen it (a crashed run frees the job after at most the lease)",
            job.name, job.lease
        )));
    }
    if !job.jitter.is_zero()
        && let Some(schedule) = &job.schedule
        && let Some(interval) = schedule.shortest_interval()
        && job.jitter >= interval
    {
        return Err(Error::invalid_job(format!(
            "job `{}`: jitter {:?} must be shorter than the shortest interval of its schedule \
             `{}` ({interval:?}), or an occurrence could start after the next one; shorten the \
             jitter",
            job.name,
            job.jitter,
            schedule.cron()
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
    if let Delivery::AtLeastOnce { attempts, backoff } = job.delivery {
        if !(1..=MAX_ATTEMPTS).contains(&attempts) {
            return Err(Error::invalid_job(format!(
                "job `{}`: {attempts} attempts; at-least-once delivery takes 1 to {MAX_ATTEMPTS} \
                 attempts in all (the first included)",
                job.name
            )));
        }
        if backoff > MAX_BACKOFF {
            return Err(Error::invalid_job(format!(
                "job `{}`: a retry backoff of {backoff:?} is longer than {MAX_BACKOFF:?}; shorten \
                 it (it doubles from attempt to attempt up to that bound)",
                job.name
            )));
        }
    }
    Ok(())
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
        // Valid for the control calls (the hidden job of `report`'s one-off jobs), reserved for
        // jobs with a schedule.
        assert!(job_name("once:report").is_ok());
        let reserved = not_reserved("once:report").unwrap_err().to_string();
        assert!(
            reserved.contains("reserved") && reserved.contains("once-report"),
            "{reserved}"
        );
        assert!(not_reserved("once-report").is_ok());
        assert!(
            job_name("a\nb")
                .unwrap_err()
                .to_string()
                .contains("control")
        );
    }

    #[test]
    fn group_names_follow_the_rules_of_job_names() {
        assert!(group_name("db-maintenance").is_ok());
        assert!(group_name(&"x".repeat(MAX_JOB_NAME_LEN)).is_ok());
        let empty = group_name("").unwrap_err().to_string();
        assert!(
            empty.contains("group name") && empty.contains("db-maintenance"),
            "{empty}"
        );
        assert!(
            group_name("a{b}")
                .unwrap_err()
                .to_string()
                .contains("braces")
        );
        assert!(group_name(&"x".repeat(501)).is_err());
    }
}
