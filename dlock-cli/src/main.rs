//! `dlock`: who holds which lock, force a mutex open, and the scheduler's jobs, runs and
//! controls — against the Redis (or Redis Cluster) an application's dlock uses.
//!
//! Usage and exit codes: `dlock --help`, and `dlock-cli/README.md`.
//!
//! # Layout
//! | module | what |
//! |---|---|
//! | `cli` | the command line (`clap`) |
//! | `connect` | the URLs, TLS files, cluster and Sentinel, the clients; keeping passwords out of messages |
//! | `explain` | why connecting failed, in the operator's terms (certificates, credentials, not Redis) |
//! | `prompt` | the password asked for on the terminal when Redis wants one |
//! | `locks` | `locks`, `inspect`, `unlock` |
//! | `jobs` | `jobs`, `runs`, `pause`, `resume`, `run-now` |
//! | `once` | the one-off handlers of `jobs`, and `once` (pending one-off jobs) |
//! | `schedule` | `schedule add`, `remove`, `list` (run-time schedules) |
//! | `report`, `failure`, `table` | what a command hands back, exit codes, tables and times |

mod cli;
mod connect;
mod explain;
mod failure;
mod jobs;
mod locks;
mod once;
mod prompt;
mod report;
mod schedule;
mod table;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, ScheduleAction};
use crate::connect::{Secrets, Target};
use crate::failure::Failure;
use crate::jobs::Action;
use crate::report::Report;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2. clap's
            // messages name the arguments, never the values of `--url` (hidden).
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let password = std::env::var(failure::PASSWORD_VAR)
        .ok()
        .filter(|p| !p.is_empty());
    let secrets = Secrets::of(&cli.global.url, password.as_deref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let outcome = match runtime {
        Ok(runtime) => runtime.block_on(run(&cli, password)),
        Err(e) => Err(Failure::error(format!("cannot start the runtime: {e}"))),
    };
    let exit = match outcome {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            // The data as it is: only messages are scrubbed (a lock name, a prefix or a label
            // may contain the user's name, or any word).
            let _ = out.write_all(report.stdout.as_bytes());
            let _ = out.flush();
            let mut err = std::io::stderr().lock();
            for note in &report.notes {
                let _ = writeln!(err, "dlock: {}", one_line(&secrets.scrub(note)));
            }
            report.exit
        }
        Err(failure) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "dlock: error: {}",
                one_line(&secrets.scrub(&failure.message))
            );
            failure.exit
        }
    };
    ExitCode::from(exit.code())
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs the command; every Redis request is bounded by `--timeout`.
async fn run(cli: &Cli, password: Option<String>) -> Result<Report, Failure> {
    let global = &cli.global;
    let target = Target::resolve(global, password)?;
    let client = target.client().await?;
    let json = global.json;
    match &cli.command {
        Command::Locks { pattern } => locks::locks(&client, pattern.as_deref(), json).await,
        Command::Inspect { name, kind } => locks::inspect(&client, name, *kind, json).await,
        Command::Unlock {
            name, ask: true, ..
        } => locks::ask(&client, name, json).await,
        Command::Unlock { name, yes, .. } => locks::unlock(&client, name, *yes, json).await,
        Command::Jobs => jobs::jobs(&Target::admin(&client)?, json, global.utc).await,
        Command::Once { handler, limit } => {
            let limit = usize::try_from(*limit).unwrap_or(usize::MAX);
            once::once(&Target::admin(&client)?, handler.as_deref(), limit, json).await
        }
        Command::Schedule { action } => {
            let admin = Target::admin(&client)?;
            match action {
                ScheduleAction::Add {
                    name,
                    handler,
                    cron,
                    tz,
                    args,
                } => {
                    let new = schedule::NewSchedule {
                        name,
                        handler,
                        cron,
                        tz,
                        args: args.as_deref(),
                    };
                    schedule::add(&admin, &new, json).await
                }
                ScheduleAction::Remove { name } => schedule::remove(&admin, name, json).await,
                ScheduleAction::List => schedule::list(&admin, json).await,
            }
        }
        Command::Runs { job, limit } => {
            let limit = usize::try_from(*limit).unwrap_or(usize::MAX);
            jobs::runs(&Target::admin(&client)?, job, limit, json, global.utc).await
        }
        Command::Pause { job, force } => control(&client, job, Action::Pause, *force, json).await,
        Command::Resume { job, force } => control(&client, job, Action::Resume, *force, json).await,
        Command::RunNow { job, force } => control(&client, job, Action::RunNow, *force, json).await,
    }
}

async fn control(
    client: &dlock_core::Client,
    job: &str,
    action: Action,
    force: bool,
    json: bool,
) -> Result<Report, Failure> {
    jobs::control(&Target::admin(client)?, job, action, force, json).await
}
