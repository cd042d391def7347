//! Path coverage of the scheduler's scripts, as `../coverage.rs` counts the lock scripts': the
//! reply paths are found in each script's text (`coverage::sites_in`, with `common.lua` as its
//! shared file), each call stops at a debugger breakpoint on every path it takes, and the
//! report prints every path with how often the run reached it.
//!
//! A path the walks do not reach must be named below with the reason — a script with no model
//! step yet ([`UNDRIVEN`]), or a path of a driven script that its model cannot take
//! ([`UNREACHED`]) — or the default run fails; and a path named there that the run did reach
//! fails it too (the table is stale).

use std::collections::HashMap;
use std::fmt::Write as _;

use dlock_scheduler::__private::conformance::{COMMON, Script};

use crate::coverage::{Site, sites_in};

/// The scripts no model step drives yet (none since the job steps, `job.rs`; a new script
/// starts here until its model step exists): their paths are printed, unreached.
pub(crate) const UNDRIVEN: &[Script] = &[];

/// Paths of driven scripts that their model cannot take, and why.
const UNREACHED: &[(Script, &str, &str)] = &[
    (
        Script::Once,
        "once.lua main: return {5, id, due, now}",
        "another format version's records: no model writes them",
    ),
    (
        Script::TakeRetry,
        "take_retry.lua main: return {0, -2, now}",
        "the attempt model has no pause",
    ),
    (
        Script::TakeRetry,
        "take_retry.lua main: return {0, tonumber(first[2]), now}",
        "the model takes a retry only when one is due",
    ),
    (
        Script::TakeRetry,
        "take_retry.lua main: return {0, -1, now}",
        "the model takes a retry only when one is due",
    ),
    (
        Script::TakeRetry,
        "take_retry.lua main: return {3, now} #1",
        "a run in `retries` without a claim: the ledger's trimming, not modelled",
    ),
    (
        Script::TakeRetry,
        "take_retry.lua main: return {3, now} #3",
        "a final run left in `retries`: no model step leaves one",
    ),
    (
        Script::TakeRetry,
        "take_retry.lua main: return redis.error_reply('dlock: the run ' .. id .. ' has records of format version '",
        "another format version's records: no model writes them",
    ),
    (
        Script::Finish,
        "finish.lua main: return {0} #3",
        "another format version's end record: no model writes one",
    ),
    (
        Script::RenewAttempt,
        "renew_attempt.lua main: return {0, now} #1",
        "a renewal of a run with no claim: the model's attempts always have one",
    ),
    (
        Script::RenewAttempt,
        "renew_attempt.lua main: return {0, now} #4",
        "a current attempt with no place in `retries`: no model step takes it out",
    ),
];

/// The reaches of every path of every script.
pub(crate) struct Tally {
    sites: Vec<(Script, Vec<Site>)>,
    hits: HashMap<(Script, usize), u64>,
}

/// The script's own text (the assembled text without `common.lua`) and the shared files in it.
fn parts(script: Script) -> (&'static str, &'static [(&'static str, &'static str)]) {
    const SHARED: &[(&str, &str)] = &[("common.lua", COMMON)];
    match script.text().strip_prefix(COMMON) {
        Some(own) => (own, SHARED),
        None => (script.text(), &[]),
    }
}

impl Tally {
    /// Every script's paths, none reached yet.
    pub(crate) fn new() -> Result<Self, String> {
        let sites = Script::ALL
            .iter()
            .map(|s| {
                let (own, shared) = parts(*s);
                Ok((*s, sites_in(s.text(), (s.file(), own), shared)?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            sites,
            hits: HashMap::new(),
        })
    }

    /// The breakpoint lines of `script`.
    pub(crate) fn breakpoints(&self, script: Script) -> Vec<usize> {
        self.sites
            .iter()
            .find(|(s, _)| *s == script)
            .map(|(_, sites)| sites.iter().map(|s| s.line).collect())
            .unwrap_or_default()
    }

    /// One call of `script` stopped at `lines`.
    pub(crate) fn record(&mut self, script: Script, lines: &[usize]) {
        for &line in lines {
            *self.hits.entry((script, line)).or_default() += 1;
        }
    }

    /// The report as printed, and the paths that fail the check.
    pub(crate) fn report(&self) -> (String, Vec<String>) {
        let mut out = String::from(
            "reply paths of the scheduler's scripts, reached by the model walks (issue 46):\n",
        );
        let mut failed = Vec::new();
        for (script, sites) in &self.sites {
            let undriven = UNDRIVEN.contains(script);
            let count = |site: &Site| self.hits.get(&(*script, site.line)).copied().unwrap_or(0);
            let reached = sites.iter().filter(|s| count(s) > 0).count();
            let note = if undriven {
                "  [no model step yet]"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {}: {reached} of {} paths{note}",
                script.file(),
                sites.len()
            );
            for site in sites {
                let n = count(site);
                let why = UNREACHED
                    .iter()
                    .find(|(s, id, _)| s == script && *id == site.id)
                    .map(|(_, _, why)| *why);
                let mark = why.map(|w| format!("  [{w}]")).unwrap_or_default();
                let _ = writeln!(out, "    {n:>6}  {}{mark}", site.id);
                match (n, why, undriven) {
                    (0, None, false) => {
                        failed.push(format!("{}: {} was never reached", script.file(), site.id));
                    }
                    (1.., Some(_), _) | (1.., None, true) => failed.push(format!(
                        "{}: {} was reached, but scheduler/coverage.rs says it cannot be",
                        script.file(),
                        site.id
                    )),
                    _ => {}
                }
            }
        }
        for (script, id, _) in UNREACHED {
            let known = self
                .sites
                .iter()
                .any(|(s, sites)| s == script && sites.iter().any(|site| site.id == *id));
            if !known {
                failed.push(format!(
                    "{}: scheduler/coverage.rs names a path the script no longer has: {id}",
                    script.file()
                ));
            }
        }
        (out, failed)
    }
}
