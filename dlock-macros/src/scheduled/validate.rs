//! Checking `#[scheduled]`'s options at compile time → a [`Plan`].
//!
//! * `cron` and `tz` go through `dlock_cron::Schedule::new`, the very function the scheduler
//!   calls at run time, so a schedule that compiles is exactly one the scheduler runs. Its
//!   message (what is wrong, and the fix) is reported on the offending string.
//! * `name` is checked like the lock name it becomes (`sched:<name>`): not empty, no braces
//!   (they delimit the hash tag) or control characters, at most [`MAX_JOB_NAME_LEN`] bytes.
//!   `group` (a job group's name, `sched-group:<group>`) by the same rules; whether the group
//!   is declared on the builder is `build()`'s to check, at run time.
//! * Durations use the strict grammar of `crate::duration`; `lease` must be a run lease the
//!   scheduler accepts (1s ..= 24h).
//!
//! Rejected combinations, each with the reason in its message (the scheduler checks the same
//! at `build()`):
//! * `jitter` not shorter than the schedule's shortest interval
//!   (`dlock_cron::Schedule::shortest_interval`): an occurrence could start after the next one.
//! * `max_run` not longer than the lease (the default lease when `lease` is not given): the
//!   watchdog would never renew, so `max_run` does nothing (as `max_hold` ≤ `ttl` in
//!   `#[distributed_lock]`).
//! * `backoff` without `attempts`: at-most-once runs are never retried, so it would do nothing.
//!
//! `attempts` (1 ..= [`MAX_ATTEMPTS`]) turns on at-least-once delivery
//! (`dlock_scheduler::Delivery::at_least_once`), with `backoff` (at most [`MAX_BACKOFF`];
//! [`DEFAULT_BACKOFF`] when not given).

use std::time::Duration;

use proc_macro2::Span;
use syn::{LitStr, Path};

use crate::args::Opt;
use crate::duration;
use crate::errors::{Checked, Errors};
use crate::limits::{MAX_TTL, MIN_WATCHDOG_TTL, above_max_ttl};
use crate::scheduled::args::ScheduledArgs;
use crate::validate::{Report, choice, crate_path, opt_duration};

/// The longest job name accepted, in bytes: the lock name `sched:<name>` must stay within
/// dlock-core's 512 bytes (`dlock_core::MAX_NAME_LEN`), with room to spare.
pub(crate) const MAX_JOB_NAME_LEN: usize = 500;

/// The lease of a run when `lease` is not given: `dlock_scheduler::DEFAULT_RUN_LEASE`
/// (duplicated because a proc-macro crate cannot depend on the crate it expands to;
/// `tests::default_lease_matches_dlock_scheduler` pins it).
pub(crate) const DEFAULT_RUN_LEASE: Duration = Duration::from_secs(5);

/// The shortest run lease the scheduler accepts: `dlock_scheduler::MIN_RUN_LEASE`.
pub(crate) const MIN_RUN_LEASE: Duration = Duration::from_secs(1);

/// The most attempts at-least-once delivery accepts: `dlock_scheduler::MAX_ATTEMPTS`.
pub(crate) const MAX_ATTEMPTS: u32 = 100;

/// The longest retry backoff: `dlock_scheduler::MAX_BACKOFF`.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The backoff when `attempts` is given without `backoff`.
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);

/// The time zone when `tz` is not given.
pub(crate) const DEFAULT_TZ: &str = "UTC";

/// A cron expression that is always valid, to check a time zone on its own.
const ANY_CRON: &str = "* * * * *";

/// `misfire = "…"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Misfire {
    Skip,
    FireOnce,
    CatchUp(Duration),
}

/// Everything the expansion needs, validated. Options left out stay `None`/`false`: the
/// expansion then calls no setter, and the scheduler's own default applies.
pub(crate) struct Plan {
    pub(crate) name: LitStr,
    pub(crate) cron: LitStr,
    /// `None`: the default, UTC.
    pub(crate) tz: Option<LitStr>,
    pub(crate) jitter: Option<Duration>,
    pub(crate) lease: Option<Duration>,
    pub(crate) max_run: Option<Duration>,
    /// `Some(true)` for `"allow"`.
    pub(crate) overlap_allow: Option<bool>,
    pub(crate) misfire: Option<Misfire>,
    /// `Some(true)` for `"signal"`.
    pub(crate) on_lost_signal: Option<bool>,
    /// At-least-once delivery: attempts in all and the backoff.
    pub(crate) delivery: Option<(u32, Duration)>,
    /// The job group the job joins.
    pub(crate) group: Option<LitStr>,
    pub(crate) krate: Path,
}

/// Validates `args`; `None` if anything was reported to `errors`.
pub(crate) fn validate(args: &ScheduledArgs, errors: &mut Errors) -> Option<Plan> {
    let mut report = Report {
        errors,
        failed: false,
    };
    let name = report.take(job_name(args));
    let (problems, parsed) = schedule(args);
    for (span, message) in problems {
        report.take::<()>(Err((span, message)));
    }
    let jitter = report.take(opt_duration(args.jitter.as_ref(), "jitter"));
    let lease = report.take(lease(args.lease.as_ref()));
    let max_run = report.take(max_run(args.max_run.as_ref()));
    let overlap_allow = report.take(given(args.overlap.as_ref(), |opt| {
        choice(Some(opt), "overlap", ["skip", "allow"])
    }));
    let misfire = report.take(given(args.misfire.as_ref(), misfire));
    let on_lost_signal = report.take(given(args.on_lost.as_ref(), |opt| {
        choice(Some(opt), "on_lost", ["cancel", "signal"])
    }));
    let delivery = report.take(delivery(args));
    let group = report.take(given(args.group.as_ref(), group));
    let krate = report.take(crate_path(
        args.krate.as_ref(),
        "dlock_scheduler",
        "my_scheduler",
    ));
    if let (Some(jitter), Some(lease), Some(max_run)) = (jitter, lease, max_run) {
        report.all(combinations(jitter, lease, max_run, parsed.as_ref(), args));
    }
    if report.failed {
        return None;
    }
    Some(Plan {
        name: name.flatten()?,
        cron: args.cron.as_ref()?.value.clone(),
        tz: args.tz.as_ref().map(|tz| tz.value.clone()),
        jitter: jitter?,
        lease: lease?,
        max_run: max_run?,
        overlap_allow: overlap_allow?,
        misfire: misfire?,
        on_lost_signal: on_lost_signal?,
        delivery: delivery?,
        group: group?,
        krate: krate?,
    })
}

/// `attempts` and `backoff`: at-least-once delivery, or `None` (at most once).
fn delivery(args: &ScheduledArgs) -> Checked<Option<(u32, Duration)>> {
    let backoff = opt_duration(args.backoff.as_ref(), "backoff")?;
    let Some(attempts) = &args.attempts else {
        return match (&args.backoff, backoff) {
            (Some(opt), Some(_)) => Err((
                opt.value.span(),
                "`backoff` only applies to at-least-once delivery: add `attempts = N` (attempts \
                 in all, the first included), or remove `backoff` (runs are at most once by \
                 default and never retried)"
                    .to_owned(),
            )),
            _ => Ok(None),
        };
    };
    let lit = &attempts.value;
    let n = match lit.base10_parse::<u32>() {
        Ok(n) if (1..=MAX_ATTEMPTS).contains(&n) => n,
        _ => {
            return Err((
                lit.span(),
                format!(
                    "`attempts = {lit}` is out of range: give 1 to {MAX_ATTEMPTS} attempts in all, \
                     the first included (`attempts = 3` retries a failed run twice)"
                ),
            ));
        }
    };
    let backoff = backoff.unwrap_or(DEFAULT_BACKOFF);
    if let Some(opt) = &args.backoff
        && backoff > MAX_BACKOFF
    {
        return Err((
            opt.value.span(),
            format!(
                "`backoff = {:?}` is longer than the longest retry backoff, 1h; shorten it (it \
                 doubles from attempt to attempt up to that bound)",
                opt.value.value()
            ),
        ));
    }
    Ok(Some((n, backoff)))
}

/// `check` applied to the option if it was given.
fn given<T>(
    opt: Option<&Opt<LitStr>>,
    check: impl FnOnce(&Opt<LitStr>) -> Checked<T>,
) -> Checked<Option<T>> {
    opt.map(check).transpose()
}

/// The job's name; `Ok(None)` when `name` was written with a value that is not a string
/// literal (already reported by `args`: it is not missing too).
fn job_name(args: &ScheduledArgs) -> Checked<Option<LitStr>> {
    let Some(opt) = &args.name else {
        if args.given.contains("name") {
            return Ok(None);
        }
        return Err((
            Span::call_site(),
            "missing `name`: name the job, e.g. `#[scheduled(name = \"lottery\", cron = \"0 12 * \
             * *\")]`; the name is its key in Redis, so keep it stable when you rename the function"
                .to_owned(),
        ));
    };
    let lit = &opt.value;
    let problem = name_problem(
        &lit.value(),
        "name",
        "job",
        "name the job, e.g. `name = \"lottery\"`",
    );
    match problem {
        Some(message) => Err((lit.span(), message)),
        None => Ok(Some(lit.clone())),
    }
}

/// `group`: a job group's name, by the rules of job names (its semaphore is
/// `sched-group:<group>`, within dlock-core's name limit as `sched:<name>` is).
fn group(opt: &Opt<LitStr>) -> Checked<LitStr> {
    let lit = &opt.value;
    let example = "name the group, e.g. `group = \"db-maintenance\"` (declared on the scheduler \
                   builder with `.group(\"db-maintenance\", max)`), or remove `group`";
    match name_problem(&lit.value(), "group", "group", example) {
        Some(message) => Err((lit.span(), message)),
        None => Ok(lit.clone()),
    }
}

/// What is wrong with the job or group name `name`, given as `option = "…"`; `what` says
/// which kind of name it is, `example` how to write one.
fn name_problem(name: &str, option: &str, what: &str, example: &str) -> Option<String> {
    let at = format!("`{option} = {name:?}`");
    if name.is_empty() {
        Some(format!("an empty {what} name; {example}"))
    } else if let Some(c) = name.chars().find(|c| matches!(c, '{' | '}')) {
        Some(format!(
            "`{c}` in {at}: braces are reserved in lock names (they delimit the hash tag); use \
             another character such as `:` or `-`"
        ))
    } else if let Some(c) = name.chars().find(|c| c.is_control()) {
        Some(format!(
            "the control character {c:?} in {at} cannot be part of a {what} name; use printable \
             characters"
        ))
    } else if name.len() > MAX_JOB_NAME_LEN {
        Some(format!(
            "the {what} name is {} bytes long; the limit is {MAX_JOB_NAME_LEN} bytes",
            name.len()
        ))
    } else {
        None
    }
}

/// `cron` and `tz` through `dlock_cron::Schedule::new`, exactly as the scheduler parses them.
/// When the cron expression is refused, the time zone is checked too (with a valid expression),
/// so that both mistakes show at once.
/// Checks `cron` and `tz`: the problems, and the schedule when there are none.
fn schedule(args: &ScheduledArgs) -> (Vec<(Span, String)>, Option<dlock_cron::Schedule>) {
    let tz = args.tz.as_ref();
    let tz_text = tz.map_or_else(|| DEFAULT_TZ.to_owned(), |tz| tz.value.value());
    let tz_span = tz.map_or_else(Span::call_site, |tz| tz.value.span());
    let mut found = Vec::new();
    let Some(cron) = &args.cron else {
        // Written with a value that is not a string: already reported by `args`.
        if !args.given.contains("cron") {
            found.push((
                Span::call_site(),
                "missing `cron`: give the schedule, e.g. `cron = \"0 12 * * *\"` (minute hour \
                 day-of-month month day-of-week; 6 fields with seconds first)"
                    .to_owned(),
            ));
        }
        if let Err(e) = dlock_cron::Schedule::new(ANY_CRON, &tz_text) {
            found.push((tz_span, e.to_string()));
        }
        return (found, None);
    };
    let cron_text = cron.value.value();
    match dlock_cron::Schedule::new(&cron_text, &tz_text) {
        Ok(schedule) => return (found, Some(schedule)),
        Err(e) if e.is_time_zone() => found.push((tz_span, e.to_string())),
        Err(e) => {
            found.push((cron.value.span(), e.to_string()));
            if let Err(e) = dlock_cron::Schedule::new(ANY_CRON, &tz_text) {
                found.push((tz_span, e.to_string()));
            }
        }
    }
    (found, None)
}

fn lease(opt: Option<&Opt<LitStr>>) -> Checked<Option<Duration>> {
    let lease = opt_duration(opt, "lease")?;
    if let (Some(lease), Some(opt)) = (lease, opt) {
        let text = opt.value.value();
        if lease < MIN_RUN_LEASE {
            return Err((
                opt.value.span(),
                format!(
                    "`lease = {text:?}` is below the shortest run lease, 1s \
                     (dlock_scheduler::MIN_RUN_LEASE): the watchdog renews it every third while \
                     the run lasts, so a short lease costs renewals and gains little (a crashed \
                     run frees the job after at most the lease)"
                ),
            ));
        }
        if lease > MAX_TTL {
            return Err((opt.value.span(), above_max_ttl("lease", &text)));
        }
    }
    Ok(lease)
}

fn max_run(opt: Option<&Opt<LitStr>>) -> Checked<Option<Duration>> {
    let max_run = opt_duration(opt, "max_run")?;
    if let (Some(max_run), Some(opt)) = (max_run, opt)
        && max_run < MIN_WATCHDOG_TTL
    {
        return Err((
            opt.value.span(),
            format!(
                "`max_run = {:?}` is below the shortest lease the watchdog can keep, 100ms",
                opt.value.value()
            ),
        ));
    }
    Ok(max_run)
}

/// `"skip"`, `"fire_once"` or `"catch_up(<window>)"`.
fn misfire(opt: &Opt<LitStr>) -> Checked<Misfire> {
    let text = opt.value.value();
    let span = opt.value.span();
    let usage = "use `misfire = \"fire_once\"` (the default: the latest missed occurrence runs \
                 once), `\"skip\"` (missed occurrences are dropped) or `\"catch_up(<window>)\"` \
                 (every missed occurrence up to that old runs), e.g. `\"catch_up(1h)\"`";
    match text.as_str() {
        "skip" => return Ok(Misfire::Skip),
        "fire_once" => return Ok(Misfire::FireOnce),
        "catch_up" => {
            return Err((
                span,
                "`misfire = \"catch_up\"` needs a window: how old a missed occurrence may be and \
                 still run, e.g. `misfire = \"catch_up(1h)\"`"
                    .to_owned(),
            ));
        }
        _ => {}
    }
    match text
        .strip_prefix("catch_up(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(window) => duration::parse(window)
            .map(Misfire::CatchUp)
            .map_err(|e| (span, e.message("misfire", &text))),
        None => Err((
            span,
            format!("unknown value {text:?} for `misfire`; {usage}"),
        )),
    }
}

/// The checks across options (see the module docs).
fn combinations(
    jitter: Option<Duration>,
    lease: Option<Duration>,
    max_run: Option<Duration>,
    schedule: Option<&dlock_cron::Schedule>,
    args: &ScheduledArgs,
) -> Vec<(Span, String)> {
    let mut found = Vec::new();
    let (lease, lease_text) = match (lease, &args.lease) {
        (Some(lease), Some(opt)) => (lease, format!("`lease = {:?}`", opt.value.value())),
        _ => (
            DEFAULT_RUN_LEASE,
            "the default lease (5s; set another with `lease`)".to_owned(),
        ),
    };
    if let (Some(jitter), Some(opt), Some(schedule)) = (jitter, &args.jitter, schedule)
        && let Some(interval) = schedule.shortest_interval()
        && jitter >= interval
    {
        found.push((
            opt.value.span(),
            format!(
                "`jitter = {:?}` must be shorter than the shortest interval of the schedule \
                 `{}` ({interval:?}): an occurrence could start after the next one; shorten \
                 `jitter`",
                opt.value.value(),
                schedule.cron(),
            ),
        ));
    }
    if let (Some(max_run), Some(opt)) = (max_run, &args.max_run)
        && max_run <= lease
    {
        found.push((
            opt.value.span(),
            format!(
                "`max_run = {:?}` is not longer than {lease_text}: the lease would never be \
                 renewed, so `max_run` does nothing; remove it or shorten `lease`",
                opt.value.value()
            ),
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse;
    use proc_macro2::TokenStream;
    use quote::quote;

    fn check(tokens: TokenStream) -> Result<Plan, String> {
        let mut errors = Errors::default();
        let args: ScheduledArgs = parse(tokens, &mut errors);
        let plan = validate(&args, &mut errors);
        match errors.into_compile_errors() {
            None => plan.ok_or_else(|| "no plan and no error".to_owned()),
            Some(e) => Err(e.to_string()),
        }
    }

    fn error(tokens: TokenStream) -> String {
        match check(tokens) {
            Ok(_) => String::from("accepted"),
            Err(e) => e,
        }
    }

    /// The constants duplicated from dlock-scheduler; it is a dev-dependency, so this compares.
    #[test]
    fn default_lease_matches_dlock_scheduler() {
        assert_eq!(DEFAULT_RUN_LEASE, dlock_scheduler::DEFAULT_RUN_LEASE);
        assert_eq!(MAX_ATTEMPTS, dlock_scheduler::MAX_ATTEMPTS);
        assert_eq!(MAX_BACKOFF, dlock_scheduler::MAX_BACKOFF);
        assert_eq!(duration::parse("5s"), Ok(DEFAULT_RUN_LEASE));
        assert_eq!(MIN_RUN_LEASE, dlock_scheduler::MIN_RUN_LEASE);
    }

    #[test]
    fn minimal_and_full() {
        let plan = check(quote!(name = "n", cron = "* * * * *")).unwrap_or_else(|e| panic!("{e}"));
        assert!(plan.tz.is_none() && plan.lease.is_none() && plan.misfire.is_none());
        let plan = check(quote!(
            name = "n",
            cron = "*/5 * * * * *",
            tz = "Europe/Berlin",
            jitter = "2s",
            lease = "1m",
            max_run = "1h",
            overlap = "allow",
            misfire = "catch_up(1h30m)",
            on_lost = "signal",
            crate = "crate::deps::sched",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            plan.misfire,
            Some(Misfire::CatchUp(Duration::from_secs(5400)))
        );
        assert_eq!(plan.overlap_allow, Some(true));
        assert_eq!(plan.on_lost_signal, Some(true));
        assert_eq!(plan.lease, Some(Duration::from_secs(60)));
    }

    #[test]
    fn schedule_errors_come_from_dlock_cron() {
        let e = error(quote!(name = "n", cron = "0 12 * *"));
        assert!(e.contains("has 4 fields"), "{e}");
        let e = error(quote!(name = "n", cron = "0 0 30 2 *"));
        let expected = dlock_cron::Schedule::new("0 0 30 2 *", "UTC")
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string());
        assert!(e.contains(&expected[..20]), "{e}");
        // Both mistakes at once.
        let e = error(quote!(name = "n", cron = "61 * * * *", tz = "Europe/Berln"));
        assert_eq!(e.matches("compile_error").count(), 2, "{e}");
        assert!(e.contains("Europe/Berlin"), "{e}");
        let e = error(quote!(name = "n", tz = "+02:00"));
        assert!(e.contains("missing `cron`"), "{e}");
        assert_eq!(e.matches("compile_error").count(), 2, "{e}");
    }

    #[test]
    fn names() {
        assert!(error(quote!(cron = "* * * * *")).contains("missing `name`"));
        assert!(error(quote!(name = "", cron = "* * * * *")).contains("empty job name"));
        assert!(error(quote!(name = "a{b", cron = "* * * * *")).contains("braces"));
        assert!(error(quote!(name = "a\tb", cron = "* * * * *")).contains("control character"));
        let long = "x".repeat(MAX_JOB_NAME_LEN);
        assert!(check(quote!(name = #long, cron = "* * * * *")).is_ok());
        let long = "x".repeat(MAX_JOB_NAME_LEN + 1);
        assert!(error(quote!(name = #long, cron = "* * * * *")).contains("the limit is 500"));
    }

    #[test]
    fn group_names_follow_the_rules_of_job_names() {
        let plan = check(quote!(
            name = "n",
            cron = "* * * * *",
            group = "db-maintenance"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            plan.group.map(|g| g.value()).as_deref(),
            Some("db-maintenance")
        );
        let e = error(quote!(name = "n", cron = "* * * * *", group = ""));
        assert!(
            e.contains("empty group name") && e.contains(".group("),
            "{e}"
        );
        let e = error(quote!(name = "n", cron = "* * * * *", group = "a}b"));
        assert!(e.contains("braces") && e.contains("`group = "), "{e}");
        let e = error(quote!(name = "n", cron = "* * * * *", group = "a\nb"));
        assert!(e.contains("part of a group name"), "{e}");
        let long = "x".repeat(MAX_JOB_NAME_LEN + 1);
        let e = error(quote!(name = "n", cron = "* * * * *", group = #long));
        assert!(e.contains("the group name is 501 bytes"), "{e}");
    }

    #[test]
    fn durations_and_combinations() {
        let e = error(quote!(name = "n", cron = "* * * * *", jitter = "2M"));
        assert!(e.contains("unknown duration unit `M`"), "{e}");
        // Every minute: a jitter of a minute or more could run an occurrence after the next.
        let e = error(quote!(name = "n", cron = "* * * * *", jitter = "60s"));
        assert!(e.contains("shortest interval of the schedule"), "{e}");
        assert!(check(quote!(name = "n", cron = "* * * * *", jitter = "59s999ms")).is_ok());
        // The documented example: a daily job with a 30 s jitter, whatever the lease.
        assert!(check(quote!(name = "n", cron = "0 12 * * *", jitter = "30s")).is_ok());
        let e = error(quote!(name = "n", cron = "* * * * *", lease = "500ms"));
        assert!(e.contains("below the shortest run lease, 1s"), "{e}");
        let e = error(quote!(name = "n", cron = "* * * * *", lease = "2d"));
        assert!(e.contains("above the longest lease"), "{e}");
        let e = error(quote!(name = "n", cron = "* * * * *", max_run = "5s"));
        assert!(e.contains("not longer than the default lease (5s"), "{e}");
        assert!(check(quote!(name = "n", cron = "* * * * *", max_run = "6s")).is_ok());
    }

    #[test]
    fn misfire_values() {
        let misfire = |text: &str| {
            let lit = LitStr::new(text, Span::call_site());
            super::misfire(&Opt {
                span: Span::call_site(),
                value: lit,
            })
            .map_err(|(_, message)| message)
        };
        assert_eq!(misfire("skip"), Ok(Misfire::Skip));
        assert_eq!(misfire("fire_once"), Ok(Misfire::FireOnce));
        assert_eq!(
            misfire("catch_up(10m)"),
            Ok(Misfire::CatchUp(Duration::from_secs(600)))
        );
        let e = misfire("catch_up").unwrap_err();
        assert!(e.contains("needs a window"), "{e}");
        let e = misfire("catch_up(10)").unwrap_err();
        assert!(
            e.contains("missing unit") && e.contains("catch_up(10)"),
            "{e}"
        );
        let e = misfire("catchup").unwrap_err();
        assert!(e.contains("unknown value \"catchup\" for `misfire`"), "{e}");
        let e = misfire("catch_up(1h").unwrap_err();
        assert!(e.contains("unknown value"), "{e}");
    }
}
