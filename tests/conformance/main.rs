//! Conformance of the shipped Lua scripts to the protocol model (`dlock-model`), issues 27 and
//! 44: random operation sequences run against a real `redis-server` (the scripts called by hand
//! through `dlock_core::__private::conformance`) and the model in lockstep, compared after every
//! protocol step. A difference fails with the shrunk sequence as a numbered list.
//!
//! Run: `cargo test -p dlock-tests --test conformance -- --nocapture` (prints the counts and
//! every reply path of every script with how often the run reached it, `coverage.rs`).
//! `DLOCK_CONFORMANCE_CASES=n` sets the number of sequences (default 128, of up to 30 steps),
//! `DLOCK_CONFORMANCE_SEED=n|random` the seed they are drawn from (default 27: the same
//! sequences every run).
//! `DLOCK_MUTANT=<name>|all` loads the scripts with a protocol bug instead (`mutants.rs`) and
//! passes only if the default run catches it (`make model-mutants`: `lua mutants: caught N of
//! M`).
//! Before the sequences, fixed cases: fenced.lua's comparison on token pairs (`fenced.rs`), the
//! release request's scenarios (`ask.rs`), the rate limiter's (`rate.rs`), the quorum fence's
//! on three servers (`quorum.rs`), the hard states of every kind (`scenarios.rs`) and another
//! program's data (`foreign.rs`).

#![allow(
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod ask;
mod bursts;
mod coverage;
mod driver;
mod fenced;
mod foreign;
mod mutants;
mod quorum;
mod rate;
mod redis_side;
mod replies;
mod scenarios;
mod scheduler;
mod steps;

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::time::Instant;

use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use crate::driver::Case;
use crate::mutants::Mutant;
use crate::redis_side::Real;
use crate::steps::{Sequence, sequence};

/// The longest sequence generated.
const MAX_STEPS: usize = 30;
/// The sequences of the default run (`make test`).
const DEFAULT_CASES: u32 = 128;

/// Runs one sequence on `real`; the step it failed at and why.
fn run(real: &mut Real, seq: &[steps::Step]) -> Result<usize, String> {
    let mut case = Case::start(real)?;
    for (i, step) in seq.iter().enumerate() {
        case.step(step)
            .map_err(|e| format!("at step {} ({step:?}): {e}", i + 1))?;
    }
    Ok(case.ops)
}

/// Runs the sequences against the scripts with `mutant` applied (`None`: as shipped). `Ok`
/// with the counts, or the shrunk failing sequence and what differed.
///
/// With a mutant, a sequence counts as caught only if the shipped scripts pass it: one that
/// fails on both shows a difference of the shipped scripts, not the mutant's (and shrinking
/// must not wander off to it).
fn check(
    mutant: Option<Mutant>,
    cases: u32,
    seed: u64,
) -> Result<(Counts, Option<String>), String> {
    // The scheduler's scripts (scheduler.rs), first: a scheduler mutant is caught before the
    // lock scripts' sequences run; a mutant of a lock script leaves them as shipped.
    let sched = match mutant {
        Some(m) if !m.touches_scheduler() => None,
        _ => Some(scheduler_part(mutant, cases, seed)?),
    };
    let real = RefCell::new(Real::start(mutant)?);
    if mutant.is_none() {
        real.borrow_mut().coverage = Some(coverage::Tally::new()?);
    }
    let shipped = match mutant {
        Some(_) => Some(RefCell::new(Real::start(None)?)),
        None => None,
    };
    // fenced.lua's comparison for tokens beyond the fences a sequence meets (fenced.rs).
    let pairs = fixed(&real, &shipped, "fenced.lua's token pairs", fenced::pairs)?;
    // The release request's scenarios, whatever the sequences draw (ask.rs).
    let asks = fixed(&real, &shipped, "the release request's scenarios", ask::run)?;
    // The rate limiter's scenarios and sequence (rate.rs).
    let rates = fixed(&real, &shipped, "rate.lua's scenarios", |r| {
        rate::run(r).map(|seen| seen.calls)
    })?;
    // The quorum's round 2 on three servers: its scenarios and walks (quorum.rs).
    let quorum = fixed(&real, &shipped, "the quorum fence", |r| {
        quorum::run(r).map(|seen| seen.steps)
    })?;
    // The hard states, for every kind (scenarios.rs); another program's data (foreign.rs).
    let scenarios = fixed(&real, &shipped, "the fixed scenarios", scenarios::run)?
        + fixed(&real, &shipped, "another program's data", foreign::run)?;
    real.borrow_mut().count_as(coverage::Phase::Sequences);
    let (scheduler, sched_report) = sched.unwrap_or_default();
    let counts = Cell::new(Counts {
        pairs,
        asks,
        rates,
        quorum,
        scenarios,
        scheduler,
        ..Counts::default()
    });
    let mut runner = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 1_000,
        // Each shrink runs a sequence on the server: bound the time, not only the count.
        max_shrink_time: 60_000,
        ..Config::default()
    });
    let result = runner.run(&sequence(MAX_STEPS), |Sequence(seq)| {
        let mut c = counts.get();
        c.sequences += 1;
        c.steps += seq.len();
        counts.set(c);
        match run(&mut real.borrow_mut(), &seq) {
            Ok(ops) => {
                c.ops += ops;
                counts.set(c);
                Ok(())
            }
            Err(why) => {
                if let Some(shipped) = &shipped
                    && run(&mut shipped.borrow_mut(), &seq).is_err()
                {
                    c.shipped_differ += 1;
                    counts.set(c);
                    return Ok(());
                }
                Err(TestCaseError::fail(why))
            }
        }
    });
    match result {
        Ok(()) => {
            // Fewer sequences than the default (a quick run) may miss paths: printed only.
            let strict = cases >= DEFAULT_CASES;
            native_reached(&real.borrow(), strict && mutant.is_none())?;
            let report = real
                .borrow_mut()
                .coverage
                .take()
                .map(|tally| tally.report(strict, cases >= 1_024));
            match report {
                Some((report, failed)) if !failed.is_empty() => Err(format!(
                    "{report}\nthe default run must reach every reply path:\n  {}",
                    failed.join("\n  ")
                )),
                report => Ok((
                    counts.get(),
                    report.map(|(r, _)| r).map(|r| match &sched_report {
                        Some(sched) => format!("{r}\n{sched}"),
                        None => r,
                    }),
                )),
            }
        }
        Err(TestError::Fail(why, seq)) => Err(format!(
            "the scripts and the model differ (DLOCK_CONFORMANCE_SEED={seed} reproduces \
             it).\nshrunk sequence:{seq:?}\n{why}"
        )),
        Err(TestError::Abort(why)) => Err(format!("aborted: {why}")),
    }
}

/// The native release step (`DELIFEQ`, issue #48): on a server with the command, says how
/// often the sequences reached each of its outcomes (1; or 0 and what release.lua answered
/// next), and (`strict`) fails unless each one the client must handle was reached — released
/// by `DELIFEQ`, and after a 0: handed to a waiter, found expired, found held by another. On a
/// server without it, says that the step was skipped, by name.
fn native_reached(real: &Real, strict: bool) -> Result<(), String> {
    if !real.has_native() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED the native release step (DELIFEQ, Op::NativeRelease): this server has no \
             such command (COMMAND INFO DELIFEQ); Valkey 9 has it"
        );
        return Ok(());
    }
    let seen: Vec<String> = real
        .native_outcomes
        .iter()
        .map(|(what, n)| format!("{what}: {n}"))
        .collect();
    let _ = writeln!(
        std::io::stderr(),
        "native release (DELIFEQ, then release.lua after a 0): {}",
        seen.join(", ")
    );
    let missed: Vec<&str> = redis_side::NATIVE_OUTCOMES
        .iter()
        .copied()
        .filter(|what| !real.native_outcomes.contains_key(what))
        .collect();
    if strict && !missed.is_empty() {
        return Err(format!(
            "the default run must reach every outcome of the native release; not reached: {}",
            missed.join(", ")
        ));
    }
    Ok(())
}

/// The scheduler's walks (scheduler.rs) on the scripts with `mutant` applied, as a fixed part
/// of the run: with a mutant, a difference counts only if the shipped scripts pass the same
/// walks. Without one, the paths are counted and every path must be reached or named
/// (`scheduler/coverage.rs`). The counts and the coverage report.
fn scheduler_part(
    mutant: Option<Mutant>,
    cases: u32,
    seed: u64,
) -> Result<(scheduler::Counts, Option<String>), String> {
    let started = Instant::now();
    // Walks per start: a quarter of the sequences (32 in the default run).
    let walks = (cases / 4).max(1) as usize;
    match scheduler::run(mutant, walks, seed, mutant.is_none()) {
        Ok((mut counts, report)) => {
            counts.seconds = started.elapsed().as_secs_f64();
            let Some((report, failed)) = report else {
                return Ok((counts, None));
            };
            if cases >= DEFAULT_CASES && !failed.is_empty() {
                return Err(format!(
                    "{report}\nthe scheduler's walks must reach every reply path not named in \
                     scheduler/coverage.rs:\n  {}",
                    failed.join("\n  ")
                ));
            }
            Ok((counts, Some(report)))
        }
        Err(why) => {
            if mutant.is_some() {
                scheduler::run(None, walks, seed, false).map_err(|e| {
                    format!("the shipped scripts fail the scheduler's walks too: {e}")
                })?;
            }
            Err(format!(
                "the scheduler's scripts and the model differ: {why}"
            ))
        }
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    sequences: u32,
    steps: usize,
    ops: usize,
    /// Sequences (with a mutant) that the shipped scripts fail too.
    shipped_differ: u32,
    /// fenced.lua's token pairs checked (fenced.rs).
    pairs: usize,
    /// The release request's scenarios run (ask.rs).
    asks: usize,
    /// rate.lua's calls compared (rate.rs).
    rates: usize,
    /// The quorum fence's steps compared on three servers (quorum.rs).
    quorum: usize,
    /// The fixed scenarios run (scenarios.rs, foreign.rs).
    scenarios: usize,
    /// The scheduler's walks (scheduler.rs).
    scheduler: scheduler::Counts,
}

/// Runs a part of the fixed checks on `real`; with a mutant, a failure counts only if the
/// shipped scripts (`shipped`) pass the same part.
fn fixed<T>(
    real: &RefCell<Real>,
    shipped: &Option<RefCell<Real>>,
    what: &str,
    part: impl Fn(&mut Real) -> Result<T, String>,
) -> Result<T, String> {
    match part(&mut real.borrow_mut()) {
        Ok(done) => Ok(done),
        Err(why) => {
            if let Some(shipped) = shipped {
                part(&mut shipped.borrow_mut())
                    .map_err(|e| format!("the shipped scripts fail {what} too: {e}"))?;
            }
            Err(format!("{what}: the scripts and the model differ: {why}"))
        }
    }
}

/// The sequences are drawn from a fixed seed, so that `make test` runs the same ones every
/// time; `DLOCK_CONFORMANCE_SEED=<n>` picks another, `random` a new one (printed).
fn seed() -> u64 {
    match std::env::var("DLOCK_CONFORMANCE_SEED").ok().as_deref() {
        None | Some("") => 27,
        Some("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(27, |d| d.as_nanos() as u64),
        Some(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("DLOCK_CONFORMANCE_SEED={n}: a number, or random")),
    }
}

/// `DLOCK_CONFORMANCE_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("DLOCK_CONFORMANCE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

#[test]
fn the_scripts_conform_to_the_model() {
    let started = Instant::now();
    let seed = seed();
    match std::env::var("DLOCK_MUTANT").ok().as_deref() {
        None | Some("") => match check(None, cases(DEFAULT_CASES), seed) {
            // Written to the process's stderr directly, which the test harness does not
            // capture: `make test` shows what was checked.
            Ok((c, report)) => {
                if let Some(report) = report {
                    let _ = writeln!(std::io::stderr(), "{report}");
                }
                let _ = writeln!(
                    std::io::stderr(),
                    "conformance: {} sequences (seed {seed}), {} steps ({} protocol steps), \
                     {} fenced.lua token pairs, {} release request scenarios, {} fixed \
                     scenarios, {} rate.lua calls and {} quorum fence steps (three servers) \
                     matched the model in {:.1} s; the scheduler's scripts: {} walks, {} model \
                     steps, {} script calls in {:.1} s",
                    c.sequences,
                    c.steps,
                    c.ops,
                    c.pairs,
                    c.asks,
                    c.scenarios,
                    c.rates,
                    c.quorum,
                    started.elapsed().as_secs_f64(),
                    c.scheduler.walks,
                    c.scheduler.steps,
                    c.scheduler.calls,
                    c.scheduler.seconds,
                );
            }
            Err(why) => panic!("{why}"),
        },
        Some(wanted) => {
            let mutants: Vec<Mutant> = if wanted == "all" {
                mutants::all().collect()
            } else {
                vec![Mutant::named(wanted).unwrap_or_else(|| {
                    let names: Vec<&str> = mutants::all().map(|m| m.name).collect();
                    panic!("DLOCK_MUTANT={wanted}: no such mutant; one of {names:?} or all")
                })]
            };
            mutation_check(&mutants, seed);
        }
    }
}

/// Runs the default run (its fixed cases and sequences: what `make test` runs) against each of
/// `mutants` and fails unless every one is caught: `lua mutants: caught N of M`.
fn mutation_check(mutants: &[Mutant], seed: u64) {
    let mut missed = Vec::new();
    let mut stale = Vec::new();
    for mutant in mutants {
        // A mutant whose text is in no script any more would make the server fail to start,
        // which must not count as caught.
        if let Err(why) = mutant.applies() {
            eprintln!("{why}");
            stale.push(mutant.name);
            continue;
        }
        match check(Some(*mutant), cases(DEFAULT_CASES), seed) {
            Ok((c, _)) => {
                eprintln!(
                    "mutant {}: NOT caught in {} sequences ({}; {} of them differ on the shipped \
                     scripts too)",
                    mutant.name, c.sequences, mutant.what, c.shipped_differ
                );
                missed.push(mutant.name);
            }
            Err(why) => {
                // The first line says which part caught it: a fixed case, or the sequences.
                let first = why.lines().next().unwrap_or("");
                let by: String = first.chars().take(160).collect();
                eprintln!(
                    "mutant {}: caught ({})\n    by: {by}",
                    mutant.name, mutant.what
                );
            }
        }
    }
    let caught = mutants.len() - missed.len() - stale.len();
    eprintln!("lua mutants: caught {caught} of {}", mutants.len());
    assert!(
        stale.is_empty(),
        "mutants that change no script (update tests/conformance/mutants.rs): {stale:?}"
    );
    assert!(missed.is_empty(), "mutants not caught: {missed:?}");
}

/// Every mutant of the mutation check still changes a shipped script: one whose text a later
/// edit removed would make its run fail to start, which `DLOCK_MUTANT=all` refuses, and this
/// says so in `make test` already.
#[test]
fn every_mutant_changes_a_shipped_script() {
    let stale: Vec<String> = mutants::all()
        .filter_map(|mutant| mutant.applies().err())
        .collect();
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}
