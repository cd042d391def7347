//! Memory: what a held guard and a waiting task cost, client side (RSS growth) and in Redis
//! (`used_memory` growth).
//!
//! Each probe runs in a fresh child process (`dlock-bench mem guards|waiters`) so that the RSS of
//! the other workloads, and memory the allocator keeps from them, does not blur the figure:
//!
//! * **guards**: acquire 10,000 distinct locks and keep the guards (in a vector allocated
//!   beforehand, so its pages count as they are filled, as the guards' own inline size).
//! * **waiters**: a second client holds 100 locks; 10,000 tasks block in `acquire_timeout` on them
//!   (100 per lock). They are counted as waiting only once the Redis queues
//!   (`LLEN <prefix>{name}:queue`) hold all 10,000 entries and no task has finished.
//!
//! * **futures**: the size of each kind's acquire future (never polled), which every waiting task
//!   carries inline: mutex `acquire` / `acquire_timeout`, semaphore `acquire_timeout`, read-write
//!   lock `read_timeout` / `write_timeout` (issue #45: one wait loop must not grow them). Part of
//!   the waiters probe; alone with `dlock-bench mem futures --url URL`.
//!
//! Runtime: multi-thread, 2 worker threads (a typical server application). Both clients warm up
//! first (connection, scripts, and one contended hand-off for the waiters' code paths).
//!
//! Its section of the report: a table of both probes, and the memory targets.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use dlock_core::{Client, MutexGuard, MutexOptions};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::child::{Child, args, print_result};
use crate::cli::ChildArgs;
use crate::control::Control;
use crate::dlock::{Dlock, client};
use crate::report::{Check, Entry, Section, Target, checked};
use crate::rt::{BoxError, live_heap_bytes, multi_thread_runtime};
use crate::spec::{ACQUIRE_WAIT, Counts, TTL};
use crate::stats::{count, ratio};
use crate::subject::warm_up;
use crate::subjects::Setting;
use crate::table::table;

/// Waiters are started in batches of this many, each batch queued before the next starts.
const BATCH: u64 = 1_000;
/// How long one batch may take to be queued.
const BATCH_DEADLINE: Duration = Duration::from_secs(5);
/// Pause after the last waiter queued, before RSS is read (late allocations settle).
const SETTLE: Duration = Duration::from_millis(300);

/// Client and server memory of held guards.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct GuardsResult {
    pub(crate) guards: u64,
    pub(crate) rss_growth_bytes: u64,
    pub(crate) bytes_per_guard: f64,
    /// Heap growth per guard as allocated (allocator counts, no RSS noise).
    #[serde(default)]
    pub(crate) heap_bytes_per_guard: f64,
    /// `size_of::<MutexGuard>()`: the part of a guard that lives where the caller keeps it.
    pub(crate) guard_inline_bytes: usize,
    /// `used_memory` growth per held lock (lock key + fence key).
    pub(crate) redis_bytes_per_held_lock: f64,
    /// What is left per lock once all are released (the fence key, kept forever).
    pub(crate) redis_bytes_per_released_lock: f64,
}

/// Client and server memory of waiting tasks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WaitersResult {
    pub(crate) waiters: u64,
    pub(crate) held_locks: u64,
    /// Queue entries in Redis when RSS was read (must equal `waiters`).
    pub(crate) queued: u64,
    pub(crate) rss_growth_bytes: u64,
    pub(crate) bytes_per_waiter: f64,
    /// Heap growth per waiting task as allocated (its task, registration and queue entry, and
    /// its share of the connection's buffers).
    #[serde(default)]
    pub(crate) heap_bytes_per_waiter: f64,
    /// Size of the future each waiting task runs (`tokio::spawn` stores it in the task).
    pub(crate) task_future_bytes: usize,
    /// Size of the future returned by `Mutex::acquire_timeout` alone.
    pub(crate) acquire_future_bytes: usize,
    /// `used_memory` growth per waiter (its queue entry).
    pub(crate) redis_bytes_per_waiter: f64,
    /// Acquire-future bytes of every kind that queues.
    #[serde(default)]
    pub(crate) kinds: FutureSizes,
    /// Seconds from the first waiter's start to all queued.
    pub(crate) queueing_s: f64,
}

/// `size_of_val` of each kind's acquire future, as returned (never polled).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct FutureSizes {
    pub(crate) mutex_acquire: usize,
    pub(crate) mutex_acquire_timeout: usize,
    pub(crate) semaphore_acquire_timeout: usize,
    pub(crate) rwlock_read_timeout: usize,
    pub(crate) rwlock_write_timeout: usize,
}

impl FutureSizes {
    /// Measures them on handles of `client` (nothing is sent: the futures are never polled).
    fn measure(client: &Client) -> Result<Self, BoxError> {
        let options = || MutexOptions::new().ttl(TTL);
        let mutex = client.mutex_with("mem:size", options())?;
        let semaphore = client.semaphore_with("mem:size:sem", 4, options())?;
        let rw = client.rw_lock_with("mem:size:rw", options())?;
        Ok(Self {
            mutex_acquire: size_of_val(&mutex.acquire()),
            mutex_acquire_timeout: size_of_val(&mutex.acquire_timeout(ACQUIRE_WAIT)),
            semaphore_acquire_timeout: size_of_val(&semaphore.acquire_timeout(1, ACQUIRE_WAIT)),
            rwlock_read_timeout: size_of_val(&rw.read_timeout(ACQUIRE_WAIT)),
            rwlock_write_timeout: size_of_val(&rw.write_timeout(ACQUIRE_WAIT)),
        })
    }

    /// One line for the report.
    fn line(&self) -> String {
        let Self {
            mutex_acquire,
            mutex_acquire_timeout,
            semaphore_acquire_timeout,
            rwlock_read_timeout,
            rwlock_write_timeout,
        } = self;
        format!(
            "acquire futures: mutex `acquire` {mutex_acquire} B, `acquire_timeout` \
             {mutex_acquire_timeout} B; semaphore `acquire_timeout` {semaphore_acquire_timeout} B; \
             rwlock `read_timeout` {rwlock_read_timeout} B, `write_timeout` {rwlock_write_timeout} B"
        )
    }
}

/// Both memory probes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct MemoryResult {
    pub(crate) guards: GuardsResult,
    pub(crate) waiters: WaitersResult,
}

/// Runs both probes, each in a fresh child process, after a `FLUSHALL`.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let (url, counts) = (s.url.as_str(), &s.counts);
    let probe = |which: &str| -> Result<Child, BoxError> {
        let runtime = crate::rt::current_thread_runtime()?;
        runtime.block_on(Control::fresh(url))?;
        Child::spawn(&args("mem", url, counts, &[which]))
    };
    let guards = probe("guards")?.result()?;
    let waiters = probe("waiters")?.result()?;
    Entry::new("memory", MemoryResult { guards, waiters })
}

/// Entry point of `dlock-bench mem guards|waiters|futures --url URL`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let (url, counts) = (args.url.as_str(), &args.counts);
    let runtime = multi_thread_runtime()?;
    match args.probe()? {
        "guards" => print_result(&runtime.block_on(guards(url, counts))?),
        "waiters" => print_result(&runtime.block_on(waiters(url, counts))?),
        "futures" => {
            let sizes = runtime.block_on(async { FutureSizes::measure(&client(url)?) })?;
            println!("{}", sizes.line());
            print_result(&sizes)
        }
        other => {
            Err(format!("unknown memory probe `{other}`; use guards, waiters or futures").into())
        }
    }
}

/// Ten pairs on `mem:warm:{tag}:…`: connection and scripts ready before the baseline is read.
async fn warm(client: &Client, tag: &str) -> Result<(), BoxError> {
    warm_up(
        &Dlock::from(client.clone()),
        &format!("mem:warm:{tag}:"),
        0..10,
    )
    .await
}

async fn guards(url: &str, counts: &Counts) -> Result<GuardsResult, BoxError> {
    let mut control = Control::connect(url).await?;
    let client = client(url)?;
    warm(&client, "guards").await?;
    let n = counts.mem_guards;
    let mut held: Vec<MutexGuard> = Vec::with_capacity(usize::try_from(n)?);

    let rss_before = rss_bytes()?;
    let heap_before = live_heap_bytes();
    let redis_before = control.used_memory().await?;
    for i in 0..n {
        let lock = client.mutex_with(&format!("mem:held:{i}"), MutexOptions::new().ttl(TTL))?;
        held.push(lock.acquire_timeout(ACQUIRE_WAIT).await?);
    }
    let rss_after = rss_bytes()?;
    let heap_after = live_heap_bytes();
    let redis_held = control.used_memory().await?;

    for guard in held {
        guard.release().await?;
    }
    let redis_released = control.used_memory().await?;
    let growth = rss_after.saturating_sub(rss_before);
    Ok(GuardsResult {
        guards: n,
        rss_growth_bytes: growth,
        bytes_per_guard: ratio(growth, n),
        heap_bytes_per_guard: heap_per(heap_before, heap_after, n),
        guard_inline_bytes: size_of::<MutexGuard>(),
        redis_bytes_per_held_lock: ratio(redis_held.saturating_sub(redis_before), n),
        redis_bytes_per_released_lock: ratio(redis_released.saturating_sub(redis_before), n),
    })
}

/// One waiting task: blocks until it gets the lock (it never does while measured).
async fn wait_task(client: Client, name: String) -> Result<(), BoxError> {
    let lock = client.mutex_with(&name, MutexOptions::new().ttl(TTL))?;
    let guard = lock.acquire_timeout(ACQUIRE_WAIT).await?;
    guard.release().await?;
    Ok(())
}

async fn waiters(url: &str, counts: &Counts) -> Result<WaitersResult, BoxError> {
    let mut control = Control::connect(url).await?;
    let holder = client(url)?;
    let client = client(url)?;
    warm(&holder, "holder").await?;
    warm(&client, "waiter").await?;
    contended_warm_up(&holder, &client, &mut control).await?;

    let held_locks = counts.mem_held_locks;
    let mut held = Vec::new();
    for j in 0..held_locks {
        let lock = holder.mutex_with(&format!("mem:wait:{j}"), MutexOptions::new().ttl(TTL))?;
        held.push(lock.acquire_timeout(ACQUIRE_WAIT).await?);
    }
    let held_since = Instant::now();
    let queues: Vec<String> = (0..held_locks)
        .map(|j| queue_key(&client, &format!("mem:wait:{j}")))
        .collect();
    let sizes = future_sizes(&client)?;
    let n = counts.mem_waiters;
    let mut handles: Vec<JoinHandle<Result<(), BoxError>>> =
        Vec::with_capacity(usize::try_from(n)?);

    let rss_before = rss_bytes()?;
    let heap_before = live_heap_bytes();
    let redis_before = control.used_memory().await?;
    let started = Instant::now();
    while count(handles.len()) < n {
        let batch_end = (count(handles.len()) + BATCH).min(n);
        for i in count(handles.len())..batch_end {
            let name = format!("mem:wait:{}", i % held_locks);
            handles.push(tokio::spawn(wait_task(client.clone(), name)));
        }
        wait_until_queued(&mut control, &queues, batch_end, &handles).await?;
    }
    let queueing_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let queued = control.total_llen(&queues).await?;
    check_still_waiting(&handles, queued, n, held_since)?;
    let rss_after = rss_bytes()?;
    let heap_after = live_heap_bytes();
    let redis_after = control.used_memory().await?;

    for handle in &handles {
        handle.abort();
    }
    drop(held);
    let growth = rss_after.saturating_sub(rss_before);
    Ok(WaitersResult {
        waiters: n,
        held_locks,
        queued,
        rss_growth_bytes: growth,
        bytes_per_waiter: ratio(growth, n),
        heap_bytes_per_waiter: heap_per(heap_before, heap_after, n),
        task_future_bytes: sizes.0,
        acquire_future_bytes: sizes.1,
        redis_bytes_per_waiter: ratio(redis_after.saturating_sub(redis_before), n),
        kinds: FutureSizes::measure(&client)?,
        queueing_s,
    })
}

/// Sizes of a waiting task's future and of the `acquire_timeout` future inside it (never polled).
fn future_sizes(client: &Client) -> Result<(usize, usize), BoxError> {
    let task = wait_task(client.clone(), "mem:size".to_owned());
    let task_bytes = size_of_val(&task);
    drop(task);
    let lock = client.mutex_with("mem:size", MutexOptions::new().ttl(TTL))?;
    let acquire = lock.acquire_timeout(ACQUIRE_WAIT);
    let acquire_bytes = size_of_val(&acquire);
    drop(acquire);
    Ok((task_bytes, acquire_bytes))
}

/// One waiter queued behind a held lock and handed it on release, so that the subscription and
/// hand-off code paths have run once before the baseline is read.
async fn contended_warm_up(
    holder: &Client,
    client: &Client,
    control: &mut Control,
) -> Result<(), BoxError> {
    let name = "mem:warm:contended";
    let guard = holder
        .mutex_with(name, MutexOptions::new().ttl(TTL))?
        .acquire_timeout(ACQUIRE_WAIT)
        .await?;
    let waiter = tokio::spawn(wait_task(client.clone(), name.to_owned()));
    let queue = [queue_key(client, name)];
    wait_until_queued(control, &queue, 1, std::slice::from_ref(&waiter)).await?;
    guard.release().await?;
    waiter.await??;
    Ok(())
}

/// Polls the queues until they hold `expected` entries; fails if a waiter finished (it got a
/// lock or failed) or the batch takes longer than [`BATCH_DEADLINE`].
async fn wait_until_queued(
    control: &mut Control,
    queues: &[String],
    expected: u64,
    handles: &[JoinHandle<Result<(), BoxError>>],
) -> Result<(), BoxError> {
    let deadline = Instant::now() + BATCH_DEADLINE;
    loop {
        if handles.iter().any(JoinHandle::is_finished) {
            return Err("a waiting task finished before all waiters were queued".into());
        }
        let queued = control.total_llen(queues).await?;
        if queued >= expected {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {queued} of {expected} waiters queued after 5 s").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn check_still_waiting(
    handles: &[JoinHandle<Result<(), BoxError>>],
    queued: u64,
    expected: u64,
    held_since: Instant,
) -> Result<(), BoxError> {
    if queued != expected || handles.iter().any(JoinHandle::is_finished) {
        return Err(format!("{queued} of {expected} waiters queued at measurement").into());
    }
    if held_since.elapsed() >= TTL {
        return Err("the held locks' leases ran out before memory was measured".into());
    }
    Ok(())
}

/// The Redis queue key of lock `name` (layout documented in dlock-core's `key` module).
fn queue_key(client: &Client, name: &str) -> String {
    format!("{}{{{name}}}:queue", client.key_prefix())
}

/// Heap growth from `before` to `after`, per one of `n` items.
fn heap_per(before: i64, after: i64, n: u64) -> f64 {
    ratio(u64::try_from(after - before).unwrap_or(0), n)
}

/// Resident set size of this process, from `VmRSS` in `/proc/self/status`.
fn rss_bytes() -> Result<u64, BoxError> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("/proc/self/status has no VmRSS line")?;
    Ok(kb * 1024)
}

/// Issue #3's memory targets.
const CHECKS: [Check<MemoryResult>; 2] = [
    ("client memory per held guard", "< 1 KB", |m| {
        below(m.guards.bytes_per_guard, 1024.0)
    }),
    ("client memory per waiting task", "< 2 KB", |m| {
        below(m.waiters.bytes_per_waiter, 2048.0)
    }),
];

/// `bytes` as shown, and whether it is below `limit`.
fn below(bytes: f64, limit: f64) -> (String, bool) {
    (format!("{bytes:.0} B"), bytes < limit)
}

impl Section for MemoryResult {
    fn details(&self, out: &mut String) {
        let (g, w) = (&self.guards, &self.waiters);
        let _ = writeln!(out, "### Memory (fresh child process per probe)\n");
        let guards = vec![
            format!("held guard ({} guards)", g.guards),
            format!(
                "{:.0} B per guard ({} B inline; heap {:.0} B)",
                g.bytes_per_guard, g.guard_inline_bytes, g.heap_bytes_per_guard
            ),
            format!(
                "{:.0} B per held lock; {:.0} B left per released lock (fence key)",
                g.redis_bytes_per_held_lock, g.redis_bytes_per_released_lock
            ),
        ];
        let waiters = vec![
            format!(
                "waiting task ({} tasks on {} held locks, {} queued)",
                w.waiters, w.held_locks, w.queued
            ),
            format!(
                "{:.0} B per task (task future {} B, of which `acquire_timeout` {} B; heap {:.0} B)",
                w.bytes_per_waiter,
                w.task_future_bytes,
                w.acquire_future_bytes,
                w.heap_bytes_per_waiter
            ),
            format!("{:.0} B per queued waiter", w.redis_bytes_per_waiter),
        ];
        let header = ["", "client (RSS growth)", "Redis (`used_memory` growth)"];
        table(out, "lrr", &header, [guards, waiters]);
        let _ = writeln!(out, "\n{}", w.kinds.line());
    }

    fn targets(&self) -> Vec<Target> {
        checked(self, &CHECKS)
    }
}
