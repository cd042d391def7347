//! `dlock locks`, `dlock inspect` and `dlock unlock`: who holds what, and opening a mutex by
//! force (confirmed by the operator, handed to the next waiter).

use std::io::IsTerminal;

use dlock_core::{Client, HeldLock, HolderInfo, SharedHolder};
use serde::Serialize;

use crate::cli::KindArg;
use crate::failure::{Exit, Failure};
use crate::report::Report;
use crate::table::{Table, human_duration, millis};

/// What the table and JSON say of a lock's start: dlock stores no acquisition time.
const SINCE_UNRECORDED: &str = "not recorded";

/// A held lock in `--json` output.
#[derive(Debug, Serialize)]
struct LockJson {
    name: String,
    /// `mutex`, `semaphore` or `rw_lock`.
    kind: &'static str,
    /// A semaphore's limit; `null` for the other kinds.
    limit: Option<u32>,
    waiters: usize,
    /// When the lock was taken: always `null`, dlock does not record it.
    since: Option<String>,
    holders: Vec<HolderJson>,
}

/// One holder of a lock in `--json` output.
#[derive(Debug, Serialize)]
struct HolderJson {
    host: String,
    pid: u32,
    label: Option<String>,
    /// `exclusive` (a mutex), `permits` (a semaphore), `read` or `write` (a read-write lock).
    mode: &'static str,
    permits: u32,
    /// What is left of the lease, by the server, in milliseconds.
    ttl_ms: u64,
    /// The hold's fencing token; `null` while none was issued (a mutex's fence is issued on
    /// demand).
    fencing_token: Option<u64>,
}

impl HolderJson {
    fn mutex(h: &HolderInfo) -> Self {
        Self {
            host: h.host.clone(),
            pid: h.pid,
            label: h.label.clone(),
            mode: "exclusive",
            permits: 1,
            ttl_ms: millis(h.remaining),
            fencing_token: h.fencing_token.map(|f| f.get()),
        }
    }

    fn shared(h: &SharedHolder, mode: &'static str) -> Self {
        Self {
            host: h.host.clone(),
            pid: h.pid,
            label: h.label.clone(),
            mode,
            permits: h.permits,
            ttl_ms: millis(h.remaining),
            fencing_token: Some(h.fencing_token.get()),
        }
    }
}

fn to_json(lock: &HeldLock) -> LockJson {
    let name = lock.name().to_owned();
    let since = None;
    match lock {
        HeldLock::Mutex { holder, .. } => LockJson {
            name,
            kind: "mutex",
            limit: None,
            waiters: holder.waiters,
            since,
            holders: vec![HolderJson::mutex(holder)],
        },
        HeldLock::Semaphore { info, .. } => LockJson {
            name,
            kind: "semaphore",
            limit: Some(info.limit),
            waiters: info.waiters,
            since,
            holders: info
                .holders
                .iter()
                .map(|h| HolderJson::shared(h, "permits"))
                .collect(),
        },
        HeldLock::RwLock { info, .. } => LockJson {
            name,
            kind: "rw_lock",
            limit: None,
            waiters: info.waiters,
            since,
            holders: info
                .writer
                .iter()
                .map(|h| HolderJson::shared(h, "write"))
                .chain(info.readers.iter().map(|h| HolderJson::shared(h, "read")))
                .collect(),
        },
        // A kind this version of dlock-cli does not know: shown without holders.
        _ => LockJson {
            name,
            kind: "unknown",
            limit: None,
            waiters: 0,
            since,
            holders: Vec::new(),
        },
    }
}

/// The lock table: one row per holder.
fn table(locks: &[LockJson]) -> String {
    let mut t = Table::new(&[
        "NAME", "KIND", "HOST", "PID", "LABEL", "SINCE", "TTL", "FENCE", "WAITERS",
    ]);
    for lock in locks {
        for h in &lock.holders {
            let kind = match (lock.kind, lock.limit) {
                ("semaphore", Some(limit)) => format!("semaphore {}/{limit}", h.permits),
                ("rw_lock", _) => format!("rw-lock {}", h.mode),
                (kind, _) => kind.to_owned(),
            };
            t.row(vec![
                lock.name.clone(),
                kind,
                h.host.clone(),
                h.pid.to_string(),
                h.label.clone().unwrap_or_else(|| "-".into()),
                SINCE_UNRECORDED.to_owned(),
                human_duration(std::time::Duration::from_millis(h.ttl_ms)),
                h.fencing_token
                    .map_or_else(|| "-".into(), |f| f.to_string()),
                lock.waiters.to_string(),
            ]);
        }
    }
    t.render()
}

/// `dlock locks [PATTERN]`.
///
/// # Errors
/// A bad pattern (usage); Redis unreachable or erring.
pub(crate) async fn locks(
    client: &Client,
    pattern: Option<&str>,
    json: bool,
) -> Result<Report, Failure> {
    let found = client.held_locks(pattern).await?;
    let locks: Vec<LockJson> = found.locks.iter().map(to_json).collect();
    let mut report = if json {
        #[derive(Serialize)]
        struct Listing<'a> {
            prefix: &'a str,
            locks: &'a [LockJson],
            foreign_keys: &'a [String],
        }
        Report::json(&Listing {
            prefix: client.key_prefix(),
            locks: &locks,
            foreign_keys: &found.foreign,
        })?
    } else if locks.is_empty() {
        Report::new(String::new())
    } else {
        Report::new(table(&locks))
    };
    if !found.foreign.is_empty() {
        let shown: Vec<_> = found.foreign.iter().take(5).map(String::as_str).collect();
        let more = found.foreign.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        report = report.note(format!(
            "skipped {} key(s) shaped like lock keys that dlock did not write: {}{more}",
            found.foreign.len(),
            shown.join(", ")
        ));
    }
    if locks.is_empty() {
        let what = pattern.map_or_else(String::new, |p| format!(" matching `{p}`"));
        report = report
            .note(format!(
                "no lock{what} is held under the prefix `{}`",
                client.key_prefix()
            ))
            .exit(Exit::NotFound);
    }
    Ok(report)
}

/// `dlock inspect NAME [--kind …]`.
///
/// # Errors
/// A bad name (usage); Redis unreachable or erring; data dlock did not write at the key.
pub(crate) async fn inspect(
    client: &Client,
    name: &str,
    kind: KindArg,
    json: bool,
) -> Result<Report, Failure> {
    let mut held = Vec::new();
    let wants = |k: KindArg| kind == KindArg::Any || kind == k;
    if wants(KindArg::Mutex)
        && let Some(holder) = client.inspect(name).await?
    {
        held.push(to_json(&mutex_lock(name, holder)));
    }
    if wants(KindArg::Semaphore)
        && let Some(info) = client.inspect_semaphore(name).await?
    {
        held.push(to_json(&HeldLock::Semaphore {
            name: name.to_owned(),
            info,
        }));
    }
    if wants(KindArg::RwLock)
        && let Some(info) = client.inspect_rw_lock(name).await?
    {
        held.push(to_json(&HeldLock::RwLock {
            name: name.to_owned(),
            info,
        }));
    }
    let report = if json {
        #[derive(Serialize)]
        struct Inspected<'a> {
            name: &'a str,
            held: bool,
            locks: &'a [LockJson],
        }
        Report::json(&Inspected {
            name,
            held: !held.is_empty(),
            locks: &held,
        })?
    } else if held.is_empty() {
        Report::new(String::new())
    } else {
        Report::new(table(&held))
    };
    if held.is_empty() {
        let kinds = match kind {
            KindArg::Any => "no mutex, semaphore or read-write lock",
            KindArg::Mutex => "the mutex",
            KindArg::Semaphore => "the semaphore",
            KindArg::RwLock => "the read-write lock",
        };
        let message = if kind == KindArg::Any {
            format!("`{name}` is free: {kinds} of that name is held")
        } else {
            format!("{kinds} `{name}` is free")
        };
        return Ok(report.note(message).exit(Exit::NotFound));
    }
    Ok(report)
}

fn mutex_lock(name: &str, holder: HolderInfo) -> HeldLock {
    HeldLock::Mutex {
        name: name.to_owned(),
        holder,
    }
}

/// `host pid N (label "…")`.
fn describe(h: &HolderInfo) -> String {
    let label = h
        .label
        .as_deref()
        .map_or_else(String::new, |l| format!(" (label {l:?})"));
    format!("{} pid {}{label}", h.host, h.pid)
}

/// Whether two views of a mutex show the same hold (the TTL aside, which runs down).
fn same_hold(a: &HolderInfo, b: &HolderInfo) -> bool {
    (&a.host, a.pid, &a.label, a.fencing_token) == (&b.host, b.pid, &b.label, b.fencing_token)
}

/// `dlock unlock NAME [--yes]`.
///
/// # Errors
/// Without `--yes` when stdin is not a terminal (usage); a bad name (usage); Redis unreachable
/// or erring.
pub(crate) async fn unlock(
    client: &Client,
    name: &str,
    yes: bool,
    json: bool,
) -> Result<Report, Failure> {
    let Some(before) = client.inspect(name).await? else {
        let mut why = format!("the mutex `{name}` is not held; nothing to unlock");
        if client.inspect_semaphore(name).await?.is_some()
            || client.inspect_rw_lock(name).await?.is_some()
        {
            why.push_str(
                " (a semaphore or read-write lock of that name is held: `dlock unlock` forces \
                 mutexes only)",
            );
        }
        return Ok(Report::new(String::new()).note(why).exit(Exit::NotFound));
    };
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(format!(
                "refusing to force `{name}` open without confirmation: stdin is not a terminal; \
                 pass --yes to confirm"
            )));
        }
        let question = format!(
            "Force the mutex `{name}` open? It is held by {}, {} left, {} waiting; the oldest \
             waiter gets it. [y/N] ",
            describe(&before),
            human_duration(before.remaining),
            before.waiters
        );
        if !confirm(question).await? {
            return Ok(Report::new(String::new())
                .note(format!("not confirmed: `{name}` was left as it is"))
                .exit(Exit::Aborted));
        }
        // The operator confirmed this holder: open it only if it still holds.
        match client.inspect(name).await? {
            Some(now) if same_hold(&before, &now) => {}
            _ => {
                return Ok(Report::new(String::new())
                    .note(format!(
                        "`{name}` changed hands while you answered; nothing was done, run \
                         `dlock unlock {name}` again"
                    ))
                    .exit(Exit::Aborted));
            }
        }
    }
    if !client.force_unlock(name).await? {
        return Ok(Report::new(String::new())
            .note(format!("`{name}` was released meanwhile; nothing was done"))
            .exit(Exit::NotFound));
    }
    let after = client.inspect(name).await?;
    if json {
        #[derive(Serialize)]
        struct Unlocked {
            name: String,
            /// `forced` (`--ask` says `asked`).
            action: &'static str,
            was_held_by: HolderJson,
            now_held_by: Option<HolderJson>,
        }
        return Report::json(&Unlocked {
            name: name.to_owned(),
            action: "forced",
            was_held_by: HolderJson::mutex(&before),
            now_held_by: after.as_ref().map(HolderJson::mutex),
        });
    }
    let then = match &after {
        Some(next) => format!("handed to the next waiter, {}", describe(next)),
        None => "it is free".to_owned(),
    };
    Ok(Report::new(format!(
        "forced `{name}` open (was held by {}); {then}\n",
        describe(&before)
    )))
}

/// `dlock unlock --ask`: asks the holders of the mutex `name` (or, when none is held, of the
/// semaphore and the read-write lock of that name) to give it back. Nothing is forced, so no
/// confirmation is asked for.
pub(crate) async fn ask(client: &Client, name: &str, json: bool) -> Result<Report, Failure> {
    let mut kind = "mutex";
    let mut asked = client.request_release(name).await?;
    if asked == 0 {
        // The limit of a handle made only to ask is not used.
        for (of_kind, holders) in [
            (
                "semaphore",
                client.semaphore(name, 1)?.request_release().await?,
            ),
            (
                "read-write lock",
                client.rw_lock(name)?.request_release().await?,
            ),
        ] {
            if holders > 0 {
                kind = of_kind;
                asked = holders;
                break;
            }
        }
    }
    if asked == 0 {
        return Ok(Report::new(String::new())
            .note(format!("no lock `{name}` is held; nobody to ask"))
            .exit(Exit::NotFound));
    }
    if json {
        #[derive(Serialize)]
        struct Asked<'a> {
            name: &'a str,
            /// `asked` (plain `dlock unlock` says `forced`).
            action: &'static str,
            kind: &'static str,
            holders: usize,
        }
        return Report::json(&Asked {
            name,
            action: "asked",
            kind,
            holders: asked,
        });
    }
    let whom = if asked == 1 {
        "its holder".to_owned()
    } else {
        format!("its {asked} holders")
    };
    Ok(Report::new(format!(
        "asked {whom} of the {kind} `{name}` to give it back (nothing was forced): a watchdog \
         holder learns of it within one renewal interval and decides; `dlock unlock {name}` \
         forces a mutex open\n"
    )))
}

/// Asks `question` on stderr and reads the answer from the terminal: `y` or `yes`.
async fn confirm(question: String) -> Result<bool, Failure> {
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut err = std::io::stderr();
        let _ = write!(err, "{question}");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| Failure::error(format!("cannot read the answer: {e}")))?
    .map_err(|e| Failure::error(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
