//! `job()` is visible exactly where the function is: `pub`, `pub(crate)`, `pub(super)`,
//! `pub(in path)` and private.
#![deny(warnings)]

pub mod jobs {
    pub mod daily {
        use dlock_scheduler::{JobContext, scheduled};

        /// Public: reachable from anywhere, like the function.
        #[scheduled(name = "public", cron = "0 3 * * *")]
        pub async fn public(ctx: JobContext) -> Result<(), String> {
            let _ = ctx;
            Ok(())
        }

        #[scheduled(name = "in-crate", cron = "0 4 * * *")]
        pub(crate) async fn in_crate() -> Result<(), String> {
            Ok(())
        }

        #[scheduled(name = "in-parent", cron = "0 5 * * *")]
        pub(super) async fn in_parent() -> Result<(), String> {
            Ok(())
        }

        #[scheduled(name = "in-jobs", cron = "0 6 * * *")]
        pub(in crate::jobs) async fn in_jobs() -> Result<(), String> {
            Ok(())
        }

        #[scheduled(name = "private", cron = "0 7 * * *")]
        async fn private() -> Result<(), String> {
            Ok(())
        }

        #[scheduled(name = "self", cron = "0 8 * * *")]
        pub(self) async fn in_self() -> Result<(), String> {
            Ok(())
        }

        pub(crate) fn local() -> [dlock_scheduler::Job; 2] {
            [private::job().unwrap(), in_self::job().unwrap()]
        }
    }

    pub(crate) fn from_parent() -> [dlock_scheduler::Job; 2] {
        [
            daily::in_parent::job().unwrap(),
            daily::in_jobs::job().unwrap(),
        ]
    }
}

fn main() {
    let mut names = vec![
        jobs::daily::public::job().unwrap(),
        jobs::daily::in_crate::job().unwrap(),
    ];
    names.extend(jobs::from_parent());
    names.extend(jobs::daily::local());
    let names: Vec<&str> = names.iter().map(|job| job.name()).collect();
    assert_eq!(
        names,
        [
            "public",
            "in-crate",
            "in-parent",
            "in-jobs",
            "private",
            "self"
        ]
    );
}
