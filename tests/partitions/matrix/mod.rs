//! The partition matrix of issue 50: four clients (dlock with `Durability::None`, with
//! `Replicas { n: 1 }`, with `Replicas` and `min-replicas-to-write` on the servers, and a plain
//! `SET NX PX` client for comparison), each under a Sentinel failover with each nemesis
//! (symmetric partition, one-way cut, half-open links, the master isolated with a minority),
//! for Jepsen's three workloads (lock/unlock, writes guarded by the lock, a set under the
//! lock). Each cell states its promise first (`promise.rs`, from the README and the guide),
//! and a cell whose figures contradict it fails.
//!
//! - `cell.rs` runs a cell on a real network; `record.rs` saves its history as JSON lines and
//!   loads it back; `measure.rs` computes the figures from a history alone; `promise.rs` holds
//!   the rows, nemeses, promises and the table.
//! - `make partitions` runs [`matrix`] (ignored here: about 10 minutes): every cell, histories
//!   saved under `target/partitions/<run>/`, the table written there and into the guide's
//!   chapter (`dlock-core/guide/partitions.md`, between its `matrix` markers).
//! - [`replay`] (`make partitions-replay RUN=target/partitions/<run>`) computes the table again
//!   from a run's saved histories and checks it is the one the run wrote; with
//!   `DLOCK_PARTITIONS_GUIDE=1` (after a change to the checks) it writes it again, there and
//!   into the chapter.
//! - The smoke cell (`make test`) runs one cell, `Replicas` + `min-replicas-to-write` with the
//!   master isolated with a minority, with shorter phases.

mod cell;
mod measure;
mod promise;
mod record;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cell::Plan;
use promise::{Nemesis, Row, WORKLOADS};
use record::Cell;

/// The matrix's phases: long enough for a failover (2–3 s here) to happen inside the cut and
/// for the clients to settle after the heal.
const FULL: Plan = Plan {
    warm: Duration::from_secs(8),
    replication_cut: Duration::from_millis(6_500),
    cut: Duration::from_secs(6),
    after: Duration::from_secs(7),
    recovery: Duration::from_secs(20),
    // Longer than a failover (2–3 s): a hold granted just before the cut is still held when
    // the other side can take the lock.
    lock_hold_ms: (3_000, 6_000),
};

/// The smoke cell's: the shortest that still meets a failover and a recovery.
const SMOKE: Plan = Plan {
    warm: Duration::from_secs(6),
    replication_cut: Duration::from_millis(1_500),
    cut: Duration::from_secs(3),
    after: Duration::from_secs(3),
    recovery: Duration::from_secs(20),
    // Short, so that both clients have held the lock soon (the warm-up waits for it).
    lock_hold_ms: (1_000, 2_500),
};

/// Where the chapter's table lives, between these two lines.
const GUIDE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../dlock-core/guide/partitions.md"
);
const BEGIN: &str = "<!-- matrix:begin (written by `make partitions`) -->";
const END: &str = "<!-- matrix:end -->";

/// The results dir of a new run: `$DLOCK_PARTITIONS_RESULTS`, else
/// `target/partitions/<unix seconds>`.
fn results_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("DLOCK_PARTITIONS_RESULTS") {
        return PathBuf::from(dir);
    }
    let secs = cell::now_us() / 1_000_000;
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/partitions")
        .join(secs.to_string())
}

fn file_name(row: Row, nemesis: Nemesis) -> String {
    format!("{}--{}.jsonl", row.name(), nemesis.name())
}

/// The table of `cells` (in the matrix's order) and the promises they broke.
fn table(cells: &[Cell]) -> (String, Vec<String>) {
    let mut text = promise::table_header();
    let mut broken = Vec::new();
    for cell in cells {
        let row = Row::from_name(&cell.row).expect("a known row");
        let nemesis = Nemesis::from_name(&cell.nemesis).expect("a known nemesis");
        for workload in WORKLOADS {
            let m = measure::measure(cell, workload);
            text.push_str(&promise::table_line(
                row,
                nemesis,
                cell.failovers(),
                workload,
                &m,
            ));
            for what in row.broken(&m) {
                broken.push(format!(
                    "{} / {} / {workload}: {what}",
                    row.name(),
                    nemesis.name()
                ));
            }
        }
    }
    (text, broken)
}

/// The distinct error texts of a cell's `unknown` outcomes, most frequent first, each with its
/// count and the first time after the heal (ms; negative: before it): why its clients went
/// unanswered, for a failure's message (the history has every one).
fn errors(cell: &Cell) -> String {
    let heal = cell.at("heal").unwrap_or(0);
    let mut seen: std::collections::BTreeMap<&str, (usize, i128)> = Default::default();
    for e in &cell.errors {
        let at = (e.invoked_us as i128 - heal as i128) / 1_000;
        let entry = seen.entry(e.text.as_str()).or_insert((0, at));
        entry.0 += 1;
    }
    let mut list: Vec<_> = seen.into_iter().collect();
    list.sort_by_key(|e| std::cmp::Reverse(e.1.0));
    list.iter()
        .take(8)
        .map(|(text, (n, at))| format!("\n  {n} × (first at {at:+} ms) {text}"))
        .collect()
}

/// Runs one cell, saves its history in `dir`, prints its lines of the table.
#[allow(clippy::print_stdout)] // the cell's figures, as the run goes
fn run_and_save(test: &str, row: Row, nemesis: Nemesis, plan: Plan, dir: &Path) -> Option<Cell> {
    let started = Instant::now();
    let cell = cell::run(test, row, nemesis, plan)?;
    std::fs::create_dir_all(dir).expect("results dir");
    let path = dir.join(file_name(row, nemesis));
    std::fs::write(&path, cell.save()).expect("save the history");
    let (lines, _) = table(std::slice::from_ref(&cell));
    println!(
        "{} / {} in {:.0?}, saved to {}\n{}",
        row.name(),
        nemesis.name(),
        started.elapsed(),
        path.display(),
        lines.lines().skip(2).collect::<Vec<_>>().join("\n")
    );
    Some(cell)
}

#[test]
fn smoke_a_master_isolated_with_a_minority_keeps_the_replicas_promise() {
    let test =
        "partitions::matrix::smoke_a_master_isolated_with_a_minority_keeps_the_replicas_promise";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("partitions-smoke");
    let Some(cell) = run_and_save(
        test,
        Row::ReplicasMin,
        Nemesis::IsolateMinority,
        SMOKE,
        &dir,
    ) else {
        return;
    };
    let (_, broken) = table(std::slice::from_ref(&cell));
    assert!(
        broken.is_empty(),
        "promises broken: {broken:?}\nthe clients' errors: {}",
        errors(&cell)
    );
    // The case was reached: client 1, isolated with the old master, went unanswered, and
    // every workload held the lock.
    assert!(
        cell.ops
            .iter()
            .any(|(_, op)| op.process == 1
                && op.outcome == crate::partitions::history::Outcome::Unknown),
        "the cut never reached client 1"
    );
    for workload in WORKLOADS {
        assert!(
            measure::measure(&cell, workload).holds >= 2,
            "{workload}: too few holds to say anything"
        );
    }
}

/// `make partitions`: every cell (`DLOCK_PARTITIONS_ONLY=<row or nemesis name>` narrows it).
#[test]
#[ignore = "the whole matrix takes minutes: make partitions"]
#[allow(clippy::print_stdout)] // the table and where it went
fn matrix() {
    let started = Instant::now();
    let dir = results_dir();
    let only = std::env::var("DLOCK_PARTITIONS_ONLY").ok();
    let mut cells = Vec::new();
    for row in Row::ALL {
        for nemesis in Nemesis::ALL {
            if only.as_deref().is_some_and(|o| {
                ![
                    row.name(),
                    nemesis.name(),
                    &format!("{}/{}", row.name(), nemesis.name()),
                ]
                .contains(&o)
            }) {
                continue;
            }
            let Some(cell) = run_and_save("partitions::matrix::matrix", row, nemesis, FULL, &dir)
            else {
                return;
            };
            cells.push(cell);
        }
    }
    let (text, broken) = table(&cells);
    std::fs::write(dir.join("table.md"), &text).expect("write the table");
    let run = dir
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let header = format!(
        "Run `{run}`: {} cells in {:.0} s (the histories: `target/partitions/{run}/`).",
        cells.len(),
        started.elapsed().as_secs_f64()
    );
    std::fs::write(dir.join("run.txt"), &header).expect("write the run's header");
    if only.is_none() && std::env::var("DLOCK_PARTITIONS_GUIDE").is_ok_and(|v| v == "1") {
        write_chapter(&header, &text);
    }
    println!("{header}\n\n{text}\nhistories in {}", dir.display());
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
}

/// Puts `header` and `table` between the chapter's markers.
#[allow(clippy::print_stdout)] // where it went
fn write_chapter(header: &str, table: &str) {
    let guide = std::fs::read_to_string(GUIDE).expect("the chapter");
    let (head, rest) = guide.split_once(BEGIN).expect("the chapter's begin marker");
    let (_, tail) = rest.split_once(END).expect("the chapter's end marker");
    let block = format!("{BEGIN}\n{header}\n\n{table}{END}");
    std::fs::write(GUIDE, format!("{head}{block}{tail}")).expect("write the chapter");
    println!("table written into {GUIDE}");
}

/// `make partitions-replay RUN=<dir>`: the table again from the saved histories alone,
/// checked against the one the run wrote.
#[test]
#[ignore = "needs a saved run: make partitions-replay RUN=target/partitions/<run>"]
#[allow(clippy::print_stdout)] // the table
fn replay() {
    let dir = PathBuf::from(
        std::env::var("DLOCK_PARTITIONS_REPLAY").expect("DLOCK_PARTITIONS_REPLAY=<run dir>"),
    );
    let mut cells = Vec::new();
    for row in Row::ALL {
        for nemesis in Nemesis::ALL {
            let path = dir.join(file_name(row, nemesis));
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            cells.push(Cell::load(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
        }
    }
    assert!(!cells.is_empty(), "no history in {}", dir.display());
    let (text, broken) = table(&cells);
    println!("{text}");
    // `DLOCK_PARTITIONS_GUIDE=1`, after a change to the checks (the figures come from the
    // histories alone): the run's table and the chapter are written again.
    if std::env::var("DLOCK_PARTITIONS_GUIDE").is_ok_and(|v| v == "1") {
        std::fs::write(dir.join("table.md"), &text).expect("write the table");
        let header = std::fs::read_to_string(dir.join("run.txt")).expect("the run's run.txt");
        write_chapter(header.trim(), &text);
    }
    let written = std::fs::read_to_string(dir.join("table.md")).expect("the run's table.md");
    assert_eq!(
        text, written,
        "the replay computes another table than the run wrote"
    );
    println!(
        "{} cells replayed; promises broken: {broken:#?}",
        cells.len()
    );
}
