//! Path coverage (issue 44): which reply paths of each shipped script the default run reached,
//! and how often. The paths are found in the scripts' texts (`coverage/sites.rs`); each run of
//! a script on the real side stops at a debugger breakpoint on every path it takes
//! (`redis_side/debug.rs`), so the shipped text itself is what is counted and judged.
//!
//! Every path must be reached in the default run; the table (`coverage/table.rs`) names every
//! path the scripts have (a unit test fails on a path it does not know) and the few that random
//! sequences cannot reach because they need another program's data or a newer format version:
//! a fixed scenario writes that data and reaches them (`foreign.rs`).

mod sites;
mod table;

use std::collections::HashMap;
use std::fmt::Write as _;

use dlock_core::__private::conformance::Source;

pub(crate) use sites::{SCRIPTS, Site, sites, sites_in};
pub(crate) use table::{Reach, reach};

/// Which part of the run a script call belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The fixed scenarios (ask.rs, fenced.rs, rate.rs, scenarios.rs, foreign.rs).
    Fixed,
    /// The random sequences.
    Sequences,
}

/// The reaches of every path, per phase.
pub(crate) struct Tally {
    sites: Vec<(Source, Vec<Site>)>,
    hits: HashMap<(u8, usize), [u64; 2]>,
    /// The phase the next calls are counted in.
    pub phase: Phase,
}

impl Tally {
    /// Every counted script's paths, none reached yet.
    pub(crate) fn new() -> Result<Self, String> {
        let sites = SCRIPTS
            .iter()
            .map(|(source, _, _)| Ok((*source, sites(*source)?)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            sites,
            hits: HashMap::new(),
            phase: Phase::Fixed,
        })
    }

    /// The breakpoint lines of `source`, or `None` when its paths are not counted.
    pub(crate) fn breakpoints(&self, source: Source) -> Option<Vec<usize>> {
        let (_, sites) = self.sites.iter().find(|(s, _)| *s == source)?;
        Some(sites.iter().map(|s| s.line).collect())
    }

    /// One call of `source` stopped at `lines`.
    pub(crate) fn record(&mut self, source: Source, lines: &[usize]) {
        let phase = self.phase as usize;
        for &line in lines {
            self.hits.entry((source as u8, line)).or_default()[phase] += 1;
        }
    }

    /// The report as printed, and the paths that fail the check: a path the table does not
    /// know; one never reached (in a run of at least the default sequences); one marked as
    /// needing another program's data that the random sequences reached, or one a script
    /// cannot take that it took (the table is wrong); and in a deep run (`deep`: 1,024
    /// sequences or more) one marked for the random sequences that they did not reach (in the
    /// default run, its fixed case reaching it is enough: the report says so).
    pub(crate) fn report(&self, strict: bool, deep: bool) -> (String, Vec<String>) {
        let mut out = String::from(
            "reply paths of the shipped scripts, reached by the random sequences + the fixed \
             cases (fence_raise.lua: the quorum's walks + its scenarios, quorum.rs):\n",
        );
        let mut failed = Vec::new();
        for (source, sites) in &self.sites {
            let name = SCRIPTS
                .iter()
                .find(|(s, _, _)| s == source)
                .map_or("?", |(_, n, _)| *n);
            let count = |site: &Site| {
                self.hits
                    .get(&(*source as u8, site.line))
                    .copied()
                    .unwrap_or([0; 2])
            };
            let own: Vec<&Site> = sites
                .iter()
                .filter(|s| !matches!(reach(*source, &s.id), Some(Reach::Never(_))))
                .collect();
            let reached = own.iter().filter(|s| count(s) != [0; 2]).count();
            let _ = writeln!(out, "  {name}: {reached} of {} paths", own.len());
            for site in sites {
                let [fixed, seq] = count(site);
                let needs = reach(*source, &site.id);
                let mark = match needs {
                    Some(Reach::Foreign(why)) => format!("  [fixed only: {why}]"),
                    Some(Reach::Never(why)) => format!("  [not this script's: {why}]"),
                    Some(Reach::Sequences) if seq == 0 && fixed > 0 => {
                        "  [the sequences missed it this run]".to_owned()
                    }
                    _ => String::new(),
                };
                let _ = writeln!(out, "    {seq:>6} + {fixed:<4} {}{mark}", site.id);
                let wrong = match needs {
                    None => Some("is not in the table (coverage/table.rs)"),
                    Some(Reach::Never(_)) if seq + fixed > 0 => {
                        Some("was reached, but the table says this script cannot take it")
                    }
                    Some(Reach::Never(_)) => None,
                    Some(_) if seq + fixed == 0 => Some("was never reached"),
                    Some(Reach::Sequences) if seq == 0 && deep => {
                        Some("was reached by the fixed cases only (the generator misses it)")
                    }
                    Some(Reach::Foreign(_)) if seq > 0 => Some(
                        "was reached by the random sequences, but the table says it needs \
                         another program's data",
                    ),
                    Some(_) => None,
                };
                if let Some(wrong) = wrong
                    && (strict || needs.is_none())
                {
                    failed.push(format!("{name}: {} {wrong}", site.id));
                }
            }
        }
        (out, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use table::{NOT_FROM, ROWS};

    /// A path the table does not know fails here (add its row to `coverage/table.rs`), and so
    /// does a row whose path no script has any more.
    #[test]
    fn every_path_is_in_the_table() {
        let mut unknown = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (source, name, _) in SCRIPTS {
            for site in sites(source).unwrap_or_else(|e| panic!("{name}: {e}")) {
                if reach(source, &site.id).is_none() {
                    unknown.push(format!("{name}: {}", site.id));
                }
                seen.insert((source as u8, site.id));
            }
        }
        let stale: Vec<&str> = ROWS
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !seen.iter().any(|(_, i)| i == id))
            .chain(
                NOT_FROM
                    .iter()
                    .filter(|(s, id, _)| !seen.contains(&(*s as u8, (*id).to_owned())))
                    .map(|(_, id, _)| *id),
            )
            .collect();
        assert!(
            unknown.is_empty() && stale.is_empty(),
            "paths the table does not know:\n  {}\nrows of paths no script has:\n  {}",
            unknown.join("\n  "),
            stale.join("\n  ")
        );
    }
}
