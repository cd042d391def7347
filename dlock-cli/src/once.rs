//! One-off jobs: the handlers section of `dlock jobs` and `dlock once [HANDLER]`, the pending
//! one-off jobs (what, when, with which idempotency key). One-off jobs have no time zone of
//! their own: their times are shown in UTC.

use dlock_scheduler::{OneOffHandler, PendingOneOff, Scheduler};
use serde::Serialize;

use crate::failure::{Exit, Failure};
use crate::report::Report;
use crate::table::{Table, human_time, json_time, utc};

/// A handler of one-off jobs, in `dlock jobs --json` (`one_off_handlers`) and `dlock once
/// --json` (`handlers`).
#[derive(Debug, Serialize)]
pub(crate) struct HandlerJson {
    /// The handler's name.
    name: String,
    /// Its hidden job, `once:<handler>`: what `pause`, `resume` and `runs` take.
    job: String,
    paused: bool,
    /// The live replicas that registered it (they run its one-off jobs).
    replicas: Vec<String>,
    /// Its one-off jobs waiting or running (its queue's length).
    queued: u64,
    /// When the first pending one is due (RFC 3339, UTC), `null` when none is pending.
    next_due: Option<String>,
    /// Its pending one-off jobs, due first (`dlock once` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pending: Option<Vec<PendingJson>>,
}

/// A pending one-off job.
#[derive(Debug, Serialize)]
struct PendingJson {
    /// `<handler>/<run id>`, as `run_at` returned it.
    id: String,
    run_id: String,
    /// When it is due (its next attempt, for a retry), RFC 3339, UTC.
    due: String,
    /// The attempt it waits for: 1 when it never ran.
    attempt: u32,
    /// The replica that enqueued it and when; `null` for a retry.
    enqueued_by: Option<String>,
    enqueued_at: Option<String>,
    /// Enqueued with an idempotency key (`run_at_keyed`).
    keyed: bool,
    /// The idempotency key, as given; `null` without one, or when a replica older than the
    /// key record enqueued it (`keyed` is true then).
    key: Option<String>,
    /// Its JSON arguments (`null`: unreadable as JSON, shown as text in `args_text`).
    args: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args_text: Option<String>,
}

impl PendingJson {
    fn of(p: &PendingOneOff) -> Self {
        let parsed = p
            .args
            .as_deref()
            .map(serde_json::from_str::<serde_json::Value>);
        let (args, args_text) = match parsed {
            Some(Ok(value)) => (Some(value), None),
            Some(Err(_)) => (None, p.args.clone()),
            None => (None, None),
        };
        Self {
            id: p.id.to_string(),
            run_id: p.id.run_id().to_owned(),
            due: json_time(p.due),
            attempt: p.attempt,
            enqueued_by: p.enqueued_by.clone(),
            enqueued_at: p.enqueued_at.map(|t| json_time(utc(t))),
            keyed: p.keyed,
            key: p.key.clone(),
            args,
            args_text,
        }
    }
}

/// How many pending one-off jobs `dlock jobs` reads per handler for its NEXT DUE column.
const FIRST: usize = 1;

/// The handlers of one-off jobs, with the first pending one's due time, for `dlock jobs`.
///
/// # Errors
/// Redis unreachable or erring.
pub(crate) async fn handlers(admin: &Scheduler) -> Result<Vec<HandlerJson>, Failure> {
    let mut out = Vec::new();
    for h in admin.one_off_handlers().await? {
        let first = admin.pending_one_offs(&h.name, FIRST).await?;
        out.push(HandlerJson::of(h, &first, false));
    }
    Ok(out)
}

impl HandlerJson {
    fn of(h: OneOffHandler, pending: &[PendingOneOff], list: bool) -> Self {
        Self {
            next_due: pending.iter().map(|p| p.due).min().map(json_time),
            pending: list.then(|| pending.iter().map(PendingJson::of).collect()),
            name: h.name,
            job: h.job,
            paused: h.paused,
            replicas: h.replicas,
            queued: h.queued,
        }
    }

    /// The row of the handlers table in `dlock jobs`.
    pub(crate) fn row(&self) -> Vec<String> {
        vec![
            self.name.clone(),
            self.job.clone(),
            if self.paused { "yes" } else { "no" }.to_owned(),
            self.queued.to_string(),
            self.next_due
                .as_deref()
                .map_or_else(|| "none".into(), due_cell),
            if self.replicas.is_empty() {
                "none live".to_owned()
            } else {
                self.replicas.join(", ")
            },
        ]
    }

    /// The header of the handlers table.
    pub(crate) const HEADER: [&'static str; 6] = [
        "HANDLER",
        "JOB",
        "PAUSED",
        "QUEUED",
        "NEXT DUE (UTC)",
        "REPLICAS",
    ];
}

/// A JSON time again as a table cell (UTC, to the second).
fn due_cell(json: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(json).map_or_else(
        |_| json.to_owned(),
        |t| human_time(t.with_timezone(&chrono::Utc)),
    )
}

/// `dlock once [HANDLER] [--limit N]`: the pending one-off jobs of every handler the replicas
/// registered, or of `HANDLER` (whether or not a live replica has it), due first.
///
/// # Errors
/// A bad handler name (usage); Redis unreachable or erring.
pub(crate) async fn once(
    admin: &Scheduler,
    handler: Option<&str>,
    limit: usize,
    json: bool,
) -> Result<Report, Failure> {
    let known = admin.one_off_handlers().await?;
    if let Some(only) = handler {
        // Read even when no replica registered it: its jobs wait in Redis all the same.
        let pending = admin.pending_one_offs(only, limit).await?;
        let h = known.into_iter().find(|h| h.name == only);
        let name = only.to_owned();
        let row = match h {
            Some(h) => HandlerJson::of(h, &pending, true),
            None => HandlerJson {
                job: format!("once:{name}"),
                paused: admin.is_paused(&format!("once:{name}")).await?,
                name,
                replicas: Vec::new(),
                queued: u64::try_from(pending.len()).unwrap_or(u64::MAX),
                next_due: pending.iter().map(|p| p.due).min().map(json_time),
                pending: Some(pending.iter().map(PendingJson::of).collect()),
            },
        };
        return render(vec![row], json);
    }
    let mut rows = Vec::with_capacity(known.len());
    for h in known {
        let pending = admin.pending_one_offs(&h.name, limit).await?;
        rows.push(HandlerJson::of(h, &pending, true));
    }
    render(rows, json)
}

/// The KEY cell: the idempotency key with control characters escaped (a key is any text; a
/// newline must not break the table), `(not stored)` for a keyed job an older replica
/// enqueued, `-` without a key.
fn key_cell(p: &PendingJson) -> String {
    match (&p.key, p.keyed) {
        (Some(key), _) => {
            let mut cell = String::with_capacity(key.len());
            for c in key.chars() {
                if c.is_control() {
                    cell.extend(c.escape_default());
                } else {
                    cell.push(c);
                }
            }
            cell
        }
        (None, true) => "(not stored)".to_owned(),
        (None, false) => "-".to_owned(),
    }
}

/// The report of `dlock once`.
fn render(rows: Vec<HandlerJson>, json: bool) -> Result<Report, Failure> {
    let pending: usize = rows
        .iter()
        .map(|r| r.pending.as_ref().map_or(0, Vec::len))
        .sum();
    let mut report = if json {
        #[derive(Serialize)]
        struct Once<'a> {
            handlers: &'a [HandlerJson],
        }
        Report::json(&Once { handlers: &rows })?
    } else {
        let mut t = Table::new(&[
            "HANDLER",
            "ID",
            "DUE (UTC)",
            "ATTEMPT",
            "KEY",
            "ENQUEUED BY",
            "ARGS",
        ]);
        for row in &rows {
            for p in row.pending.iter().flatten() {
                t.row(vec![
                    row.name.clone(),
                    p.id.clone(),
                    due_cell(&p.due),
                    p.attempt.to_string(),
                    key_cell(p),
                    p.enqueued_by.clone().unwrap_or_else(|| "-".into()),
                    p.args
                        .as_ref()
                        .map(ToString::to_string)
                        .or_else(|| p.args_text.clone())
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
        }
        Report::new(if pending == 0 {
            String::new()
        } else {
            t.render()
        })
    };
    for row in &rows {
        if row.paused {
            report = report.note(format!(
                "`{}` is paused: its one-off jobs wait until `dlock resume {}`",
                row.job, row.job
            ));
        }
        if row.replicas.is_empty() {
            report = report.note(format!(
                "no live replica registered handler `{}`: its one-off jobs wait for one",
                row.name
            ));
        }
    }
    if pending == 0 {
        let what = if rows.len() == 1 {
            rows.first()
                .map_or_else(String::new, |r| format!(" of handler `{}`", r.name))
        } else if rows.is_empty() {
            " (no replica under this prefix registered a handler)".to_owned()
        } else {
            String::new()
        };
        report = report
            .note(format!("no pending one-off job{what}"))
            .exit(Exit::NotFound);
    }
    Ok(report)
}
