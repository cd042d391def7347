//! The README's and the guide's code compiles and runs as written: every `rust` block of
//! README.md, of the guide's chapters (`dlock-core/guide/*.md`, `dlock-scheduler/guide/*.md`,
//! rendered as `dlock_core::_guide` and `dlock_scheduler::_guide`) and of each published crate's
//! README is one of the programs in `examples/readme/src/bin/` or one of the tests in
//! `examples/readme/tests/` (verbatim); each program runs against a real Redis here, and each
//! test starts its own under `cargo test` (`make test`). The guide's modules are left out of
//! doctests for that reason: their blocks are built and run here, once.
//! One server only: the programs take one URL (`DLOCK_REDIS_URL`), and one is the scheduler's.
//! The README stays short (at most 250 lines: later material goes to the guide), its links
//! resolve, every chapter is wired into its crate's `_guide.rs`, each crate page maps every public
//! item, and the crate READMEs give dependency lines that work before anything is published.
//! The benchmarks chapter points to the benchmark report, which stays short: the runs' full
//! reports live in `docs/benchmarks/`, one file per run (issue #28).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use dlock_testkit::LineChild;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::redis;

const README: &str = include_str!("../../README.md");
const BENCHMARKS: &str = include_str!("../../BENCHMARKS.md");
/// How long the README may grow (issue #47): a few screens; the reference is the guide.
const README_MAX_LINES: usize = 250;
/// How long the benchmark report may grow (issue #28): one screen per workload, not a journal.
const BENCHMARKS_MAX_LINES: usize = 400;
/// The crates whose guide is in `<crate>/guide/*.md`, wired in `<crate>/src/_guide.rs`.
const GUIDES: [&str; 2] = ["dlock-core", "dlock-scheduler"];
/// The published crates: each has a README of its own (its registry page).
const PUBLISHED: [&str; 7] = [
    "dlock-core",
    "dlock-macros",
    "dlock-cron",
    "dlock-scheduler",
    "dlock-testkit",
    "dlock-cli",
    "dlock-tower",
];
/// The files the blocks are copies of, by path in `examples/readme/`.
const PROGRAMS: [(&str, &str); 10] = [
    (
        "src/bin/quickstart.rs",
        include_str!("../../examples/readme/src/bin/quickstart.rs"),
    ),
    (
        "src/bin/orders.rs",
        include_str!("../../examples/readme/src/bin/orders.rs"),
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
/// The programs the README shows: a lock, `#[distributed_lock]` on an axum handler, a job.
const README_PROGRAMS: [&str; 3] = [
    "src/bin/quickstart.rs",
    "src/bin/orders.rs",
    "src/bin/lottery_job.rs",
];

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A file of the workspace, by its path from the root.
fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The guide's chapters, as (path from the root, e.g. `dlock-core/guide/locks.md`, text),
/// read from the folders so that a new chapter is checked without being listed here.
fn chapters() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for krate in GUIDES {
        let dir = root().join(krate).join("guide");
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".md") {
                let path = format!("{krate}/guide/{name}");
                let text = read(&path);
                found.push((path, text));
            }
        }
    }
    found.sort();
    found
}

/// Every markdown document whose `rust` blocks must be programs CI runs: the README, the
/// guide's chapters, the published crates' READMEs.
fn documents() -> Vec<(String, String)> {
    let mut docs = vec![("README.md".to_owned(), README.to_owned())];
    docs.extend(chapters());
    for krate in PUBLISHED {
        let path = format!("{krate}/README.md");
        let text = read(&path);
        docs.push((path, text));
    }
    docs
}

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
fn every_block_of_the_readme_and_the_guide_is_a_program_that_ci_builds() {
    let docs = documents();
    let mut shown = Vec::new();
    for (path, text) in &docs {
        for block in rust_blocks(text) {
            assert!(
                is_a_program(&block),
                "a `rust` block of {path} is not one of examples/readme/src/bin/*.rs or \
                 tests/*.rs (copy it there, verbatim):\n{block}"
            );
            shown.push(block);
        }
    }
    // No program of examples/readme is left that no document shows (or shows differently).
    for (path, source) in PROGRAMS {
        assert!(
            shown.iter().any(|b| b.trim_end() == source.trim_end()),
            "examples/readme/{path} is in no document (README, guide, crate READMEs), or \
             differs from it"
        );
    }
    let readme = rust_blocks(README);
    for path in README_PROGRAMS {
        let (_, source) = PROGRAMS.iter().find(|(p, _)| *p == path).unwrap();
        assert!(
            readme.iter().any(|b| b.trim_end() == source.trim_end()),
            "the README does not show examples/readme/{path}"
        );
    }
    assert_eq!(
        readme.len(),
        README_PROGRAMS.len(),
        "the README shows three programs; the rest goes to the guide"
    );
}

/// The README's programs connect at start-up (`Client::builder(url).connect()`), not lazily
/// (`Client::open`, which let a wrong URL pass until the first request).
#[test]
fn the_readme_programs_connect_at_start_up() {
    for block in rust_blocks(README) {
        assert!(
            block.contains("Client::builder(url.as_str()).connect().await?"),
            "a README program does not connect at start-up:\n{block}"
        );
        assert!(
            !block.contains("Client::open"),
            "a README program connects lazily:\n{block}"
        );
    }
}

#[test]
fn the_readme_fits_in_250_lines() {
    let lines = README.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines (at most {README_MAX_LINES}): move the new material into a \
         guide chapter (dlock-core/guide/*.md, dlock-scheduler/guide/*.md) and link it"
    );
}

/// The targets of the markdown links `[text](target)` in `doc` that point into the
/// repository (not `http…`, not `#anchor` alone), without their `#anchor`.
fn relative_links(doc: &str) -> Vec<String> {
    doc.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.starts_with("http") && !t.starts_with('#') && !t.contains("::"))
        .map(|t| t.split('#').next().unwrap_or_default().to_owned())
        .collect()
}

/// Every link of the README into the repository names a file or folder that exists, and the
/// README links every chapter of the guide (the links a reader follows on the repository's
/// page; the module paths are their names in the rendered docs).
#[test]
fn the_readme_links_resolve_and_reach_every_chapter() {
    let links = relative_links(README);
    assert!(!links.is_empty(), "the README links into the repository");
    for target in &links {
        assert!(
            root().join(target).exists(),
            "README.md links {target}, which does not exist"
        );
    }
    for (path, _) in chapters() {
        let (krate, name) = path.split_once("/guide/").unwrap();
        let module = name.trim_end_matches(".md");
        assert!(
            links.contains(&path),
            "README.md does not link the guide's chapter {path}"
        );
        let line = README
            .lines()
            .find(|l| l.contains(&format!("]({path})")))
            .unwrap();
        assert!(
            line.contains(&format!("::{module}`")),
            "README.md links {path} without its module path ({}::_guide::{module}):\n{line}",
            krate.replace('-', "_")
        );
    }
}

/// Every chapter file is a module of its crate's `_guide.rs`, in the fixed form, and every
/// module there is a chapter file (a file not wired in would not render).
#[test]
fn every_guide_chapter_is_a_module_of_the_rendered_docs() {
    for krate in GUIDES {
        let guide = read(&format!("{krate}/src/_guide.rs"));
        let lib = read(&format!("{krate}/src/lib.rs"));
        assert!(
            lib.contains("#[cfg(not(doctest))]\npub mod _guide;"),
            "{krate}/src/lib.rs does not declare `pub mod _guide` (out of doctests)"
        );
        let mut wired = 0;
        for (path, _) in chapters().iter().filter(|(p, _)| p.starts_with(krate)) {
            let name = path.rsplit('/').next().unwrap().trim_end_matches(".md");
            let module =
                format!("#[doc = include_str!(\"../guide/{name}.md\")]\npub mod {name} {{}}");
            assert!(
                guide.contains(&module),
                "{krate}/src/_guide.rs does not render {path}: add\n{module}"
            );
            assert!(
                guide.contains(&format!("[`{name}`]")),
                "the overview of {krate}/src/_guide.rs does not list `{name}`"
            );
            wired += 1;
        }
        assert_eq!(
            guide.matches("include_str!(").count(),
            wired,
            "{krate}/src/_guide.rs includes a file that is not in {krate}/guide/"
        );
    }
}

/// The names a crate root re-exports or declares in public (`pub use`, `pub fn`, `pub mod`),
/// less the hidden ones (`__private`) and the guide.
fn public_names(lib: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut statement = String::new();
    for line in lib.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let line = line.trim();
        if statement.is_empty() && !line.starts_with("pub ") {
            continue;
        }
        statement.push_str(line);
        statement.push(' ');
        let is_use = statement.starts_with("pub use ");
        if !(line.ends_with(';') || (line.ends_with('{') && !is_use)) {
            continue;
        }
        let text = std::mem::take(&mut statement);
        if let Some(tree) = text.strip_prefix("pub use ") {
            let tree = tree.trim().trim_end_matches(';');
            let list = match tree.split_once('{') {
                Some((_, inner)) => inner.trim_end_matches('}').to_owned(),
                None => tree.rsplit("::").next().unwrap_or_default().to_owned(),
            };
            names.extend(list.split(',').map(|n| n.trim().to_owned()));
        } else if let Some(rest) = text
            .strip_prefix("pub fn ")
            .or(text.strip_prefix("pub mod "))
        {
            let name = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.push(name);
        }
    }
    names.retain(|n| !n.is_empty() && !n.starts_with('_'));
    names
}

/// Each crate page reads as a map: its `# Map` section names every public item of the root
/// (dlock-core had 65 items listed flat, issue #47), so a new item fails here until placed.
#[test]
fn the_crate_pages_map_every_public_item() {
    for krate in GUIDES {
        let lib = read(&format!("{krate}/src/lib.rs"));
        let docs: String = lib
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let map = section(&docs, " # Map").join("\n");
        let names = public_names(&lib);
        assert!(
            names.len() > 30,
            "{krate}: too few public names read: {names:?}"
        );
        for name in names {
            let placed = [
                format!("[`{name}`]"),
                format!("[`macro@{name}`]"),
                format!("`#[{name}]`"),
                format!("`{name}` (feature"),
            ];
            assert!(
                placed.iter().any(|p| map.contains(p.as_str())),
                "{krate}'s crate page (lib.rs, `# Map`) does not place `{name}`"
            );
        }
    }
}

/// Each published crate's README (its registry page) says how to depend on it today, while
/// nothing is published (a path or Git dependency), and how once it is; never a registry
/// version requirement alone, which fails today (dlock-testkit's said `dlock-testkit = "0.1"`).
#[test]
fn the_crate_readmes_give_dependency_lines_that_work_today() {
    for krate in PUBLISHED {
        let path = format!("{krate}/README.md");
        let text = read(&path);
        assert!(
            !text.contains(&format!("{krate} = \"")),
            "{path} gives a registry version requirement, which fails while nothing is published"
        );
        assert!(
            text.contains("Nothing is published yet"),
            "{path} does not say that nothing is published yet"
        );
        let today = format!("{krate} = {{ path = \"../dlock/{krate}\" }}");
        let install = "cargo install --path dlock-cli";
        assert!(
            text.contains(&today) || text.contains(install) || krate == "dlock-macros",
            "{path} lacks the path dependency: {today}"
        );
        assert!(
            text.contains(&format!("cargo add {krate}"))
                || text.contains(&format!("cargo add --dev {krate}"))
                || text.contains(&format!("cargo install {krate}"))
                || krate == "dlock-macros",
            "{path} does not say how to add it once published"
        );
        let manifest = read(&format!("{krate}/Cargo.toml"));
        assert!(
            manifest.contains("readme = \"README.md\""),
            "{krate}/Cargo.toml does not name its README"
        );
    }
    // dlock-macros is used through the crates that re-export it: its README says so.
    let macros = read("dlock-macros/README.md");
    assert!(macros.contains("dlock-core = { path = \"../dlock/dlock-core\" }"));
    assert!(macros.contains("use dlock_core::{distributed_lock, rate_limited};"));
    // The README's own lines, and the features table.
    for line in [
        "dlock-core = { path = \"../dlock/dlock-core\" }",
        "cargo add dlock-core",
        "| `dlock-core` | `metrics` |",
        "| `dlock-scheduler` | `web` |",
    ] {
        assert!(README.contains(line), "README.md lacks: {line}");
    }
}

/// The lines of `doc` from the `heading` line to the next heading of its level or a higher
/// one (or the end).
fn section<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    let level = |line: &str| {
        let hashes = line.trim_start().chars().take_while(|c| *c == '#').count();
        (hashes > 0 && line.trim_start()[hashes..].starts_with(' ')).then_some(hashes)
    };
    let mine = level(heading).unwrap_or_default();
    let mut lines = doc.lines().skip_while(|line| *line != heading);
    let Some(first) = lines.next() else {
        panic!("no `{heading}` heading");
    };
    std::iter::once(first)
        .chain(lines.take_while(|line| level(line).is_none_or(|l| l > mine)))
        .collect()
}

/// The README links the benchmark report and its runs; the guide's benchmarks chapter holds
/// the summary and says how to run it.
#[test]
fn the_benchmarks_chapter_and_the_readme_point_to_the_report_and_the_runs() {
    assert!(
        README.contains("[`BENCHMARKS.md`](BENCHMARKS.md)"),
        "the README does not link BENCHMARKS.md"
    );
    assert!(
        README.contains("(docs/benchmarks/)"),
        "the README does not link docs/benchmarks/"
    );
    let chapter = read("dlock-core/guide/benchmarks.md");
    let section = section(&chapter, "# Benchmarks").join("\n");
    for wanted in ["`BENCHMARKS.md`", "`docs/benchmarks/`", "make bench"] {
        assert!(
            section.contains(wanted),
            "the guide's benchmarks chapter no longer says {wanted}:\n{section}"
        );
    }
}

/// A section's text with its line breaks and runs of spaces made single spaces, so that a
/// sentence is found however the paragraph is wrapped.
fn prose(doc: &str, heading: &str) -> String {
    section(doc, heading)
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The operator sections issue #28 changed (now guide chapters) say what now holds: the ACL
/// (the viewer reads no `TIME`, a refused password is `Authentication`), the CLI (its TLS,
/// password and Sentinel reach), metrics (series at zero, `lock="(none)"`, the `_total`
/// decision), secrets (only passwords are scrubbed), and the benchmark (checked above).
#[test]
fn the_operator_sections_say_what_changed_for_operators() {
    let wanted = [
        (
            "dlock-core/guide/production.md",
            "## Least privilege",
            vec![
                "the inspection scripts read no `TIME`",
                "is `ErrorKind::Authentication`, not `Permission`",
            ],
        ),
        (
            "dlock-core/guide/operating.md",
            "# The `dlock` command line",
            vec![
                "`DLOCK_REDIS_PASSWORD`",
                "`--sentinel NAME`",
                "`--tls-ca`, `--tls-cert`/`--tls-key`, `--tls-insecure`",
            ],
        ),
        (
            "dlock-core/guide/operating.md",
            "# Metrics",
            vec![
                "`lock=\"(none)\"` (never an empty label)",
                "are registered at zero, so a scrape lists them before any traffic",
                "`set_enable_unit_suffix(true)`",
                "dlock does not put one in the names",
            ],
        ),
        (
            "dlock-core/guide/production.md",
            "## Secrets",
            vec![
                "The CLI removes passwords, and only them",
                "a user name is not a secret, and tables and JSON are never rewritten",
            ],
        ),
    ];
    for (path, heading, lines) in wanted {
        let text = prose(&read(path), heading);
        for line in lines {
            assert!(
                text.contains(line),
                "{path} `{heading}` no longer says: {line}\n{text}"
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

/// The README's service: `#[distributed_lock]` on an axum handler answers a payment with the
/// lock's fencing token; behind `IdempotencyLayer`, a retry with the same `Idempotency-Key` gets
/// the stored answer (the same fencing token, marked as a replay) and a new key runs again; the
/// service stops cleanly on Ctrl-C (SIGINT).
#[test]
fn the_readme_service_pays_an_order_under_its_lock() {
    let server = redis();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_readme-orders"));
    cmd.env("DLOCK_REDIS_URL", server.url())
        .env("LISTEN", "127.0.0.1:0");
    let mut child = LineChild::spawn(cmd).unwrap();
    let address = child
        .wait_for("listening on http://", Duration::from_secs(30))
        .unwrap();
    let body = |answer: &str| answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    let first = post(&address, "/orders/42/pay", "Idempotency-Key: \"k1\"\r\n");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        body(&first).contains("charged order 42, fencing token "),
        "{first}"
    );
    let retry = post(&address, "/orders/42/pay", "Idempotency-Key: \"k1\"\r\n");
    assert!(retry.starts_with("HTTP/1.1 200"), "{retry}");
    assert!(
        retry
            .to_ascii_lowercase()
            .contains("idempotent-replayed: true"),
        "{retry}"
    );
    assert_eq!(
        body(&retry),
        body(&first),
        "the retry was not the stored answer"
    );
    let other = post(&address, "/orders/42/pay", "Idempotency-Key: \"k2\"\r\n");
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
    assert!(
        !other.to_ascii_lowercase().contains("idempotent-replayed"),
        "{other}"
    );
    assert_ne!(
        body(&other),
        body(&first),
        "a new key was answered from the record"
    );
    let pid = Pid::from_raw(i32::try_from(child.process().pid()).unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    let status = child
        .wait(Duration::from_secs(30))
        .expect("stops on Ctrl-C");
    assert!(status.success(), "{status}");
}

/// One HTTP/1.1 POST without a body to `address`, with `headers` (each ending in CRLF); the
/// whole answer (the server closes it).
fn post(address: &str, path: &str, headers: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The README's programs connect at start-up (issue #47: with the lazy `Client::open` the
/// service printed "listening" and failed only at the first request): given a URL where no
/// Redis listens, each exits with an error naming the address before it prints anything.
#[test]
fn the_readme_programs_fail_at_start_up_on_a_wrong_url() {
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    for binary in [
        env!("CARGO_BIN_EXE_readme-quickstart"),
        env!("CARGO_BIN_EXE_readme-orders"),
        env!("CARGO_BIN_EXE_readme-lottery-job"),
    ] {
        let mut cmd = Command::new(binary);
        cmd.env("DLOCK_REDIS_URL", &url)
            .env("LISTEN", "127.0.0.1:0")
            .stderr(std::process::Stdio::piped());
        let mut child = LineChild::spawn(cmd).unwrap();
        // A lazily connecting service would be serving now: it would not exit.
        let status = child
            .wait(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{binary} did not stop at start-up: {e}"));
        assert!(!status.success(), "{binary}: {status}");
        let printed = child.line(Duration::from_secs(5));
        assert!(
            printed.is_err(),
            "{binary} started before it had a connection: {printed:?}"
        );
        let mut stderr = String::new();
        let pipe = child.process_mut().child_mut().stderr.take();
        pipe.unwrap().read_to_string(&mut stderr).unwrap();
        assert!(
            stderr.contains(&format!("cannot connect to 127.0.0.1:{port}")),
            "{binary}: {stderr}"
        );
    }
}
