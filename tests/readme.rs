//! The README's code compiles and runs as written: every `rust` block of README.md is one of
//! the programs in `examples/readme/src/bin/` (verbatim), and each runs against a real Redis.
//! One server only: the programs take one URL (`DLOCK_REDIS_URL`), and one is the scheduler's.

use std::process::Command;
use std::time::Duration;

use dlock_testkit::LineChild;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::redis;

const README: &str = include_str!("../README.md");
const PROGRAMS: [(&str, &str); 6] = [
    (
        "quickstart",
        include_str!("../examples/readme/src/bin/quickstart.rs"),
    ),
    ("pay", include_str!("../examples/readme/src/bin/pay.rs")),
    (
        "prices",
        include_str!("../examples/readme/src/bin/prices.rs"),
    ),
    (
        "exports",
        include_str!("../examples/readme/src/bin/exports.rs"),
    ),
    (
        "leader",
        include_str!("../examples/readme/src/bin/leader.rs"),
    ),
    (
        "lottery_job",
        include_str!("../examples/readme/src/bin/lottery_job.rs"),
    ),
];

/// The `rust` code blocks of the README.
fn rust_blocks() -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in README.lines() {
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

#[test]
fn every_readme_block_is_a_program_that_ci_builds() {
    let blocks = rust_blocks();
    assert!(!blocks.is_empty(), "the README shows code");
    for block in &blocks {
        assert!(
            PROGRAMS
                .iter()
                .any(|(_, source)| source.trim_end() == block.trim_end()),
            "a README block is not one of examples/readme/src/bin/*.rs (copy it there, \
             verbatim):\n{block}"
        );
    }
    for (name, source) in PROGRAMS {
        assert!(
            blocks.iter().any(|b| b.trim_end() == source.trim_end()),
            "examples/readme/src/bin/{name}.rs is not in the README (or differs from it)"
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
