//! `dlock schedule add|remove|list`: run-time schedules from the command line, with the checks
//! of the scheduler's API (`Scheduler::add_schedule_json`: the handler must be registered on a
//! live replica; the name, cron expression, zone and arguments are checked as
//! `Scheduler::add_schedule` checks them).

use dlock_scheduler::{RuntimeSchedule, Scheduler};
use serde::Serialize;

use crate::failure::{Exit, Failure};
use crate::report::Report;
use crate::table::{Table, json_time, utc};

/// A run-time schedule in `dlock schedule list --json`.
#[derive(Debug, Serialize)]
struct ScheduleJson {
    name: String,
    handler: String,
    cron: String,
    time_zone: String,
    /// Its JSON arguments (`null`: none).
    args: Option<serde_json::Value>,
    /// When it was added or last changed (RFC 3339, UTC).
    added_at: String,
}

impl ScheduleJson {
    fn of(s: &RuntimeSchedule) -> Self {
        Self {
            name: s.name.clone(),
            handler: s.handler.clone(),
            cron: s.cron.clone(),
            time_zone: s.time_zone.clone(),
            args: s.args.as_deref().and_then(|a| serde_json::from_str(a).ok()),
            added_at: json_time(utc(s.added_at)),
        }
    }
}

/// What `dlock schedule add|remove` did, in JSON.
#[derive(Debug, Serialize)]
struct Changed<'a> {
    name: &'a str,
    action: &'static str,
    /// `remove`: whether there was such a schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<bool>,
    /// `add`: the live replicas that registered its handler (they run it).
    #[serde(skip_serializing_if = "Option::is_none")]
    replicas: Option<Vec<String>>,
}

/// What `dlock schedule add` is given.
#[derive(Debug)]
pub(crate) struct NewSchedule<'a> {
    pub(crate) name: &'a str,
    pub(crate) handler: &'a str,
    pub(crate) cron: &'a str,
    pub(crate) tz: &'a str,
    pub(crate) args: Option<&'a str>,
}

/// `dlock schedule add NAME --handler H --cron C --tz Z [--args JSON]`.
///
/// # Errors
/// What the API refuses (usage: a bad name, cron expression, zone or arguments, a handler no
/// live replica registered); Redis unreachable, erring or refusing (ACL).
pub(crate) async fn add(
    admin: &Scheduler,
    new: &NewSchedule<'_>,
    json: bool,
) -> Result<Report, Failure> {
    let NewSchedule {
        name,
        handler,
        cron,
        tz,
        args,
    } = *new;
    admin
        .add_schedule_json(name, handler, cron, tz, args)
        .await?;
    let replicas: Vec<String> = admin
        .replicas()
        .await?
        .into_iter()
        .filter(|r| r.handlers.iter().any(|h| h == handler))
        .map(|r| r.id)
        .collect();
    if json {
        return Report::json(&Changed {
            name,
            action: "add",
            removed: None,
            replicas: Some(replicas),
        });
    }
    Ok(Report::new(format!(
        "added schedule `{name}`: handler `{handler}` runs at `{cron}` in {tz}; the replicas \
         with the handler ({}) take it up within a heartbeat\n",
        replicas.join(", ")
    )))
}

/// `dlock schedule remove NAME`: exit 3 when there was none.
///
/// # Errors
/// A bad name (usage); Redis unreachable, erring or refusing (ACL).
pub(crate) async fn remove(admin: &Scheduler, name: &str, json: bool) -> Result<Report, Failure> {
    let removed = admin.remove_schedule(name).await?;
    let report = if json {
        Report::json(&Changed {
            name,
            action: "remove",
            removed: Some(removed),
            replicas: None,
        })?
    } else if removed {
        Report::new(format!(
            "removed schedule `{name}`: no replica claims its occurrences from its next \
             heartbeat on (a run going on finishes; its ledger stays: `dlock runs {name}`)\n"
        ))
    } else {
        Report::new(String::new())
    };
    Ok(if removed {
        report
    } else {
        report
            .note(format!(
                "there is no run-time schedule `{name}` (see `dlock schedule list`)"
            ))
            .exit(Exit::NotFound)
    })
}

/// `dlock schedule list`: exit 3 when there is none.
///
/// # Errors
/// Redis unreachable or erring; a schedule this version cannot read.
pub(crate) async fn list(admin: &Scheduler, json: bool) -> Result<Report, Failure> {
    let schedules: Vec<ScheduleJson> = admin
        .schedules()
        .await?
        .iter()
        .map(ScheduleJson::of)
        .collect();
    let report = if json {
        #[derive(Serialize)]
        struct List<'a> {
            schedules: &'a [ScheduleJson],
        }
        Report::json(&List {
            schedules: &schedules,
        })?
    } else if schedules.is_empty() {
        Report::new(String::new())
    } else {
        let mut t = Table::new(&["NAME", "HANDLER", "CRON", "ZONE", "ARGS", "ADDED (UTC)"]);
        for s in &schedules {
            t.row(vec![
                s.name.clone(),
                s.handler.clone(),
                s.cron.clone(),
                s.time_zone.clone(),
                s.args
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), ToString::to_string),
                s.added_at.clone(),
            ]);
        }
        Report::new(t.render())
    };
    Ok(if schedules.is_empty() {
        report
            .note("no run-time schedule under this prefix (`dlock schedule add` adds one)")
            .exit(Exit::NotFound)
    } else {
        report
    })
}
