//! Attribute macros for dlock:
//! * [`macro@distributed_lock`]: run an `async fn` under a distributed lock on Redis. Use it
//!   through `dlock-core` (its default `macros` feature re-exports it).
//! * [`macro@rate_limited`]: run an `async fn` only as often as a budget on the server's clock
//!   admits (GCRA, per key), checked at compile time like `#[distributed_lock]`. Also through
//!   `dlock-core`.
//! * [`#[scheduled]`][scheduled-attr]: turn an `async fn` into a cron job that runs exactly
//!   once per occurrence across replicas, with the cron expression and time zone checked at
//!   compile time. Use it through `dlock-scheduler`, which turns on this crate's `scheduled`
//!   [feature](#features) and re-exports it ([below](#scheduled-cron-jobs)).
//!
#![cfg_attr(feature = "scheduled", doc = "[scheduled-attr]: macro@scheduled")]
#![cfg_attr(
    not(feature = "scheduled"),
    doc = "[scheduled-attr]: https://docs.rs/dlock-scheduler/latest/dlock_scheduler/attr.scheduled.html"
)]
//!
//! Either way your crate depends on one crate only:
//!
//! ```no_run
//! use dlock_core::{distributed_lock, Client, Error};
//!
//! #[derive(Debug)]
//! enum PayError {
//!     Lock(Error),
//!     Declined,
//! }
//!
//! impl From<Error> for PayError {
//!     fn from(e: Error) -> Self {
//!         PayError::Lock(e)
//!     }
//! }
//!
//! struct Payments {
//!     locks: Client,
//! }
//!
//! impl Payments {
//!     /// At most one `pay` per order at a time, across every process that shares the Redis.
//!     #[distributed_lock(
//!         key = "order:{order_id}", // the lock name, from the parameters
//!         ttl = "10s",              // the lease; renewed while the body runs (the watchdog)
//!         wait = "5s",              // wait up to 5 s for a busy lock, then `Busy`
//!         client = self.locks,      // or a process-wide default: `dlock_core::set_default_client`
//!         guard = lease,            // the lease, inside the body: fencing token, `lost()` …
//!     )]
//!     async fn pay(&self, order_id: u64, cents: u64) -> Result<u64, PayError> {
//!         if cents == 0 {
//!             return Err(PayError::Declined);
//!         }
//!         // Hand the fencing token to the storage you write to.
//!         Ok(lease.fencing_token().await?.get())
//!     }
//! }
//!
//! # async fn demo(payments: Payments) {
//! match payments.pay(42, 1_000).await {
//!     Ok(fence) => println!("paid under fencing token {fence}"),
//!     Err(PayError::Lock(e)) if e.is_busy() => println!("order 42 is being paid elsewhere"),
//!     Err(PayError::Lock(e)) if e.is_lease_lost() => println!("stopped: {e}"),
//!     Err(e) => println!("{e:?}"),
//! }
//! # }
//! ```
//!
//! Everything that can be checked at compile time is: the key template against the parameters,
//! the durations, the option values and their combinations, and the return type. Errors point
//! at the token to fix and say how; all of them are reported at once, and the function is still
//! emitted so that its own errors show too.
//!
//! The reference below is also on the attribute itself ([`distributed_lock`]).
//!
#![doc = include_str!("reference.md")]
//!
//! # `#[scheduled]`: cron jobs
//!
//! ```no_run
//! use dlock_scheduler::{scheduled, JobContext, Scheduler};
//!
//! /// Draws the winners: once per day across every replica, at noon in Berlin.
//! #[scheduled(name = "lottery", cron = "0 12 * * *", tz = "Europe/Berlin", jitter = "2s")]
//! async fn lottery(ctx: JobContext) -> Result<(), std::io::Error> {
//!     println!("{} draws for {}", ctx.replica().id(), ctx.occurrence());
//!     Ok(())
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
//! // `lottery::job()` is generated next to the function (a module named like it).
//! let scheduler = Scheduler::builder(client).job(lottery::job()?).build()?;
//! # let _ = scheduler;
//! # Ok(()) }
//! ```
//!
//! The reference below is also on the attribute itself ([`scheduled`][scheduled-attr]).
//!
#![doc = include_str!("scheduled/reference.md")]
//!
//! # `#[rate_limited]`: a budget per key
//!
//! ```no_run
//! use dlock_core::{rate_limited, Error};
//!
//! /// 100 searches a second per user, 20 at once after a quiet spell; a caller over the budget
//! /// waits up to 2 s for a slot, then gets `ErrorKind::RateLimited`.
//! #[rate_limited(key = "search:{user_id}", rate = "100/s", burst = 20, on_limited = "wait", wait = "2s")]
//! async fn search(user_id: u64, query: &str) -> Result<usize, Error> {
//!     Ok(query.len())
//! }
//! # let _ = search;
//! ```
//!
//! The reference below is also on the attribute itself ([`rate_limited`]).
//!
#![doc = include_str!("rate_limited/reference.md")]
//!
//! # Features
//! | feature | default | what it adds |
//! |---|---|---|
//! | *(none)* | | `#[distributed_lock]`, on syn, quote and proc-macro2 only: what dlock-core's default `macros` feature re-exports |
//! | `scheduled` | no | `#[scheduled]`, whose `cron` and `tz` are checked at compile time by dlock-cron (croner, chrono, chrono-tz). dlock-scheduler turns it on and re-exports the attribute, so a crate that only takes locks never compiles a cron parser or the time-zone database |
//!
//! Features are additive: turning `scheduled` on adds an attribute and changes nothing else.
//!
//! # Layout
//! | module | what lives there |
//! |---|---|
//! | `args` | parsing `name = value` options (one generic helper; duplicates and unknown names rejected) |
//! | `item` | the function's shape (`async fn` or `#[async_trait]` output), parameters, return type |
//! | `validate` | option values, ranges and combinations → a `Plan` with defaults filled in |
//! | `kind` | which lock the body runs under (mutex, read or write hold, semaphore permits) and the options that do not apply to it |
//! | `template` | the key-template grammar |
//! | `duration` | the duration grammar |
//! | `limits` | dlock-core's limits (lease lengths, name and label sizes), duplicated and pinned by a test |
//! | `expand` | code generation |
//! | `errors` | collecting every error of one attribute |
//! | `pipeline` | parse → check → expand, and on error the function unchanged: written once for every attribute |
//! | `rate_limited` | `#[rate_limited]`: its `args`, `validate` and `expand`, sharing the modules above |
//! | `scheduled` | `#[scheduled]` (feature `scheduled`): its `args`, `item`, `validate` and `expand`, sharing the modules above |

mod args;
mod duration;
mod errors;
mod expand;
mod item;
mod kind;
mod limits;
mod pipeline;
mod rate_limited;
#[cfg(feature = "scheduled")]
mod scheduled;
mod template;
mod validate;

use proc_macro::TokenStream;
use syn::{ItemFn, Type};

use crate::args::Args;
use crate::errors::Errors;
use crate::item::Function;
use crate::pipeline::{Attribute, attribute};

/// Runs an `async fn` under a distributed lock.
///
/// ```no_run
/// use dlock_core::distributed_lock;
///
/// #[distributed_lock(key = "report:{day}", ttl = "30s", on_busy = "skip")]
/// async fn nightly_report(day: u32) -> Result<Option<usize>, dlock_core::Error> {
///     // Runs on one replica; the others get `Ok(None)`, and `Err` if Redis is unreachable.
///     Ok(Some(42))
/// }
/// # let _ = nightly_report;
/// ```
///
#[doc = include_str!("reference.md")]
#[proc_macro_attribute]
pub fn distributed_lock(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute::<DistributedLock>(attr.into(), item.into()).into()
}

/// Runs an `async fn` only as often as a budget on the Redis server's clock admits.
///
/// ```no_run
/// use dlock_core::{rate_limited, Error};
///
/// struct Api {
///     locks: dlock_core::Client,
/// }
///
/// impl Api {
///     /// 10 exports a minute per tenant, one at a time after a quiet spell.
///     #[rate_limited(key = "export:{tenant}", rate = "10/m", burst = 1, client = self.locks)]
///     async fn export(&self, tenant: &str) -> Result<String, Error> {
///         Ok(format!("export of {tenant}"))
///     }
/// }
///
/// # async fn demo(api: Api) {
/// match api.export("acme").await {
///     Ok(file) => println!("{file}"),
///     Err(e) if e.is_rate_limited() => println!("retry in {:?}", e.retry_after()),
///     Err(e) => println!("{e}"),
/// }
/// # }
/// ```
///
#[doc = include_str!("rate_limited/reference.md")]
#[proc_macro_attribute]
pub fn rate_limited(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute::<rate_limited::RateLimited>(attr.into(), item.into()).into()
}

/// Turns an `async fn` into a cron job of dlock-scheduler: each occurrence runs on exactly one
/// replica. The function stays as written; an uninhabited enum of the same name is added next to
/// it, with `job()` to register.
///
/// ```no_run
/// use dlock_scheduler::{scheduled, JobContext, Scheduler};
///
/// #[scheduled(name = "nightly-report", cron = "30 2 * * *", tz = "Europe/Berlin")]
/// async fn nightly_report(ctx: JobContext) -> Result<(), std::io::Error> {
///     println!("report for {} (fence {})", ctx.occurrence(), ctx.fencing_token());
///     Ok(())
/// }
///
/// /// Every 10 seconds; no context needed.
/// #[scheduled(name = "heartbeat", cron = "*/10 * * * * *", overlap = "allow", misfire = "skip")]
/// pub(crate) async fn heartbeat() -> Result<(), String> {
///     Ok(())
/// }
///
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_scheduler::Error> {
/// let scheduler = Scheduler::builder(client)
///     .job(nightly_report::job()?)
///     .job(heartbeat::job()?)
///     .build()?;
/// # let _ = scheduler;
/// # Ok(()) }
/// ```
///
#[doc = include_str!("scheduled/reference.md")]
#[cfg(feature = "scheduled")]
#[proc_macro_attribute]
pub fn scheduled(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute::<scheduled::Scheduled>(attr.into(), item.into()).into()
}

/// `#[distributed_lock]`'s parts of the [pipeline](pipeline::attribute): the function's shape
/// (`item`), the options against it (`validate`), the locked function (`expand`).
struct DistributedLock;

/// A function that can run under the lock, with its checked options.
struct Locked<'f> {
    function: Function<'f>,
    /// The type the caller receives (not `()`).
    output: &'f Type,
    plan: validate::Plan,
}

impl Attribute for DistributedLock {
    const NAME: &'static str = "distributed_lock";
    type Args = Args;
    type Plan<'f> = Locked<'f>;

    fn check<'f>(args: &Args, func: &'f ItemFn, errors: &mut Errors) -> Option<Locked<'f>> {
        let function = Function::read(func, &item::LOCK, errors)?;
        let plan = validate::validate(args, &function, errors)?;
        Some(Locked {
            output: function.output?,
            function,
            plan,
        })
    }

    fn expand(locked: Locked<'_>, _item: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
        expand::expand(&locked.function, locked.output, &locked.plan)
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::pipeline::attribute;

    fn expand(
        attr: proc_macro2::TokenStream,
        item: proc_macro2::TokenStream,
    ) -> proc_macro2::TokenStream {
        attribute::<super::DistributedLock>(attr, item)
    }

    fn pay() -> proc_macro2::TokenStream {
        quote!(
            async fn pay(order: &Order, n: u64) -> Result<u64, E> {
                Ok(n)
            }
        )
    }

    #[test]
    fn expands_to_absolute_paths_only() {
        let out = expand(quote!(key = "order:{order.id}:{n}", guard = lease), pay());
        let text = out.to_string();
        assert!(
            text.contains(":: dlock_core :: __private :: run ("),
            "{text}"
        );
        assert_eq!(
            text.matches("dlock_core").count(),
            text.matches(":: dlock_core").count(),
            "every path to dlock-core is absolute: {text}"
        );
        assert!(!text.contains("compile_error"), "{text}");
    }

    #[test]
    fn crate_replaces_every_path() {
        let out = expand(
            quote!(key = "k", crate = "my::locks", on_busy = "skip"),
            pay(),
        );
        let text = out.to_string();
        assert!(!text.contains("dlock_core"), "{text}");
        assert!(
            text.contains("my :: locks :: __private :: run_or_skip ("),
            "{text}"
        );
    }

    #[test]
    fn on_error_the_function_is_emitted_unchanged() {
        let item = pay();
        let out = expand(quote!(key = "k", ttl = "10M", nope = 1), item.clone());
        let text = out.to_string();
        assert_eq!(text.matches("compile_error").count(), 2, "{text}");
        assert!(text.ends_with(&item.to_string()), "{text}");
    }
}
