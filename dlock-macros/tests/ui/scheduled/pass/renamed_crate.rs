//! `crate = "…"` when dlock-scheduler is renamed or re-exported: a crate name, a `crate::`
//! path, and a `self::` path (rewritten, since the generated module is one level deeper).
//! `unused_qualifications` must not flag the generated paths, which start with those.
#![deny(warnings, unused_qualifications)]

extern crate dlock_scheduler as my_scheduler;

mod deps {
    pub use dlock_scheduler as sched;
}

use my_scheduler::scheduled;

#[scheduled(name = "renamed", cron = "* * * * *", crate = "my_scheduler")]
async fn renamed(ctx: my_scheduler::JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

#[scheduled(name = "reexported", cron = "* * * * *", crate = "crate::deps::sched")]
async fn reexported() -> Result<(), String> {
    Ok(())
}

#[scheduled(name = "relative", cron = "* * * * *", crate = "self::deps::sched")]
async fn relative() -> Result<(), String> {
    Ok(())
}

mod nested {
    use crate::my_scheduler::scheduled;

    #[scheduled(name = "nested", cron = "* * * * *", crate = "super::deps::sched")]
    pub(crate) async fn nested() -> Result<(), String> {
        Ok(())
    }
}

fn main() {
    assert_eq!(renamed::job().unwrap().name(), "renamed");
    assert_eq!(reexported::job().unwrap().name(), "reexported");
    assert_eq!(relative::job().unwrap().name(), "relative");
    assert_eq!(nested::nested::job().unwrap().name(), "nested");
}
