//! The README's code compiles and runs as written: every `rust` block of README.md (and of
//! dlock-testkit's README) is one of the programs in `examples/readme/src/bin/` or one of the
//! tests in `examples/readme/tests/` (verbatim); each program runs against a real Redis here,
//! and each test starts its own under `cargo test` (`make test`).
//! One server only: the programs take one URL (`DLOCK_REDIS_URL`), and one is the scheduler's.
//! The README's "Benchmarks" section points to the benchmark report, which stays short: the
//! runs' full reports live in `docs/benchmarks/`, one file per run (issue #28).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use dlock_testkit::LineChild;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::redis;

const README: &str = include_str!("../../README.md");
const TESTKIT_README: &str = include_str!("../../dlock-testkit/README.md");
const BENCHMARKS: &str = include_str!("../../BENCHMARKS.md");
/// How long the benchmark report may grow (issue #28): one screen per workload, not a journal.
const BENCHMARKS_MAX_LINES: usize = 400;
/// The files the README blocks are copies of, by path in `examples/readme/`.
const PROGRAMS: [(&str, &str); 9] = [
    (
        "src/bin/quickstart.rs",
        include_str!("../../examples/readme/src/bin/quickstart.rs"),
    ),
    (
        "src/bin/pay.rs",
        include_str!("../../examples/readme/src/bin/pay.rs"),
    ),
    (
        "src/bin/prices.rs",
        include_str!("../../examples/readme/src/bin/prices.rs"),
    ),
    (
        "src/bin/exports.rs",
        include_str!("../../examples/readme/src/bin/exports.rs"),
    ),
    (
        "src/bin/leader.rs",
        include_str!("../../examples/readme/src/bin/leader.rs"),
    ),
    (
        "src/bin/ledger.rs",
        include_str!("../../examples/readme/src/bin/ledger.rs"),
    ),
    (
        "src/bin/rate.rs",
        include_str!("../../examples/readme/src/bin/rate.rs"),
    ),
    (
        "src/bin/lottery_job.rs",
        include_str!("../../examples/readme/src/bin/lottery_job.rs"),
    ),
    (
        "tests/lease_lost.rs",
        include_str!("../../examples/readme/tests/lease_lost.rs"),
    ),
];

/// The `rust` code blocks of a markdown document.
fn rust_blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match &mut current {
            None if line.trim_start().starts_with("```rust") => current = Some(String::new()),
            Some(block) if line.trim_start().starts_with("```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// Whether `block` is one of the files of `examples/readme/`, verbatim.
fn is_a_program(block: &str) -> bool {
    PROGRAMS
        .iter()
        .any(|(_, source)| source.trim_end() == block.trim_end())
}

#[test]
fn every_readme_block_is_a_program_that_ci_builds() {
    let blocks = rust_blocks(README);
    assert!(!blocks.is_empty(), "the README shows code");
    for block in &blocks {
        assert!(
            is_a_program(block),
            "a README block is not one of examples/readme/src/bin/*.rs or tests/*.rs (copy it \
             there, verbatim):\n{block}"
        );
    }
    for (path, source) in PROGRAMS {
        assert!(
            blocks.iter().any(|b| b.trim_end() == source.trim_end()),
            "examples/readme/{path} is not in the README (or differs from it)"
        );
    }
}

/// The test kit's README shows the README's test of a lost lease, which CI runs.
#[test]
fn the_testkit_readme_shows_only_code_that_ci_runs() {
    let blocks = rust_blocks(TESTKIT_README);
    assert!(!blocks.is_empty(), "dlock-testkit/README.md shows code");
    for block in &blocks {
        assert!(
            is_a_program(block),
            "a block of dlock-testkit/README.md is not one of examples/readme/src/bin/*.rs or \
             tests/*.rs (copy it there, verbatim):\n{block}"
        );
    }
}

/// The lines of `doc` from the `heading` line to the next heading of its level (or the end).
fn section<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    let level = heading.split(' ').next().unwrap_or_default();
    let mut lines = doc.lines().skip_while(|line| *line != heading);
    let Some(first) = lines.next() else {
        panic!("no `{heading}` heading");
    };
    let next_heading = format!("{level} ");
    std::iter::once(first)
        .chain(lines.take_while(|line| !line.starts_with(&next_heading)))
        .collect()
}

#[test]
fn the_readme_benchmarks_section_links_the_report_and_the_runs() {
    let section = section(README, "## Benchmarks").join("\n");
    assert!(
        section.contains("[`BENCHMARKS.md`](BENCHMARKS.md)"),
        "the README's Benchmarks section does not link BENCHMARKS.md:\n{section}"
    );
    assert!(
        section.contains("(docs/benchmarks/)"),
        "the README's Benchmarks section does not link docs/benchmarks/:\n{section}"
    );
    assert!(
        section.contains("make bench"),
        "the README's Benchmarks section does not say how to run it:\n{section}"
    );
}

/// `docs/benchmarks/YYYY-MM-DD-<run>.md`.
/// A section's text with its line breaks and runs of spaces made single spaces, so that a
/// sentence is found however the paragraph is wrapped.
fn prose(heading: &str) -> String {
    section(README, heading)
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The README sections issue #28 changed say what now holds: the ACL (the viewer reads no
/// `TIME`, a refused password is `Authentication`), the CLI (its TLS, password and Sentinel
/// reach), metrics (series at zero, `lock="(none)"`, the `_total` decision), secrets (only
/// passwords are scrubbed), and the benchmark (checked above).
#[test]
fn the_operator_sections_say_what_changed_for_operators() {
    let wanted = [
        (
            "### Least privilege",
            vec![
                "the inspection scripts read no `TIME`",
                "is `ErrorKind::Authentication`, not `Permission`",
            ],
        ),
        (
            "### The `dlock` command line",
            vec![
                "`DLOCK_REDIS_PASSWORD`",
                "`--sentinel NAME`",
                "`--tls-ca`, `--tls-cert`/`--tls-key`, `--tls-insecure`",
            ],
        ),
        (
            "### Metrics",
            vec![
                "`lock=\"(none)\"` (never an empty label)",
                "are registered at zero, so a scrape lists them before any traffic",
                "`set_enable_unit_suffix(true)`",
                "dlock does not put one in the names",
            ],
        ),
        (
            "### Secrets",
            vec![
                "The CLI removes passwords, and only them",
                "a user name is not a secret, and tables and JSON are never rewritten",
            ],
        ),
    ];
    for (heading, lines) in wanted {
        let text = prose(heading);
        for line in lines {
            assert!(
                text.contains(line),
                "README `{heading}` no longer says: {line}\n{text}"
            );
        }
    }
}

fn is_run_file_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > "YYYY-MM-DD-.md".len()
        && bytes[..10].iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
        && bytes[10] == b'-'
        && name.ends_with(".md")
}

#[test]
fn benchmarks_md_stays_a_report_and_lists_every_run_in_docs_benchmarks() {
    let lines = BENCHMARKS.lines().count();
    assert!(
        lines <= BENCHMARKS_MAX_LINES,
        "BENCHMARKS.md has {lines} lines (at most {BENCHMARKS_MAX_LINES}): put a run's report in \
         docs/benchmarks/YYYY-MM-DD-run-<letter>.md and only its summary in BENCHMARKS.md"
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks");
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            is_run_file_name(&name),
            "docs/benchmarks/{name} is not named YYYY-MM-DD-<run>.md"
        );
        let text = std::fs::read_to_string(dir.join(&name)).unwrap();
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("Issue") && first.contains('#') && first.contains('`'),
            "docs/benchmarks/{name} does not open with the issue and commit it belongs to: {first}"
        );
        runs.push(name);
    }
    assert!(!runs.is_empty(), "no run in docs/benchmarks/");
    let listed = section(BENCHMARKS, "## The runs").join("\n");
    for name in &runs {
        assert!(
            listed.contains(&format!("(docs/benchmarks/{name})")),
            "BENCHMARKS.md, \"The runs\", does not list docs/benchmarks/{name}"
        );
    }
    // Every link into docs/benchmarks/ names a file that exists.
    for link in BENCHMARKS.split("](docs/benchmarks/").skip(1) {
        let target = link.split([')', '#']).next().unwrap_or_default();
        assert!(
            target.is_empty() || runs.iter().any(|name| name == target),
            "BENCHMARKS.md links docs/benchmarks/{target}, which does not exist"
        );
    }
}

fn run(binary: &str, url: &str) -> String {
    let output = Command::new(binary)
        .env("DLOCK_REDIS_URL", url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{binary} failed: {}\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn the_readme_programs_run_against_redis() {
    let server = redis();
    let url = server.url();
    let out = run(env!("CARGO_BIN_EXE_readme-quickstart"), &url);
    assert!(
        out.contains("holding `order:42` with fencing token"),
        "{out}"
    );
    assert!(out.contains("released: Released"), "{out}");
    let out = run(env!("CARGO_BIN_EXE_readme-pay"), &url);
    assert!(out.contains("charged order 42 1999 cents"), "{out}");
    let out = run(env!("CARGO_BIN_EXE_readme-exports"), &url);
    assert!(out.contains("exporting under fencing token"), "{out}");
    assert!(out.contains("exported 42 rows with 2 permits"), "{out}");
    let out = run(env!("CARGO_BIN_EXE_readme-leader"), &url);
    assert!(out.contains("leading with fencing token"), "{out}");
    assert!(out.contains("observers see the new leader"), "{out}");
    assert!(out.contains("resigned: Released"), "{out}");
    let out = run(env!("CARGO_BIN_EXE_readme-ledger"), &url);
    assert!(out.contains("balance 1250"), "{out}");
    assert!(out.contains("statement written under fence"), "{out}");
    let out = run(env!("CARGO_BIN_EXE_readme-rate"), &url);
    assert!(
        out.contains("sent 25 calls within the partner's quota"),
        "{out}"
    );
    assert!(
        out.contains("user 7's sixth upload: refused, retry in Some("),
        "{out}"
    );
    let out = run(env!("CARGO_BIN_EXE_readme-prices"), &url);
    assert!(out.contains("reading with fencing token"), "{out}");
    assert!(out.contains("upgraded: Released"), "{out}");
    assert!(!out.contains("read under fencing token 0"), "{out}");

    // The scheduler runs until Ctrl-C (SIGINT), then stops cleanly.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_readme-lottery-job"));
    cmd.env("DLOCK_REDIS_URL", &url);
    let mut child = LineChild::spawn(cmd).unwrap();
    let first = child.line(Duration::from_secs(30)).unwrap();
    assert!(first.starts_with("scheduler running"), "{first}");
    let pid = Pid::from_raw(i32::try_from(child.process().pid()).unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    let status = child
        .wait(Duration::from_secs(30))
        .expect("stops on Ctrl-C");
    assert!(status.success(), "{status}");
    let last = child.line(Duration::from_secs(10)).unwrap();
    assert!(last.starts_with("stopped:"), "{last}");
}
