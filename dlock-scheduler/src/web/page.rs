//! The dashboard's one HTML page, rendered on the server from [`JobOverview`]s: inline CSS,
//! one small inline script (viewer's local times), no external asset, so it works offline.
//!
//! Every value that comes from Redis or from a job's definition (names, cron expressions,
//! zones, replica ids, hosts, error texts) goes through [`Esc`]; only this file's own literals
//! are written raw.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;

use crate::ledger::{RunOutcome, RunRecord};
use crate::overview::{JobOverview, JobReplica};

/// How many of a job's last runs the page lists (the counts per replica cover the whole
/// ledger).
pub(crate) const RUNS_SHOWN: usize = 10;

/// The page's script: shows each `<time data-viewer>` instant in the viewer's time zone too,
/// next to the server-rendered text (the no-JS fallback). Its hash is in the CSP below; change
/// both together (`printf %s "$SCRIPT" | openssl dgst -sha256 -binary | base64`).
pub(crate) const SCRIPT: &str = "for(const t of document.querySelectorAll('time[data-viewer]')){const d=new Date(t.dateTime);if(isNaN(d))continue;const s=document.createElement('small');s.className='viewer';s.textContent='your time: '+d.toLocaleString(undefined,{dateStyle:'medium',timeStyle:'long'});t.after(s)}";

/// `Content-Security-Policy` of the page: nothing from elsewhere, the inline style, this one
/// script (by hash), forms only to itself, never framed (no click-jacking of the buttons).
pub(crate) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     script-src 'sha256-9LyAm3N1HI4CzVqG8yS8SxwPASFLzQbA//6OiVHz7Ao='; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const STYLE: &str = "\
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}\
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}\
header p{margin:4px 0 0;color:#b9c0cc}main{padding:16px 24px}\
table{border-collapse:collapse;width:100%;background:#fff;margin-bottom:18px}\
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e3e6eb;vertical-align:top}\
th{background:#eceff3;font-weight:600;font-size:12px;text-transform:uppercase;color:#556}\
code{background:#eef1f5;padding:1px 4px;border-radius:3px}\
small{display:block;color:#667}h2{font-size:16px;margin:22px 0 6px}\
.badge{display:inline-block;padding:1px 8px;border-radius:9px;font-size:12px;font-weight:600}\
.active{background:#dcf3e3;color:#17652f}.paused{background:#fde8c8;color:#8a4b00}\
.badge.stalled{background:#fbe0de;color:#b3261e}\
.succeeded{color:#17652f}.failed{color:#b3261e}.running{color:#1d4fb3}\
.cancelled,.abandoned{color:#8a4b00}.skipped_overlap,.skipped_group{color:#667}\
form{display:flex;gap:6px;margin:0}button{font:inherit;padding:3px 10px;border-radius:4px;\
border:1px solid #9aa3b0;background:#fff;cursor:pointer}button:hover{background:#eef1f5}\
button.run{border-color:#1d4fb3;color:#1d4fb3}.warn{color:#8a4b00}.none{color:#889}";

/// Writes `s` HTML-escaped (text and attribute values alike).
pub(crate) struct Esc<'a>(pub(crate) &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..i])?;
            f.write_str(match rest.as_bytes()[i] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

/// How the page shows times: in each job's zone (the default), or all in UTC (`?utc=1`). The
/// viewer's own time is added next to each by the page's script either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Zones {
    pub(crate) utc: bool,
}

impl Zones {
    /// The zone to show a job's times in.
    fn of(self, job_zone: &str) -> Tz {
        if self.utc {
            Tz::UTC
        } else {
            // UTC for a zone this version does not know.
            job_zone.parse().unwrap_or(Tz::UTC)
        }
    }
}

/// The whole page; `one_offs` is the section on one-off jobs, rendered by `one_offs.rs` (empty:
/// none).
pub(crate) fn render(
    jobs: &[JobOverview],
    one_offs: &str,
    zones: Zones,
    now: DateTime<Utc>,
) -> String {
    // Replicas stalled as a whole do not run anything now: counted apart.
    let ids = |stalled: bool| -> std::collections::BTreeSet<&str> {
        jobs.iter()
            .flat_map(|j| &j.replicas)
            .filter(|r| r.stalled == stalled)
            .map(|r| r.id.as_str())
            .collect()
    };
    let (stalled, replicas) = (ids(true), ids(false));
    let mut out = String::with_capacity(8 * 1024);
    out += "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
            <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
            <title>dlock scheduler</title><style>";
    out += STYLE;
    out += "</style></head><body><header><h1>dlock scheduler</h1>";
    let stalled = match stalled.len() {
        0 => String::new(),
        n => format!(" · <span class=\"warn\">{n} stalled</span>"),
    };
    // The one zone policy: each job's zone, or UTC on request (a link to switch).
    let switch = if zones.utc {
        "<a class=\"zones\" href=\"?\">show times in each job's zone</a>"
    } else {
        "<a class=\"zones\" href=\"?utc=1\">show times in UTC</a>"
    };
    out += &format!(
        "<p>{} job{} · {} replica{} running{stalled} · read {} · {switch}</p></header><main>",
        jobs.len(),
        plural(jobs.len()),
        replicas.len(),
        plural(replicas.len()),
        instant(now, &format!("{}", now.format("%Y-%m-%d %H:%M:%S UTC"))),
    );
    if jobs.is_empty() && one_offs.is_empty() {
        out += "<p class=\"none\">No job: no scheduler replica is running under this \
                client's prefix, and this scheduler has no job of its own.</p>";
    } else {
        if !jobs.is_empty() {
            jobs_table(&mut out, jobs, zones);
        }
        out += one_offs;
        for job in jobs {
            runs_table(&mut out, job, zones);
        }
    }
    out += "</main><script>";
    out += SCRIPT;
    out += "</script></body></html>";
    out
}

fn jobs_table(out: &mut String, jobs: &[JobOverview], zones: Zones) {
    out.push_str(
        "<table class=\"jobs\"><thead><tr><th>Job</th><th>Schedule</th><th>Next fire</th>\
         <th>State</th><th>Replicas</th><th>Runs per replica</th><th>Actions</th></tr></thead>\
         <tbody>",
    );
    for job in jobs {
        let name = Esc(&job.name);
        // A run-time schedule: the handler it runs.
        let handler = job.runtime.as_ref().map_or_else(String::new, |s| {
            format!(
                "<small>run-time schedule · handler {}</small>",
                Esc(&s.handler)
            )
        });
        *out += &format!(
            "<tr data-job=\"{name}\"><td><strong>{name}</strong>{handler}</td>\
             <td><code>{}</code><small>{}</small></td><td>",
            Esc(&job.cron),
            Esc(&job.time_zone)
        );
        match &job.next_fire {
            Ok(Some(t)) => {
                let text = t
                    .with_timezone(&zones.of(&job.time_zone))
                    .format("%Y-%m-%d %H:%M:%S %Z")
                    .to_string();
                *out += &instant(t.with_timezone(&Utc), &text);
            }
            Ok(None) => out.push_str("<span class=\"none\">none</span>"),
            Err(e) => {
                *out += &format!(
                    "<span class=\"warn\">unknown: {}</span>",
                    Esc(&e.to_string())
                )
            }
        }
        let (state, label) = if job.paused {
            ("paused", "paused")
        } else {
            ("active", "active")
        };
        *out += &format!("</td><td><span class=\"badge {state}\">{label}</span></td><td>");
        if job.is_unrunnable() {
            out.push_str("<span class=\"warn\">no live replica can run it</span>");
            for n in &job.not_run_by {
                *out += &format!(
                    "<small class=\"warn\">{}: {}</small>",
                    Esc(&n.replica),
                    Esc(&n.reason)
                );
            }
        } else if job.replicas.is_empty() {
            out.push_str("<span class=\"none\">none running</span>");
        }
        for r in &job.replicas {
            replica(out, r);
        }
        if job.schedules_differ {
            out.push_str("<small class=\"warn\">replicas disagree on the schedule</small>");
        }
        out.push_str("</td><td>");
        let counts = job.runs_per_replica();
        if counts.is_empty() {
            out.push_str("<span class=\"none\">no run yet</span>");
        }
        for (replica, n) in counts {
            *out += &format!(
                "<div class=\"count\">{}: <strong>{n}</strong></div>",
                Esc(replica)
            );
        }
        let toggle = if job.paused {
            "<button name=\"action\" value=\"resume\">Resume</button>"
        } else {
            "<button name=\"action\" value=\"pause\">Pause</button>"
        };
        *out += &format!(
            "</td><td><form method=\"post\" data-job=\"{name}\">\
             <input type=\"hidden\" name=\"job\" value=\"{name}\">{toggle}\
             <button class=\"run\" name=\"action\" value=\"run-now\">Run now</button>\
             </form></td></tr>"
        );
    }
    out.push_str("</tbody></table>");
}

/// One replica of a job, marked when it takes no turn of the job now (stalled as a whole, or
/// its loop for the job).
fn replica(out: &mut String, r: &JobReplica) {
    let Some(since) = r.stalled_since() else {
        *out += &format!(
            "<div class=\"replica\">{}<small>{} · pid {}</small></div>",
            Esc(&r.id),
            Esc(&r.host),
            r.pid
        );
        return;
    };
    let (badge, what) = if r.loop_stalled_for.is_some() {
        ("loop stalled", "its loop for this job has not run since")
    } else {
        ("stalled", "no heartbeat since")
    };
    let since = DateTime::<Utc>::from(since);
    *out += &format!(
        "<div class=\"replica stalled\">{} <span class=\"badge stalled\">{badge}</span>\
         <small>{} · pid {} · {what} {}</small></div>",
        Esc(&r.id),
        Esc(&r.host),
        r.pid,
        instant(since, &since.format("%Y-%m-%d %H:%M:%S UTC").to_string())
    );
}

fn runs_table(out: &mut String, job: &JobOverview, zones: Zones) {
    if job.history.is_empty() {
        *out += &format!(
            "<h2>Last runs of {}</h2><p class=\"none\">No run recorded yet.</p>",
            Esc(&job.name)
        );
        return;
    }
    let shown = job.history.len().min(RUNS_SHOWN);
    // The job's zone, as in the jobs table (or UTC on request).
    let zone = zones.of(&job.time_zone);
    *out += &format!(
        "<h2>Last runs of {} <small>{shown} of the {} in the ledger, newest first; times in \
         {}</small></h2>",
        Esc(&job.name),
        job.history.len(),
        Esc(zone.name())
    );
    *out += &format!(
        "<table class=\"runs\" data-job=\"{}\"><thead><tr><th>Occurrence</th><th>Trigger</th>\
         <th>Replica</th><th>Outcome</th><th>Duration</th><th>Fencing token</th>\
         <th>Started</th><th>Attempt</th></tr></thead><tbody>",
        Esc(&job.name)
    );
    for run in job.history.iter().rev().take(RUNS_SHOWN) {
        run_row(out, run, zone);
    }
    out.push_str("</tbody></table>");
}

fn run_row(out: &mut String, run: &RunRecord, zone: Tz) {
    let (code, detail) = match &run.outcome {
        RunOutcome::Failed(text) | RunOutcome::Cancelled(text) => {
            (outcome_code(run), text.as_str())
        }
        _ => (outcome_code(run), ""),
    };
    let occurrence = run
        .occurrence
        .with_timezone(&zone)
        .format("%Y-%m-%d %H:%M:%S %Z")
        .to_string();
    let started = DateTime::<Utc>::from(run.started_at);
    *out += &format!(
        "<tr class=\"run\"><td>{}</td><td>{}</td><td class=\"replica\">{}<small>{} · pid {}</small></td>\
         <td class=\"outcome {code}\">{code}",
        instant(run.occurrence, &occurrence),
        if run.manual { "run now" } else { "schedule" },
        Esc(&run.replica),
        Esc(&run.host),
        run.pid
    );
    if !detail.is_empty() {
        *out += &format!("<small>{}</small>", Esc(detail));
    }
    if run.finished_while_suspect {
        out.push_str(
            "<small class=\"suspect\" title=\"a renewal of its lease had gone unanswered for a \
             renewal interval when it ended\">lease suspect</small>",
        );
    }
    *out += &format!(
        "</td><td>{}</td><td class=\"fence\">{}</td><td>{}</td>",
        duration(run),
        run.fencing_token
            .map_or_else(|| "–".to_owned(), |f| f.to_string()),
        instant(
            started,
            &started
                .with_timezone(&zone)
                .format("%Y-%m-%d %H:%M:%S%.3f %Z")
                .to_string()
        )
    );
    attempt_cell(out, run, zone);
    out.push_str("</tr>");
}

/// The attempt's number; under at-least-once delivery the earlier attempts (number, outcome,
/// replica) and, while a retry is pending, when the next attempt is due.
fn attempt_cell(out: &mut String, run: &RunRecord, zone: Tz) {
    *out += &format!("<td class=\"attempt\">{}", run.attempt);
    for earlier in &run.earlier_attempts {
        *out += &format!(
            "<small>{}: {} on {}</small>",
            earlier.attempt,
            earlier.outcome.code(),
            Esc(&earlier.replica)
        );
    }
    if let Some(next) = run.next_retry {
        let next = DateTime::<Utc>::from(next);
        let shown = next
            .with_timezone(&zone)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string();
        *out += &format!("<small>next attempt {}</small>", instant(next, &shown));
    }
    out.push_str("</td>");
}

/// The outcome as a word (also the CSS class).
fn outcome_code(run: &RunRecord) -> &'static str {
    match run.outcome {
        RunOutcome::Running => "running",
        RunOutcome::Succeeded => "succeeded",
        RunOutcome::Failed(_) => "failed",
        RunOutcome::Cancelled(_) => "cancelled",
        RunOutcome::SkippedOverlap => "skipped_overlap",
        RunOutcome::SkippedGroup => "skipped_group",
        RunOutcome::Abandoned => "abandoned",
        RunOutcome::Scheduled => "scheduled",
    }
}

/// How long the run took, or `–` while it runs (or when it never ended).
fn duration(run: &RunRecord) -> String {
    let Some(took) = run
        .ended_at
        .and_then(|end| end.duration_since(run.started_at).ok())
    else {
        return "–".to_owned();
    };
    let ms = took.as_millis();
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", took.as_secs_f64())
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1_000)
    }
}

/// An instant: `text` (server-rendered, shown as is without JS) in a `<time>` element whose
/// `datetime` is the UTC instant, which the script also shows in the viewer's zone.
pub(crate) fn instant(t: DateTime<Utc>, text: &str) -> String {
    format!(
        "<time datetime=\"{}\" data-viewer>{}</time>",
        t.to_rfc3339_opts(SecondsFormat::Millis, true),
        Esc(text)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csp_allows_exactly_the_page_script() {
        // The hash in CSP is of SCRIPT as it is: a browser refuses the script otherwise (the
        // browser test sees the viewer's times appear).
        assert!(CSP.contains("script-src 'sha256-"));
        assert!(
            !SCRIPT.contains('<'),
            "the script must not close its element"
        );
    }

    #[test]
    fn stalled_replicas_are_marked_and_not_counted_running() {
        use std::time::{Duration, UNIX_EPOCH};
        let beat = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let replica = |id: &str, stalled: bool, loop_ms: Option<u64>| JobReplica {
            id: id.to_owned(),
            host: "vm".to_owned(),
            pid: 7,
            last_heartbeat: beat,
            heartbeat_every: Duration::from_secs(1),
            cron: "* * * * * *".to_owned(),
            time_zone: "UTC".to_owned(),
            stalled,
            loop_stalled_for: loop_ms.map(Duration::from_millis),
            delivery: None,
        };
        let job = JobOverview {
            name: "tick".to_owned(),
            cron: "* * * * * *".to_owned(),
            time_zone: "UTC".to_owned(),
            next_fire: Ok(None),
            paused: false,
            replicas: vec![
                replica("a", false, None),
                replica("b", true, None),
                replica("c", false, Some(2_000)),
            ],
            schedules_differ: false,
            history: Vec::new(),
            runtime: None,
            not_run_by: Vec::new(),
        };
        let page = render(&[job], "", Zones::default(), DateTime::<Utc>::from(beat));
        assert!(page.contains("2 replicas running · <span class=\"warn\">1 stalled</span>"));
        assert!(page.contains("<div class=\"replica\">a<small>"), "{page}");
        assert!(page.contains(
            "<div class=\"replica stalled\">b <span class=\"badge stalled\">stalled</span>\
             <small>vm · pid 7 · no heartbeat since <time datetime=\"2023-11-14T22:13:20.000Z\""
        ));
        assert!(page.contains(
            "<div class=\"replica stalled\">c <span class=\"badge stalled\">loop stalled\
             </span><small>vm · pid 7 · its loop for this job has not run since \
             <time datetime=\"2023-11-14T22:13:18.000Z\""
        ));
    }

    #[test]
    fn a_schedule_no_replica_can_run_says_so_and_why() {
        let schedule = crate::RuntimeSchedule {
            name: "export:acme".to_owned(),
            handler: "export".to_owned(),
            cron: "0 3 * * *".to_owned(),
            time_zone: "UTC".to_owned(),
            args: None,
            added_at: std::time::UNIX_EPOCH,
        };
        let job = JobOverview {
            name: schedule.name.clone(),
            cron: schedule.cron.clone(),
            time_zone: "UTC".to_owned(),
            next_fire: Ok(None),
            paused: false,
            replicas: Vec::new(),
            schedules_differ: false,
            history: Vec::new(),
            runtime: Some(schedule),
            not_run_by: vec![crate::NotRunBy {
                replica: "web-1".to_owned(),
                reason: "the handler `export` is not registered on this replica".to_owned(),
            }],
        };
        assert!(job.is_unrunnable());
        let page = render(&[job], "", Zones::default(), Utc::now());
        assert!(
            page.contains("<small>run-time schedule · handler export</small>"),
            "{page}"
        );
        assert!(page.contains("<span class=\"warn\">no live replica can run it</span>"));
        assert!(page.contains(
            "<small class=\"warn\">web-1: the handler `export` is not registered on this \
             replica</small>"
        ));
    }

    #[test]
    fn a_run_that_ended_while_its_lease_was_suspect_is_marked() {
        let claim = "1\x1freplica-a\x1fweb-1\x1f7\x1f1700000000500\x1f0\x1ftok\x1f1";
        let end = |flags: &str| format!("1\x1fsucceeded\x1f1700000001000\x1f9\x1f\x1f{flags}");
        let row = |end: &str| {
            let run = RunRecord::parse(1_700_000_000_000, claim, Some(end), None).unwrap();
            let mut out = String::new();
            run_row(&mut out, &run, chrono_tz::UTC);
            out
        };
        assert!(row(&end("\x1fs")).contains("lease suspect"));
        assert!(!row(&end("")).contains("lease suspect"));
    }

    #[test]
    fn escaping_covers_text_and_attributes() {
        assert_eq!(
            Esc("<script>alert('x')</script> & \"q\"").to_string(),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(Esc("plain · ü").to_string(), "plain · ü");
    }
}
