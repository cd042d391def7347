//! What the scheduler records: a panicking handler is `Failed` with its panic message (also
//! when the closure panics before returning its future).

use std::future::Ready;
use std::time::Duration;

use dlock_scheduler::{Job, JobContext, RunOutcome, RunRecord, Scheduler};

use crate::support::{client, eventually, redis};

fn panics_in_its_future(job: &str) -> Job {
    Job::new(job, "* * * * * *", "UTC", |ctx: JobContext| async move {
        if ctx.job() == "in-future" {
            panic!("boom {}", 40 + 2);
        }
        Ok::<(), String>(())
    })
    .unwrap()
}

/// A handler that panics while making its future, not inside it.
fn panics_before_its_future(ctx: JobContext) -> Ready<Result<(), String>> {
    if ctx.job() == "before-future" {
        panic!("no future for {}", ctx.job());
    }
    std::future::ready(Ok(()))
}

async fn first_end(scheduler: &Scheduler, job: &str) -> Option<RunRecord> {
    let history = scheduler.history(job).await.ok()?;
    history
        .into_iter()
        .find(|r| !matches!(r.outcome, RunOutcome::Running))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_recorded_failed_with_its_message() {
    let server = redis();
    let scheduler = Scheduler::builder(client(&server))
        .job(panics_in_its_future("in-future"))
        .job(
            Job::new(
                "before-future",
                "* * * * * *",
                "UTC",
                panics_before_its_future,
            )
            .unwrap(),
        )
        .build()
        .unwrap();
    let observer = scheduler.clone();
    let both_ended = async move {
        eventually(Duration::from_secs(20), "both jobs ran", || async {
            let a = first_end(&observer, "in-future").await?;
            let b = first_end(&observer, "before-future").await?;
            Some((a, b))
        })
        .await;
    };
    scheduler
        .run_until(both_ended, Duration::from_secs(5))
        .await;

    let in_future = first_end(&scheduler, "in-future").await.unwrap();
    assert_eq!(
        in_future.outcome,
        RunOutcome::Failed("the handler panicked: boom 42".into()),
        "{in_future:?}"
    );
    let before = first_end(&scheduler, "before-future").await.unwrap();
    assert_eq!(
        before.outcome,
        RunOutcome::Failed("the handler panicked: no future for before-future".into()),
        "{before:?}"
    );
}
