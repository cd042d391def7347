//! How late this machine wakes a Tokio timer, for the tests whose subject is a deadline (a
//! lease that must be renewed in time). Such a test cannot tell a lease that is too short from
//! a machine too busy to run the renewal on time unless it measures the second: it probes the
//! delay first, fails naming it when it is above the test's stated bound (the machine, not
//! dlock, is then what the test would measure), and names it in its own failure otherwise.
//!
//! The probe runs on the test's runtime, beside the tasks under test: a few tasks sleep a short
//! tick over and over and record how much later than asked each wake-up came (the runtime's
//! queue, the OS scheduler and the timer wheel's 1 ms granularity together).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use tokio::task::JoinHandle;

/// Probe tasks at once: more than the test runtime's 2 workers, so a busy worker shows.
const PROBES: usize = 4;
/// One sleep of a probe: short, so that a stall anywhere in the window is seen.
const TICK: Duration = Duration::from_millis(5);

/// The wake-up lateness (or the round trips, [`Probe::start_pinging`]) seen over one window.
#[derive(Clone, Copy)]
pub(crate) struct SchedDelay {
    what: &'static str,
    pub(crate) p99: Duration,
    pub(crate) max: Duration,
    pub(crate) samples: usize,
    pub(crate) window: Duration,
}

impl fmt::Display for SchedDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} up to {:?} (p99 {:?}, {} samples over {:?})",
            self.what, self.max, self.p99, self.samples, self.window
        )
    }
}

/// Measures the wake-up lateness of `TICK` sleeps on the current runtime for `window`.
pub(crate) async fn measure(window: Duration) -> SchedDelay {
    let probe = Probe::start();
    tokio::time::sleep(window).await;
    probe.stop().await
}

/// Probe tasks running in the background until [`Probe::stop`], for a window whose length is
/// not known in advance (a hold and the releases after it).
pub(crate) struct Probe {
    what: &'static str,
    stop: Arc<AtomicBool>,
    started: Instant,
    tasks: Vec<JoinHandle<Vec<Duration>>>,
}

impl Probe {
    /// Starts the probe tasks on the current runtime: each sleeps `TICK` over and over and
    /// records how late it woke.
    pub(crate) fn start() -> Self {
        Self::spawn("timers woke late by", || async {
            let asked = Instant::now();
            tokio::time::sleep(TICK).await;
            asked.elapsed().saturating_sub(TICK)
        })
    }

    /// Starts probe tasks that each send `PING` on `con` every `TICK` and record its round
    /// trip: what a renewal needs besides a timely wake-up is a server that gets the CPU too.
    pub(crate) fn start_pinging<C>(con: C) -> Self
    where
        C: ConnectionLike + Clone + Send + 'static,
    {
        Self::spawn("PINGs took", move || {
            let mut con = con.clone();
            async move {
                let sent = Instant::now();
                let _: redis::Value = redis::cmd("PING")
                    .query_async(&mut con)
                    .await
                    .expect("PING");
                let took = sent.elapsed();
                tokio::time::sleep(TICK).await;
                took
            }
        })
    }

    /// `PROBES` tasks, each running `sample` until stopped and keeping what it returns.
    fn spawn<F, Fut>(what: &'static str, sample: F) -> Self
    where
        F: Fn() -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Duration> + Send,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..PROBES)
            .map(|_| {
                let stop = Arc::clone(&stop);
                let sample = sample.clone();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    // At least one sample each, so a window is never empty.
                    loop {
                        seen.push(sample().await);
                        if stop.load(Ordering::Relaxed) {
                            return seen;
                        }
                    }
                })
            })
            .collect();
        Self {
            what,
            stop,
            started: Instant::now(),
            tasks,
        }
    }

    /// Stops the probe tasks and sums up what they saw since they started.
    pub(crate) async fn stop(self) -> SchedDelay {
        let window = self.started.elapsed();
        self.stop.store(true, Ordering::Relaxed);
        let mut late = Vec::new();
        for task in self.tasks {
            late.extend(task.await.expect("probe task"));
        }
        late.sort_unstable();
        // Every probe took at least one sample, so `late` is not empty.
        let last = late.len() - 1;
        SchedDelay {
            what: self.what,
            p99: late[last * 99 / 100],
            max: late[last],
            samples: late.len(),
            window,
        }
    }
}

/// How long [`assert_on_time`] measures once a deadline was missed.
pub(crate) const AFTER_MISS: Duration = Duration::from_millis(500);

/// Asserts `on_time` (a wall-time bound held); when it did not hold, fails with `what` and the
/// scheduling delay measured right after, so that a loaded machine is told from a slow path.
/// Costs nothing when the bound held.
pub(crate) async fn assert_on_time(on_time: bool, what: impl FnOnce() -> String) {
    if !on_time {
        let delay = measure(AFTER_MISS).await;
        panic!(
            "{}; measured right after: {delay} (a machine this busy may explain it)",
            what()
        );
    }
}
