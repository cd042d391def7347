//! What `dlock-macros` expands to. Not a public API: hidden from the docs, and may change in
//! any release. Kept small: the macros do parsing and checking at compile time; this module
//! runs the lock. (Crates built on dlock use [`crate::ext`]; dlock's own conformance test
//! reaches the scripts through `conformance`, compiled only with the `__conformance` feature.)

#![allow(missing_docs, unreachable_pub)]

use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::keypart::KeyPart;
use crate::kinds::rate_limiter::{Decision, Limiter, Quota};
use crate::lease::Lease;
use crate::options::{MutexOptions, OnLost, Wait};

pub use std::string::String;
pub use std::sync::atomic::AtomicBool as StdAtomicBool;
pub use std::time::Duration as StdDuration;

static DEFAULT_CLIENT: OnceLock<Client> = OnceLock::new();

/// Sets the client that `#[distributed_lock]` uses when it is not given `client = …`.
pub(crate) fn set_default(client: Client) -> Result<(), Error> {
    DEFAULT_CLIENT.set(client).map_err(|_| {
        Error::invalid("a default dlock client is already set; set it once, at start-up")
    })
}

/// The default client, or an error that says how to set one.
pub fn default_client() -> Result<&'static Client, Error> {
    DEFAULT_CLIENT.get().ok_or_else(|| {
        Error::invalid(
            "no default dlock client: call dlock_core::set_default_client(client) at start-up, \
             or pass `client = <expr>` to the attribute (#[distributed_lock], #[rate_limited])",
        )
    })
}

/// The lock an annotated function runs under (`mode`, `permits` and `of` of the attribute).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A mutex: no `mode`, no `permits` (`Mutex::with_lock`).
    Mutex,
    /// A read hold of a read-write lock: `mode = "read"` (`RwLock::with_read`).
    Read,
    /// The write hold of a read-write lock: `mode = "write"` (`RwLock::with_write`).
    Write,
    /// `permits` permits of a semaphore of `limit`: `permits = N, of = LIMIT`
    /// (`Semaphore::with_permits`). The macro checked `1 <= permits <= limit`.
    Semaphore { permits: u32, limit: u32 },
}

/// The lock options of one annotated function, fixed at compile time.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub kind: Kind,
    pub ttl: Option<Duration>,
    pub watchdog: bool,
    pub max_hold: Option<Duration>,
    pub wait: Wait,
    pub on_lost: OnLost,
    pub reentrant: bool,
    pub label: &'static str,
}

impl Spec {
    fn options(&self) -> MutexOptions {
        let mut options = MutexOptions::new()
            .reentrant(self.reentrant)
            .on_lost(self.on_lost)
            .label(self.label);
        if let Some(ttl) = self.ttl {
            options = options.ttl(ttl);
        }
        if self.watchdog {
            options = options.watchdog();
        }
        if let Some(max_hold) = self.max_hold {
            options = options.max_hold(max_hold);
        }
        options
    }
}

/// Return types that can report a busy or lost lock as an error: `Result<T, E>` with
/// `E: From<dlock_core::Error>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot report a busy or lost lock",
    label = "the return type of a #[distributed_lock] function",
    note = "return `Result<T, E>` where `E: From<dlock_core::Error>`: `Result<T, dlock_core::Error>`, `anyhow::Result<T>`, or your own error type with `impl From<dlock_core::Error>` (`String` and `std::io::Error` have none); or use `on_busy = \"skip\"` with `Result<Option<T>, E>`"
)]
pub trait ErrorOutput: Sized {
    fn from_lock_error(error: Error) -> Self;
}

// `do_not_recommend` on the impls: a `Result<T, String>` then gets the trait's own message and
// note, on the return type, rather than "`String: From<dlock_core::Error>` is not satisfied"
// with a list of `String`'s unrelated `From` impls.
#[diagnostic::do_not_recommend]
impl<T, E: From<Error>> ErrorOutput for Result<T, E> {
    fn from_lock_error(error: Error) -> Self {
        Err(E::from(error))
    }
}

/// The return type of `on_busy = "skip"` functions: `Result<Option<T>, E>` — `Ok(None)` when
/// the lock is busy, `Err` for anything else (Redis unreachable, a lost lease). A bare
/// `Option<T>` is refused: it would make an unreachable Redis look like "another replica has
/// it".
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot report a skipped run",
    label = "the return type of an `on_busy = \"skip\"` function",
    note = "return `Result<Option<T>, E>` where `E: From<dlock_core::Error>` (`String` and `std::io::Error` are not): `Ok(None)` when another holder has the lock, `Err` when Redis cannot be reached or the lease is lost; a bare `Option<T>` could not tell a busy lock from an unreachable Redis, and a job would silently run nowhere"
)]
pub trait SkipOutput: Sized {
    fn skipped() -> Self;
    fn from_lock_error(error: Error) -> Self;
}

#[diagnostic::do_not_recommend]
impl<T, E: From<Error>> SkipOutput for Result<Option<T>, E> {
    fn skipped() -> Self {
        Ok(None)
    }

    fn from_lock_error(error: Error) -> Self {
        Err(E::from(error))
    }
}

/// Return types that can report a limited call as an error: `Result<T, E>` with
/// `E: From<dlock_core::Error>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot report a rate-limited call",
    label = "the return type of a #[rate_limited] function",
    note = "return `Result<T, E>` where `E: From<dlock_core::Error>`: `Result<T, dlock_core::Error>`, `anyhow::Result<T>`, or your own error type with `impl From<dlock_core::Error>` (`String` and `std::io::Error` have none); a limited call is `Err` with `ErrorKind::RateLimited` and `Error::retry_after`"
)]
pub trait LimitedOutput: Sized {
    fn from_limit_error(error: Error) -> Self;
}

#[diagnostic::do_not_recommend]
impl<T, E: From<Error>> LimitedOutput for Result<T, E> {
    fn from_limit_error(error: Error) -> Self {
        Err(E::from(error))
    }
}

/// The quota and the behaviour of one `#[rate_limited]` function, fixed at compile time; a
/// `static` of its expansion (its outage flag is shared by every call).
#[derive(Debug)]
pub struct RateSpec {
    /// The metrics' `limiter` label: the key template, or `label = "…"`.
    pub label: &'static str,
    /// `count` cells per `per`, with a bucket of `burst`.
    pub count: u32,
    pub per: Duration,
    pub burst: u32,
    /// Cells one call takes (the macro checked `1 <= cost <= burst`).
    pub cost: u32,
    /// `None`: a limited call is `Err` at once (`on_limited = "error"`); `Some(wait)`: it
    /// waits for a slot within `wait` (`on_limited = "wait"`).
    pub wait: Option<Duration>,
    pub fail_open: bool,
    pub outage: AtomicBool,
}

/// Runs `body` once the budget `key` admits `spec.cost` cells; a limited call, or a Redis
/// error (unless failing open), becomes `R`'s error and `body` is dropped unpolled.
pub async fn rate_limited<R, Fut>(
    client: &Client,
    key: &str,
    spec: &'static RateSpec,
    body: Fut,
) -> R
where
    R: LimitedOutput,
    Fut: Future<Output = R>,
{
    match admit(client, key, spec).await {
        Ok(()) => body.await,
        Err(e) => R::from_limit_error(e),
    }
}

async fn admit(client: &Client, key: &str, spec: &'static RateSpec) -> Result<(), Error> {
    let quota = Quota::per(spec.count, spec.per).burst(spec.burst);
    let limiter = Limiter::for_site(client, key, spec.label, quota, spec.fail_open, &spec.outage)?;
    match spec.wait {
        Some(wait) => limiter.acquire(None, spec.cost, wait).await.map(drop),
        None => match limiter.try_acquire(None, spec.cost).await? {
            Decision::Limited { wait, .. } => {
                Err(limiter.limited(None, spec.cost, wait, Duration::ZERO))
            }
            _ => Ok(()),
        },
    }
}

/// Asserts at compile time that a key-template value is a [`KeyPart`] (the macro spans this
/// call on the parameter, so the error points there).
pub fn key_part<T: KeyPart + ?Sized>(value: &T, key: &mut String) {
    value.write_key_part(key);
}

/// Runs `body` under the lock `key`; a busy or lost lock or a Redis error becomes `R`'s error.
pub async fn run<R, F, Fut>(client: &Client, key: &str, spec: &Spec, body: F) -> R
where
    R: ErrorOutput,
    F: FnOnce(Lease) -> Fut,
    Fut: Future<Output = R>,
{
    locked(client, key, spec, body)
        .await
        .unwrap_or_else(R::from_lock_error)
}

/// Like [`run`], but a busy lock skips the body and returns `R::skipped()`.
pub async fn run_or_skip<R, F, Fut>(client: &Client, key: &str, spec: &Spec, body: F) -> R
where
    R: SkipOutput,
    F: FnOnce(Lease) -> Fut,
    Fut: Future<Output = R>,
{
    match locked(client, key, spec, body).await {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::Busy => R::skipped(),
        Err(e) => R::from_lock_error(e),
    }
}

/// `body` under the lock of `spec.kind` named `key`, with the options of `spec`. (A mutex, a
/// read-write lock and a semaphore of one name are three locks: their keys differ.)
async fn locked<R, F, Fut>(client: &Client, key: &str, spec: &Spec, body: F) -> Result<R, Error>
where
    F: FnOnce(Lease) -> Fut,
    Fut: Future<Output = R>,
{
    let (options, wait) = (spec.options(), spec.wait);
    match spec.kind {
        Kind::Mutex => client.mutex_with(key, options)?.with_lock(wait, body).await,
        Kind::Read => {
            client
                .rw_lock_with(key, options)?
                .with_read(wait, body)
                .await
        }
        Kind::Write => {
            client
                .rw_lock_with(key, options)?
                .with_write(wait, body)
                .await
        }
        Kind::Semaphore { permits, limit } => {
            client
                .semaphore_with(key, limit, options)?
                .with_permits(permits, wait, body)
                .await
        }
    }
}

/// The conformance test's access to the scripts and the state they write: only with the
/// `__conformance` feature, which only dlock's own test packages turn on.
#[cfg(feature = "__conformance")]
pub mod conformance;
