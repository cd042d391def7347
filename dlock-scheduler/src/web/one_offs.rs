//! The dashboard's section on one-off jobs: one table of the handlers (their hidden job
//! `once:<handler>`, paused or not, queue length, live replicas, with pause / resume buttons
//! that post the page's own form — the same same-origin rule as every POST), and per handler
//! its pending one-off jobs, due first (id, due time, attempt, idempotency key, who enqueued
//! it, arguments). One-off jobs have no time zone of their own: their times are in UTC, with the
//! viewer's time next to them (the page's script).

use chrono::{DateTime, Utc};

use super::page::{Esc, instant};
use crate::one_offs::{OneOffHandler, PendingOneOff};

/// How many pending one-off jobs of each handler the page lists.
pub(crate) const PENDING_SHOWN: usize = 10;

/// A handler and its first pending one-off jobs.
pub(crate) type HandlerView = (OneOffHandler, Vec<PendingOneOff>);

/// The section, or nothing when no replica registered a handler.
pub(crate) fn section(out: &mut String, handlers: &[HandlerView]) {
    if handlers.is_empty() {
        return;
    }
    out.push_str(
        "<h2>One-off jobs <small>by handler; times in UTC</small></h2>\
         <table class=\"handlers\"><thead><tr><th>Handler</th><th>State</th><th>Queued</th>\
         <th>Next due</th><th>Replicas</th><th>Actions</th></tr></thead><tbody>",
    );
    for (h, pending) in handlers {
        let job = Esc(&h.job);
        let (state, toggle) = if h.paused {
            (
                "paused",
                "<button name=\"action\" value=\"resume\">Resume</button>",
            )
        } else {
            (
                "active",
                "<button name=\"action\" value=\"pause\">Pause</button>",
            )
        };
        *out += &format!(
            "<tr data-handler=\"{}\"><td><strong>{}</strong><small><code>{job}</code></small></td>\
             <td><span class=\"badge {state}\">{state}</span></td><td class=\"queued\">{}</td><td>",
            Esc(&h.name),
            Esc(&h.name),
            h.queued
        );
        match pending.iter().map(|p| p.due).min() {
            Some(due) => *out += &utc_instant(due),
            None => out.push_str("<span class=\"none\">none</span>"),
        }
        out.push_str("</td><td>");
        if h.replicas.is_empty() {
            out.push_str("<span class=\"warn\">no live replica: its jobs wait</span>");
        }
        for r in &h.replicas {
            *out += &format!("<div class=\"replica\">{}</div>", Esc(r));
        }
        *out += &format!(
            "</td><td><form method=\"post\" data-job=\"{job}\">\
             <input type=\"hidden\" name=\"job\" value=\"{job}\">{toggle}</form></td></tr>"
        );
    }
    out.push_str("</tbody></table>");
    for (h, pending) in handlers {
        pending_table(out, h, pending);
    }
}

/// The pending one-off jobs of one handler.
fn pending_table(out: &mut String, h: &OneOffHandler, pending: &[PendingOneOff]) {
    if pending.is_empty() {
        return;
    }
    *out += &format!(
        "<h2>Pending one-off jobs of {} <small>the first {} by due time, of {} queued</small>\
         </h2><table class=\"pending\" data-handler=\"{}\"><thead><tr><th>Id</th><th>Due</th>\
         <th>Attempt</th><th>Key</th><th>Enqueued by</th><th>Arguments</th></tr></thead>\
         <tbody>",
        Esc(&h.name),
        pending.len(),
        h.queued,
        Esc(&h.name)
    );
    for p in pending {
        let enqueued = match (&p.enqueued_by, p.enqueued_at) {
            (Some(by), Some(at)) => format!(
                "{}<small>{}</small>",
                Esc(by),
                utc_instant(DateTime::<Utc>::from(at))
            ),
            _ => "<span class=\"none\">–</span>".to_owned(),
        };
        *out += &format!(
            "<tr class=\"pending\" data-id=\"{id}\"><td><code>{id}</code></td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{enqueued}</td><td><code>{}</code></td></tr>",
            utc_instant(p.due),
            p.attempt,
            key_cell(p),
            Esc(p.args.as_deref().unwrap_or("–")),
            id = Esc(&p.id.to_string()),
        );
    }
    out.push_str("</tbody></table>");
}

/// The idempotency key, escaped; a keyed job an older replica enqueued has only the key's
/// hash (its run id) stored.
fn key_cell(p: &PendingOneOff) -> String {
    match (&p.key, p.keyed) {
        (Some(key), _) => format!("<code class=\"key\">{}</code>", Esc(key)),
        (None, true) => "<span class=\"none\">not stored</span>".to_owned(),
        (None, false) => "<span class=\"none\">–</span>".to_owned(),
    }
}

/// An instant in UTC, with the viewer's time added by the page's script.
fn utc_instant(t: DateTime<Utc>) -> String {
    instant(t, &t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
}
