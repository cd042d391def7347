//! The results of one run and how they are shown: the markdown report printed on stdout and the
//! JSON written next to it.
//!
//! A workload hands its result over as a [`Section`]: the columns it adds to the main table (one
//! row per subject), the figures that get ratios, its rows of the command table, its own details
//! and its targets. This module knows no workload: it lays out what the sections give, in run
//! order, and computes every ratio the same way: each subject's figure divided by that of each
//! subject it is compared with ([`Kind::compared_with`]: dlock by both floors and by rslock).

use std::fmt::Write as _;
use std::path::Path;

use serde::ser::SerializeMap as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::redis_stats::{PerCommand, PerOp};
use crate::rt::BoxError;
use crate::spec::Counts;
use crate::subjects::Kind;
use crate::table::{Col, NONE, int, table, table_of, times};

/// A workload's result, as the report sees it. Every part is optional.
pub(crate) trait Section: std::fmt::Debug {
    /// Columns of the main table.
    fn columns(&self) -> Vec<Column> {
        Vec::new()
    }
    /// Figures reported as ratios between subjects ([`Kind::compared_with`]).
    fn figures(&self) -> Vec<Figure> {
        Vec::new()
    }
    /// Rows of the command table.
    fn command_rows(&self) -> Vec<CommandRow> {
        Vec::new()
    }
    /// The workload's own part of the report, after the shared tables.
    fn details(&self, _out: &mut String) {}
    /// The acceptance targets this workload's figures are checked against.
    fn targets(&self) -> Vec<Target> {
        Vec::new()
    }
}

/// A column of the main table: a cell per subject (missing cells show `—`), and a note printed
/// under the table.
#[derive(Debug)]
pub(crate) struct Column {
    pub(crate) header: String,
    pub(crate) cells: Vec<(Kind, String)>,
    pub(crate) note: Option<&'static str>,
}

impl Column {
    /// A column with no note.
    pub(crate) fn new(header: impl Into<String>, cells: Vec<(Kind, String)>) -> Column {
        Column {
            header: header.into(),
            cells,
            note: None,
        }
    }
}

/// A figure per subject, reported as ratios between subjects ([`Kind::compared_with`]).
#[derive(Debug)]
pub(crate) struct Figure {
    pub(crate) name: String,
    pub(crate) values: Vec<(Kind, f64)>,
}

/// A row of the command table: what one operation of `workload` cost `subject`.
#[derive(Debug)]
pub(crate) struct CommandRow {
    pub(crate) workload: String,
    pub(crate) subject: Kind,
    pub(crate) per_op: PerOp,
    /// The window's calls per command.
    pub(crate) commands: PerCommand,
}

/// One target and whether this run met it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) wanted: &'static str,
    pub(crate) measured: String,
    pub(crate) met: bool,
}

impl Target {
    pub(crate) fn new(
        name: impl Into<String>,
        wanted: &'static str,
        measured: String,
        met: bool,
    ) -> Self {
        let name = name.into();
        Target {
            name,
            wanted,
            measured,
            met,
        }
    }
}

/// A target as data: its name, what is wanted, and the check of one result (the figure as shown,
/// and whether it meets the target).
pub(crate) type Check<T> = (&'static str, &'static str, fn(&T) -> (String, bool));

/// The targets of `result`, one per check.
pub(crate) fn checked<T>(result: &T, checks: &[Check<T>]) -> Vec<Target> {
    let target = |&(name, wanted, check): &Check<T>| {
        let (measured, met) = check(result);
        Target::new(name, wanted, measured, met)
    };
    checks.iter().map(target).collect()
}

/// One subject's figure divided by another's (`to`), for one figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Ratio {
    pub(crate) figure: String,
    pub(crate) subject: Kind,
    pub(crate) to: Kind,
    pub(crate) ratio: f64,
}

/// The ratio of `subject` to `to` among `ratios`, for `figure`.
pub(crate) fn ratio_of(ratios: &[Ratio], figure: &str, subject: Kind, to: Kind) -> Option<f64> {
    ratios
        .iter()
        .find(|r| r.figure == figure && r.subject == subject && r.to == to)
        .map(|r| r.ratio)
}

/// One workload's result: its JSON (kept as written, in field order) and its [`Section`].
#[derive(Debug)]
pub(crate) struct Entry {
    key: &'static str,
    json: Box<RawValue>,
    section: Box<dyn Section>,
}

impl Entry {
    /// The result `value`, under `key` in results.json.
    pub(crate) fn new<T: Section + Serialize + 'static>(
        key: &'static str,
        value: T,
    ) -> Result<Entry, BoxError> {
        Ok(Entry {
            key,
            json: serde_json::value::to_raw_value(&value)?,
            section: Box::new(value),
        })
    }
}

/// Where and how the run happened.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Meta {
    pub(crate) quick: bool,
    pub(crate) counts: Counts,
    pub(crate) redis_version: String,
    /// The server measured, by its own name and version ("Redis 7.0.15", "Valkey 9.1.2 …").
    pub(crate) server: String,
    pub(crate) cpus: usize,
    pub(crate) cpu_model: String,
    pub(crate) kernel: String,
    /// The subjects of W1, W2 and W3.
    pub(crate) subjects: Vec<Kind>,
    /// The rslock version measured (pinned).
    pub(crate) rslock: &'static str,
    /// Every subject's connection settings.
    pub(crate) connection: &'static str,
    pub(crate) runtimes: &'static str,
    /// `/proc/loadavg` (1, 5, 15 min) when the run started and when it ended: other work on
    /// this shared machine shows up here.
    pub(crate) loadavg_start: String,
    pub(crate) loadavg_end: String,
}

impl Meta {
    pub(crate) fn collect(
        counts: Counts,
        (redis_version, server): (String, String),
        subjects: &[Kind],
    ) -> Meta {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, m)| m.trim().to_owned());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |k| k.trim().to_owned());
        Meta {
            quick: counts.quick,
            counts,
            redis_version,
            server,
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model,
            kernel,
            subjects: subjects.to_vec(),
            rslock: crate::rslock::VERSION,
            connection: CONNECTIONS,
            runtimes: "W1, W1 1-CPU and W2 current-thread: current-thread; W1 1-CPU \
                       multi-thread, W2, W2-fence, W3 workers, memory: multi-thread with 2 \
                       workers; the same for every subject. W1 1-CPU, W2 and W2-fence: each \
                       subject's median of 5 rounds (1 in --quick), the subjects' order rotated each round \
                       (W1 1-CPU: a fresh pinned process per subject and round)",
            loadavg_start: loadavg(),
            loadavg_end: String::new(),
        }
    }

    fn header(&self, out: &mut String) {
        let kind = if self.quick {
            "QUICK smoke run (--quick: about a tenth of the work; not comparable with full runs)"
        } else if self.counts.scale {
            "scale run (--scale: W6–W8 and Cluster at issue #29's sizes)"
        } else {
            "full run"
        };
        let _ = writeln!(out, "## dlock benchmark (WORKLOADS.md): {kind}\n");
        let subjects: Vec<&str> = self.subjects.iter().map(|k| k.label()).collect();
        let _ = writeln!(
            out,
            "{} · {} CPUs ({}) · kernel {} · load average {} at the start, {} at the end  \n\
             Subjects (rslock pinned at ={}): {}.  \nConnections: {}.  \nRuntimes: {}.\n",
            self.server,
            self.cpus,
            self.cpu_model,
            self.kernel,
            self.loadavg_start,
            self.loadavg_end,
            self.rslock,
            subjects.join(" · "),
            self.connection,
            self.runtimes
        );
    }
}

/// The connection settings of every subject, as the report's header states them.
const CONNECTIONS: &str = "one multiplexed connection per client. Raw floor (redis defaults) and \
    rslock: the `redis` crate's defaults (`redis::Client::open(url)`: RESP2, Nagle on); raw floor \
    (TCP_NODELAY): RESP3, TCP_NODELAY on (dlock's setting before issue #13); dlock: RESP3, \
    Nagle on (dlock-core's default, chosen by this benchmark); dlock tcp_nodelay(…) rows: as \
    their builder option says. Ratios name the subject they divide by; \
    issue #13's targets divide by the raw floor with the redis defaults";

/// The three load averages of `/proc/loadavg`.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Everything one run measured.
#[derive(Debug)]
pub(crate) struct Results {
    meta: Meta,
    entries: Vec<Entry>,
    ratios: Vec<Ratio>,
    targets: Vec<Target>,
}

impl Serialize for Results {
    /// `meta`, then every workload under its key, then the ratios and the targets.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("meta", &self.meta)?;
        for entry in &self.entries {
            map.serialize_entry(entry.key, &entry.json)?;
        }
        map.serialize_entry("ratios", &self.ratios)?;
        map.serialize_entry("targets", &self.targets)?;
        map.end()
    }
}

impl Results {
    /// Gathers the results of one run, with the ratios to the floor and the targets checked.
    pub(crate) fn new(mut meta: Meta, entries: Vec<Entry>) -> Results {
        meta.loadavg_end = loadavg();
        let figures = entries.iter().flat_map(|e| e.section.figures());
        let ratios = figures.flat_map(|f| ratios(&f)).collect();
        let targets = entries.iter().flat_map(|e| e.section.targets()).collect();
        Results {
            meta,
            entries,
            ratios,
            targets,
        }
    }

    /// Writes the JSON to `path`, creating its directory.
    pub(crate) fn write_json(&self, path: &Path) -> Result<(), BoxError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(())
    }

    /// The markdown report.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        self.meta.header(&mut out);
        let sections: Vec<&dyn Section> = self.entries.iter().map(|e| &*e.section).collect();
        main_table(&mut out, &sections);
        self.ratio_table(&mut out);
        command_table(&mut out, &sections);
        for section in &sections {
            section.details(&mut out);
        }
        self.target_table(&mut out);
        out
    }

    /// The ratios as a table: a column per figure, a row per pair of subjects ("dlock ÷ rslock"),
    /// in [`Kind::ALL`] and [`Kind::compared_with`] order.
    fn ratio_table(&self, out: &mut String) {
        let mut figures: Vec<&str> = Vec::new();
        for r in &self.ratios {
            if !figures.contains(&r.figure.as_str()) {
                figures.push(&r.figure);
            }
        }
        let pairs = Kind::ALL.into_iter().flat_map(|subject| {
            let to = subject.compared_with().iter();
            to.map(move |&to| (subject, to))
        });
        let present = |&(subject, to): &(Kind, Kind)| {
            self.ratios
                .iter()
                .any(|r| r.subject == subject && r.to == to)
        };
        let rows: Vec<Vec<String>> = pairs
            .filter(present)
            .map(|(subject, to)| {
                let label = format!("{} ÷ {}", subject.label(), to.label());
                let cells = figures
                    .iter()
                    .map(|f| times(ratio_of(&self.ratios, f, subject, to)));
                std::iter::once(label).chain(cells).collect()
            })
            .collect();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(out, "### Ratios (same run)\n\n{RATIO_NOTE}\n");
        let header: Vec<&str> = std::iter::once("").chain(figures.iter().copied()).collect();
        let align = "l".to_owned() + &"r".repeat(figures.len());
        table(out, &align, &header, rows);
    }

    fn target_table(&self, out: &mut String) {
        if self.targets.is_empty() {
            return;
        }
        let _ = writeln!(out, "### Targets (issues #3, #4, #6, #13, #14, #34)\n");
        let rows = self.targets.iter().map(|t| {
            let met = if t.met { "yes" } else { "**no**" };
            vec![
                t.name.clone(),
                t.wanted.to_owned(),
                t.measured.clone(),
                met.to_owned(),
            ]
        });
        table(out, "llll", &["target", "wanted", "measured", "met"], rows);
    }
}

/// The value of `kind` among `values`.
fn at<T: Clone>(values: &[(Kind, T)], kind: Kind) -> Option<T> {
    values
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, v)| v.clone())
}

/// What the ratio table's rows mean, printed above it.
const RATIO_NOTE: &str = "Each row divides one subject's figure by another's, both measured in \
    this run: a rate above 1× is faster, a latency above 1× slower. The two floors differ in \
    their connection only: \"redis defaults\" is rslock's (RESP2, Nagle on), and issue #13's \
    targets divide by it, like for like with dlock's default client (Nagle on); \"TCP_NODELAY\" \
    (RESP3, Nagle off) is like for like with `dlock, tcp_nodelay(true)`. The W3 gap is divided by the raw pub/sub hop, measured on the \
    TCP_NODELAY floor's connection settings.";

/// Each subject's value of `figure` divided by that of every subject it is compared with.
fn ratios(figure: &Figure) -> Vec<Ratio> {
    let mut ratios = Vec::new();
    for &(subject, value) in &figure.values {
        for &to in subject.compared_with() {
            if let Some(reference) = at(&figure.values, to) {
                ratios.push(Ratio {
                    figure: figure.name.clone(),
                    subject,
                    to,
                    ratio: value / reference,
                });
            }
        }
    }
    ratios
}

/// A table with a row per subject that has a cell (in [`Kind::ALL`] order) and the given columns
/// (a missing cell shows `—`); `corner` heads the subjects' column.
fn subject_table(out: &mut String, corner: &str, columns: &[Column]) {
    let has_cell = |kind| columns.iter().any(|c| at(&c.cells, kind).is_some());
    let row = |kind: Kind| {
        let cells = columns
            .iter()
            .map(|c| at(&c.cells, kind).unwrap_or_else(|| NONE.to_owned()));
        std::iter::once(kind.label().to_owned())
            .chain(cells)
            .collect()
    };
    let rows: Vec<Vec<String>> = Kind::ALL
        .into_iter()
        .filter(|k| has_cell(*k))
        .map(row)
        .collect();
    let header: Vec<&str> = std::iter::once(corner)
        .chain(columns.iter().map(|c| c.header.as_str()))
        .collect();
    let align = "l".to_owned() + &"r".repeat(columns.len());
    table(out, &align, &header, rows);
}

/// The WORKLOADS.md table: a row per subject, the columns of every section in run order, and
/// the columns' notes under it.
fn main_table(out: &mut String, sections: &[&dyn Section]) {
    let columns: Vec<Column> = sections.iter().flat_map(|s| s.columns()).collect();
    if columns.is_empty() {
        return;
    }
    subject_table(out, "subject", &columns);
    for note in columns.iter().filter_map(|c| c.note) {
        let _ = writeln!(out, "{note}\n");
    }
}

/// Commands, round trips and CPU per operation, a row per workload and subject.
fn command_table(out: &mut String, sections: &[&dyn Section]) {
    let rows: Vec<CommandRow> = sections.iter().flat_map(|s| s.command_rows()).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### Commands (`INFO commandstats` delta over the measured window, `info` left out)\n"
    );
    table_of(out, "llrrrrrrl", &COMMAND_COLUMNS, &rows);
}

/// The columns of the command table.
const COMMAND_COLUMNS: [Col<CommandRow>; 9] = [
    ("workload", |r| r.workload.clone()),
    ("subject", |r| r.subject.label().to_owned()),
    ("commands/op", |r| format!("{:.2}", r.per_op.commands)),
    ("client round trips/op", |r| {
        format!("{:.2}", r.per_op.round_trips)
    }),
    ("µs/op in commands", |r| {
        format!("{:.1}", r.per_op.server_us)
    }),
    ("redis-server CPU µs/op", |r| {
        format!("{:.1}", r.per_op.server_cpu_us)
    }),
    ("client CPU µs/op", |r| {
        let cpu = r.per_op.client_cpu_us;
        cpu.map_or_else(|| NONE.to_owned(), |c| format!("{c:.1}"))
    }),
    ("client allocations/op (bytes)", |r| {
        let per_op = &r.per_op;
        match (per_op.client_allocs, per_op.client_alloc_bytes) {
            (Some(calls), Some(bytes)) => format!("{calls:.1} ({} B)", int(bytes)),
            _ => NONE.to_owned(),
        }
    }),
    ("commands in the window", |r| r.commands.summary()),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_divide_by_each_subject_compared_with() {
        let figure = Figure {
            name: "W2 pairs/s".into(),
            values: vec![
                (Kind::Floor, 200.0),
                (Kind::Rslock, 100.0),
                (Kind::Dlock, 150.0),
            ],
        };
        let r = ratios(&figure);
        let of = |subject, to| ratio_of(&r, "W2 pairs/s", subject, to);
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(of(Kind::Dlock, Kind::Floor), Some(0.75));
        assert_eq!(of(Kind::Dlock, Kind::Rslock), Some(1.5));
        assert_eq!(of(Kind::Rslock, Kind::Floor), Some(0.5));
        // The TCP_NODELAY floor was not measured: no ratio to it.
        assert_eq!(of(Kind::Dlock, Kind::FloorNodelay), None);
        let no_floor = Figure {
            name: "x".into(),
            values: vec![(Kind::Dlock, 1.0)],
        };
        assert!(ratios(&no_floor).is_empty());
    }

    #[test]
    fn the_ratio_table_has_a_row_per_pair() {
        let figure = Figure {
            name: "W2 pairs/s".into(),
            values: vec![(Kind::Floor, 200.0), (Kind::Dlock, 150.0)],
        };
        let meta = Meta::collect(
            Counts::QUICK,
            ("7".into(), "Redis 7".into()),
            &[Kind::Floor, Kind::Dlock],
        );
        let results = Results {
            meta,
            entries: Vec::new(),
            ratios: ratios(&figure),
            targets: Vec::new(),
        };
        let mut out = String::new();
        results.ratio_table(&mut out);
        assert!(
            out.ends_with(
                "| | W2 pairs/s |\n|---|---:|\n| dlock ÷ raw floor (redis defaults) | 0.75× |\n\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn the_header_names_the_kind_of_run() {
        for (counts, kind) in [
            (Counts::QUICK, "QUICK smoke run"),
            (Counts::FULL, "full run"),
            (Counts::SCALE, "scale run"),
        ] {
            let mut out = String::new();
            Meta::collect(counts, ("7".into(), "Redis 7".into()), &[Kind::Dlock]).header(&mut out);
            let first = out.lines().next().unwrap_or_default();
            assert!(first.contains(kind), "{first}");
        }
    }

    #[derive(Debug)]
    struct Two;

    impl Section for Two {
        fn columns(&self) -> Vec<Column> {
            vec![
                Column::new(
                    "a",
                    vec![(Kind::Floor, "1".into()), (Kind::Dlock, "2".into())],
                ),
                Column {
                    note: Some("b is dlock's alone."),
                    ..Column::new("b", vec![(Kind::Dlock, "3".into())])
                },
            ]
        }
    }

    #[test]
    fn the_main_table_has_a_row_per_subject_and_dashes_for_missing_cells() {
        let mut out = String::new();
        main_table(&mut out, &[&Two]);
        assert_eq!(
            out,
            "| subject | a | b |\n|---|---:|---:|\n| raw floor (redis defaults) | 1 | — |\n\
             | dlock | 2 | 3 |\n\n\
             b is dlock's alone.\n\n"
        );
    }
}
