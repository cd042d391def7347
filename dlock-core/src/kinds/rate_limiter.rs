//! Rate limiters on the server's clock (GCRA in one script, `rate.lua`): [`RateLimiter`] for
//! one shared budget, [`KeyedRateLimiter`] for one budget per key (a user, a tenant).
//!
//! Every decision is made by the Redis server, by its clock, in one script: no client clock is
//! read, so clients whose clocks disagree, or jump, still share one budget exactly. A quota is a
//! rate and a burst, as `governor::Quota`: `Quota::per_second(100).burst(20)` admits 20 at once,
//! then one every 10 ms.
//!
//! Trade-offs, written down:
//! - **No FIFO across processes.** [`RateLimiter::acquire`] reserves the next conforming slot
//!   and sleeps until it; callers are served in the order their reservations reached Redis, not
//!   in the order they started waiting. An `acquire` dropped while it sleeps gives its slot back
//!   in the background (`refund`), which is approximate when later reservations were made
//!   meanwhile: the budget returns, not that exact instant. One dropped while its reservation
//!   is still on the way to Redis gives nothing back: it cannot know whether the reservation
//!   was made, and giving back one that was not would admit more than the quota. Its slot
//!   passes unused (the safe side).
//! - **Redis down: closed by default.** A decision that cannot be asked is `Err` within the
//!   command timeout; [`RateLimiter::fail_open`] admits instead ([`Decision::Unchecked`]) and
//!   logs once per outage.
//! - **A restart or failover resets a limiter**: its key is gone or older, which means a full
//!   bucket (one fresh burst).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use crate::client::context::Context;
use crate::error::{Error, Result, wait_text};
use crate::key::validate_named;
use crate::metrics::{self, RateOutcome};
use crate::runtime::spawn_detached;
use crate::scripts::{self, Call, unexpected};

/// How many cells a limiter admits: a rate, and a burst (the bucket's capacity).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quota {
    /// Microseconds per cell.
    interval_us: f64,
    burst: u32,
    /// The rate as given, for messages.
    rate: u32,
    per: Duration,
}

impl Quota {
    /// `rate` cells per second, with a burst of `rate` (a full second's worth at once).
    pub fn per_second(rate: u32) -> Self {
        Self::per(rate, Duration::from_secs(1))
    }

    /// `rate` cells per minute, with a burst of `rate`.
    pub fn per_minute(rate: u32) -> Self {
        Self::per(rate, Duration::from_secs(60))
    }

    /// `rate` cells per hour, with a burst of `rate`.
    pub fn per_hour(rate: u32) -> Self {
        Self::per(rate, Duration::from_secs(3_600))
    }

    /// `rate` cells per `period`, with a burst of `rate`.
    pub fn per(rate: u32, period: Duration) -> Self {
        Self {
            interval_us: period.as_secs_f64() * 1e6 / f64::from(rate.max(1)),
            burst: rate,
            rate,
            per: period,
        }
    }

    /// The bucket's capacity: how many cells may be admitted at once after a quiet spell.
    #[must_use]
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    /// The burst in force.
    pub fn burst_size(&self) -> u32 {
        self.burst
    }

    /// The time between two cells at the steady rate.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(self.interval_us / 1e6)
    }

    /// `InvalidInput` for a rate or burst of zero, or a period of zero.
    fn validate(&self) -> Result<()> {
        if self.rate == 0 {
            return Err(Error::invalid(
                "rate limiter quota: the rate is 0, which admits nothing; give at least 1 per \
                 period (Quota::per_second(1))",
            ));
        }
        if self.per.is_zero() {
            return Err(Error::invalid(
                "rate limiter quota: the period is 0; give a period of at least 1 µs",
            ));
        }
        if self.burst == 0 {
            return Err(Error::invalid(
                "rate limiter quota: the burst is 0, which admits nothing; give at least 1 \
                 (.burst(1) spaces every cell by the interval)",
            ));
        }
        if self.interval_us < 1.0 {
            return Err(Error::invalid(format!(
                "rate limiter quota: {} per {:?} is more than one cell per microsecond, the \
                 limiter's resolution; count in larger cells (acquire n at a time)",
                self.rate, self.per
            )));
        }
        // The script keeps the TAT in µs as a Lua number and the key's expiry in ms: a full
        // bucket's span must stay exact (2^53 µs, about 285 years) and a valid expiry.
        if self.interval_us * f64::from(self.burst) > MAX_SPAN_US {
            return Err(Error::invalid(format!(
                "rate limiter quota: {} per {:?} with a burst of {} takes longer than 285 years                  to refill; use a shorter period or a smaller burst",
                self.rate, self.per, self.burst
            )));
        }
        Ok(())
    }

    /// `tau`: the burst tolerance in microseconds.
    fn tolerance_us(&self) -> f64 {
        self.interval_us * f64::from(self.burst - 1)
    }
}

/// The longest time a bucket may take to refill, µs: 2^53, the largest integer a Lua number
/// (a double) holds exactly.
const MAX_SPAN_US: f64 = 9_007_199_254_740_992.0;

/// One decision of a limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Admitted now.
    Allowed {
        /// Cells that would conform right after this decision.
        remaining: u32,
        /// The server's time of the decision.
        decided_at: SystemTime,
    },
    /// Not now: the cells would conform after `wait` (nothing was reserved).
    Limited {
        /// How long until the cells would conform, if nobody else takes them first.
        wait: Duration,
        /// The server's time of the decision.
        decided_at: SystemTime,
    },
    /// Redis could not be asked and the limiter fails open ([`RateLimiter::fail_open`]):
    /// admitted without a decision.
    Unchecked,
}

impl Decision {
    /// Whether the cells were admitted (also without a decision, failing open).
    pub fn is_allowed(&self) -> bool {
        !matches!(self, Self::Limited { .. })
    }
}

/// What the script said.
struct Reply {
    admitted: bool,
    wait: Duration,
    decided_at: SystemTime,
    remaining: u32,
}

/// What one limiter (or one key of a keyed limiter) shares: where it lives and its quota.
#[derive(Clone)]
pub(crate) struct Limiter {
    ctx: Arc<Context>,
    /// The name in the key, `<prefix>rl:{<name>[:<key>]}`.
    name: Arc<str>,
    /// The metrics' `limiter` label: the name, or the template of `#[rate_limited]` (never a
    /// user's key).
    label: Arc<str>,
    quota: Quota,
    fail_open: bool,
    /// An outage is logged once, when failing open.
    outage: Outage,
}

/// Whether an outage was logged: the limiter's own flag, or the one of a `#[rate_limited]`
/// function (a `static` of its expansion, shared by every call).
#[derive(Clone)]
enum Outage {
    Own(Arc<AtomicBool>),
    Site(&'static AtomicBool),
}

impl std::ops::Deref for Outage {
    type Target = AtomicBool;

    fn deref(&self) -> &AtomicBool {
        match self {
            Self::Own(flag) => flag,
            Self::Site(flag) => flag,
        }
    }
}

/// The name of a limiter, and of a `#[rate_limited]` budget.
const NAME: (&str, &str) = (
    "rate limiter name",
    "give the limiter a name such as \"partner-api\"",
);
/// The key of a keyed limiter.
const KEY: (&str, &str) = (
    "rate limiter key",
    "give each budget a key such as the user's id",
);

impl Limiter {
    fn key(&self, sub: Option<&str>) -> String {
        let prefix = &self.ctx.config.key_prefix;
        match sub {
            None => format!("{prefix}rl:{{{}}}", self.name),
            Some(sub) => format!("{prefix}rl:{{{}:{sub}}}", self.name),
        }
    }

    /// The limiter of a `#[rate_limited]` call: the budget `name` (the key template filled in),
    /// counted in the metrics under `label` (the template).
    pub(crate) fn for_site(
        client: &crate::Client,
        name: &str,
        label: &'static str,
        quota: Quota,
        fail_open: bool,
        outage: &'static AtomicBool,
    ) -> Result<Self> {
        let limiter = Self::new(client, name, Some(label), quota, Outage::Site(outage))?;
        Ok(Self {
            fail_open,
            ..limiter
        })
    }

    /// A limiter `name` (checked, as its quota) of `client`, counted in the metrics under
    /// `label`, or under its name when `None`.
    fn new(
        client: &crate::Client,
        name: &str,
        label: Option<&'static str>,
        quota: Quota,
        outage: Outage,
    ) -> Result<Self> {
        validate_named(NAME.0, NAME.1, name)?;
        quota.validate()?;
        let name: Arc<str> = name.into();
        Ok(Self {
            ctx: client.ctx.clone(),
            label: label.map_or_else(|| name.clone(), Arc::from),
            name,
            quota,
            fail_open: false,
            outage,
        })
    }

    fn check_n(&self, n: u32) -> Result<()> {
        if n == 0 || n > self.quota.burst {
            return Err(Error::invalid(format!(
                "rate limiter `{}`: {n} cells asked for; ask for 1 to {} (the burst): more \
                 never conform at once",
                self.name, self.quota.burst
            )));
        }
        Ok(())
    }

    async fn run(
        &self,
        sub: Option<&str>,
        mode: &str,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reply> {
        let key = self.key(sub);
        let mut call = Call::new(&scripts::RATE, 1);
        call.arg(&key)
            .arg(mode)
            .arg(n)
            .arg(format!("{:.3}", self.quota.interval_us))
            .arg(format!("{:.3}", self.quota.tolerance_us()))
            .arg(u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX));
        let reply = self
            .ctx
            .transport
            .run(&call, "rate limit", &self.name)
            .await?;
        let decode = || {
            let [admitted, wait, now, remaining] = scripts::ints::<4>(&reply)?;
            Some(Reply {
                admitted: admitted == 1,
                wait: Duration::from_micros(u64::try_from(wait).ok()?),
                decided_at: SystemTime::UNIX_EPOCH
                    + Duration::from_micros(u64::try_from(now).ok()?),
                remaining: u32::try_from(remaining).ok()?,
            })
        };
        if self.outage.swap(false, Ordering::AcqRel) {
            tracing::warn!(limiter = %self.label, "dlock: rate limiter reaches Redis again; decisions are checked again");
        }
        decode().ok_or_else(|| unexpected("rate limit", &reply))
    }

    /// `Err` as it is, or admitted without a decision when failing open (logged once).
    fn failed(&self, error: Error) -> Result<Decision> {
        let unreachable = error.is_timeout() || error.is_connection();
        if self.fail_open && unreachable {
            if !self.outage.swap(true, Ordering::AcqRel) {
                tracing::warn!(limiter = %self.label, %error, "dlock: rate limiter cannot reach Redis; admitting without a decision (fail open) until it can");
            }
            return Ok(Decision::Unchecked);
        }
        Err(error)
    }

    pub(crate) async fn try_acquire(&self, sub: Option<&str>, n: u32) -> Result<Decision> {
        self.check_n(n)?;
        let decision = self.decide(sub, n).await;
        if let Ok(decision) = &decision {
            let outcome = match decision {
                Decision::Allowed { .. } => RateOutcome::Allowed,
                Decision::Limited { .. } => RateOutcome::Limited,
                Decision::Unchecked => RateOutcome::Unchecked,
            };
            metrics::rate(&self.label, outcome, n);
        }
        decision
    }

    async fn decide(&self, sub: Option<&str>, n: u32) -> Result<Decision> {
        match self.run(sub, "try", n, Duration::ZERO).await {
            Ok(r) if r.admitted => Ok(Decision::Allowed {
                remaining: r.remaining,
                decided_at: r.decided_at,
            }),
            Ok(r) => Ok(Decision::Limited {
                wait: r.wait,
                decided_at: r.decided_at,
            }),
            Err(e) => self.failed(e),
        }
    }

    /// Reserves the next slot within `max_wait` and sleeps until it. `Duration::MAX` waits
    /// as long as it takes (sent as `u64::MAX` µs, which the script compares as a number).
    pub(crate) async fn acquire(
        &self,
        sub: Option<&str>,
        n: u32,
        max_wait: Duration,
    ) -> Result<Decision> {
        self.check_n(n)?;
        let reply = match self.run(sub, "reserve", n, max_wait).await {
            Ok(reply) => reply,
            Err(e) => {
                let decision = self.failed(e)?;
                metrics::rate(&self.label, RateOutcome::Unchecked, n);
                return Ok(decision);
            }
        };
        if !reply.admitted {
            metrics::rate(&self.label, RateOutcome::Limited, n);
            return Err(self.limited(sub, n, reply.wait, max_wait));
        }
        if !reply.wait.is_zero() {
            // Given back if this call is dropped before its slot.
            let mut pending = Refund {
                limiter: Some(self.clone()),
                sub: sub.map(str::to_owned),
                n,
            };
            tokio::time::sleep(reply.wait).await;
            pending.limiter = None;
        }
        metrics::rate(&self.label, RateOutcome::Allowed, n);
        metrics::rate_wait(&self.label, reply.wait);
        Ok(Decision::Allowed {
            remaining: reply.remaining,
            decided_at: reply.decided_at + reply.wait,
        })
    }

    /// `RateLimited`: `n` cells conform in `wait`, later than the `max_wait` of the call.
    pub(crate) fn limited(
        &self,
        sub: Option<&str>,
        n: u32,
        wait: Duration,
        max_wait: Duration,
    ) -> Error {
        let budget = match sub {
            None => format!("`{}`", self.name),
            Some(sub) => format!("`{}` for key `{sub}`", self.name),
        };
        let waits = if max_wait.is_zero() {
            "this call does not wait".to_owned()
        } else {
            format!("this call waits at most {}", wait_text(max_wait))
        };
        let (limit, retry) = (self.quota.limit_text(), wait_text(wait));
        let when = if n == 1 {
            format!("retry in {retry}")
        } else {
            format!("{n} cells are free in {retry}, retry then")
        };
        Error::rate_limited(
            format!("rate limiter {budget}: limit {limit}; {when} ({waits})"),
            wait,
        )
    }
}

impl Quota {
    /// The quota in a user's words: `5 per minute (burst 10)`, the burst left out when it is
    /// the rate.
    fn limit_text(&self) -> String {
        let per = match self.per.as_secs() {
            _ if self.per.subsec_nanos() != 0 => wait_text(self.per),
            1 => "second".to_owned(),
            60 => "minute".to_owned(),
            3_600 => "hour".to_owned(),
            86_400 => "day".to_owned(),
            _ => wait_text(self.per),
        };
        if self.burst == self.rate {
            format!("{} per {per}", self.rate)
        } else {
            format!("{} per {per} (burst {})", self.rate, self.burst)
        }
    }
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.name)
            .field("label", &self.label)
            .field("quota", &self.quota)
            .field("fail_open", &self.fail_open)
            .finish_non_exhaustive()
    }
}

/// A reservation not used yet: given back in the background if dropped.
struct Refund {
    limiter: Option<Limiter>,
    sub: Option<String>,
    n: u32,
}

impl Drop for Refund {
    fn drop(&mut self) {
        let Some(limiter) = self.limiter.take() else {
            return;
        };
        let (sub, n) = (self.sub.take(), self.n);
        spawn_detached(async move {
            if let Err(e) = limiter
                .run(sub.as_deref(), "refund", n, Duration::ZERO)
                .await
            {
                tracing::debug!(limiter = %limiter.label, error = %e, "dlock: a dropped reservation could not be given back; it passes with its slot");
            }
        });
    }
}

/// One budget shared by every client of the same name and quota.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// use dlock_core::Quota;
/// let api = client.rate_limiter("partner-api", Quota::per_second(100).burst(20))?;
/// if api.try_acquire(1).await?.is_allowed() {
///     // call the partner
/// }
/// api.acquire(1).await?; // or wait for the next slot
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimiter {
    inner: Limiter,
}

impl RateLimiter {
    /// Admits `n` cells now, or says how long until they would conform (nothing reserved).
    ///
    /// # Errors
    /// `InvalidInput` for `n` of 0 or above the burst; `WrongType` when the limiter's key
    /// holds data dlock did not write; `Connection` / `Timeout` when Redis does not answer in
    /// time (unless failing open: then [`Decision::Unchecked`]).
    ///
    /// # Cancel safety
    /// Not retry safe on the server: a call cancelled after Redis decided has counted its
    /// cells, as a request that was sent would.
    pub async fn try_acquire(&self, n: u32) -> Result<Decision> {
        self.inner.try_acquire(None, n).await
    }

    /// Reserves the next slot where `n` cells conform and sleeps until it.
    ///
    /// # Errors
    /// As [`RateLimiter::try_acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: a call dropped while it sleeps gives its slot back in the background.
    pub async fn acquire(&self, n: u32) -> Result<Decision> {
        self.inner.acquire(None, n, Duration::MAX).await
    }

    /// As [`RateLimiter::acquire`], but reserves only a slot within `max_wait`.
    ///
    /// # Errors
    /// `RateLimited` when the slot is further away than `max_wait` (nothing reserved;
    /// [`Error::retry_after`] says how far); otherwise as
    /// [`RateLimiter::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`RateLimiter::acquire`].
    pub async fn acquire_timeout(&self, n: u32, max_wait: Duration) -> Result<Decision> {
        self.inner.acquire(None, n, max_wait).await
    }

    /// Admits without a decision ([`Decision::Unchecked`]) while Redis cannot be reached,
    /// instead of `Err` (fail open); logged once per outage.
    #[must_use]
    pub fn fail_open(mut self, open: bool) -> Self {
        self.inner.fail_open = open;
        self
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The quota it enforces.
    pub fn quota(&self) -> Quota {
        self.inner.quota
    }
}

/// One budget per key (a user, a tenant), each in one small Redis key of its own that expires
/// once its bucket is full again (an idle key costs nothing).
#[derive(Clone, Debug)]
pub struct KeyedRateLimiter {
    inner: Limiter,
}

impl KeyedRateLimiter {
    /// As [`RateLimiter::try_acquire`], for `key`'s budget.
    ///
    /// # Errors
    /// As [`RateLimiter::try_acquire`]; `InvalidInput` for a key that is empty, longer than
    /// 512 bytes, or has braces or control characters (the message says "rate limiter key").
    ///
    /// # Cancel safety
    /// As [`RateLimiter::try_acquire`].
    pub async fn try_acquire(&self, key: &str, n: u32) -> Result<Decision> {
        validate_named(KEY.0, KEY.1, key)?;
        self.inner.try_acquire(Some(key), n).await
    }

    /// As [`RateLimiter::acquire`], for `key`'s budget.
    ///
    /// # Errors
    /// As [`KeyedRateLimiter::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`RateLimiter::acquire`].
    pub async fn acquire(&self, key: &str, n: u32) -> Result<Decision> {
        validate_named(KEY.0, KEY.1, key)?;
        self.inner.acquire(Some(key), n, Duration::MAX).await
    }

    /// As [`RateLimiter::acquire_timeout`], for `key`'s budget.
    ///
    /// # Errors
    /// As [`RateLimiter::acquire_timeout`].
    ///
    /// # Cancel safety
    /// As [`RateLimiter::acquire`].
    pub async fn acquire_timeout(&self, key: &str, n: u32, max_wait: Duration) -> Result<Decision> {
        validate_named(KEY.0, KEY.1, key)?;
        self.inner.acquire(Some(key), n, max_wait).await
    }

    /// See [`RateLimiter::fail_open`].
    #[must_use]
    pub fn fail_open(mut self, open: bool) -> Self {
        self.inner.fail_open = open;
        self
    }
}

impl crate::Client {
    /// A rate limiter `name` enforcing `quota` on the server's clock (see the module docs).
    ///
    /// # Errors
    /// `InvalidInput` for a bad name, or a quota whose rate, period or burst is zero.
    pub fn rate_limiter(&self, name: &str, quota: Quota) -> Result<RateLimiter> {
        Ok(RateLimiter {
            inner: self.limiter(name, quota)?,
        })
    }

    /// A keyed rate limiter `name`: `quota` for each key separately.
    ///
    /// # Errors
    /// As [`crate::Client::rate_limiter`].
    pub fn keyed_rate_limiter(&self, name: &str, quota: Quota) -> Result<KeyedRateLimiter> {
        Ok(KeyedRateLimiter {
            inner: self.limiter(name, quota)?,
        })
    }

    fn limiter(&self, name: &str, quota: Quota) -> Result<Limiter> {
        Limiter::new(self, name, None, quota, Outage::Own(Arc::default()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Quota;

    #[test]
    fn a_refusal_says_the_limit_and_the_wait_in_a_users_words() {
        use crate::error::wait_text;
        assert_eq!(Quota::per_minute(5).limit_text(), "5 per minute");
        assert_eq!(
            Quota::per_second(100).burst(20).limit_text(),
            "100 per second (burst 20)"
        );
        assert_eq!(
            Quota::per(3, Duration::from_secs(90)).limit_text(),
            "3 per 90.00 s"
        );
        assert_eq!(wait_text(Duration::from_micros(19_980_205)), "19.99 s");
        assert_eq!(wait_text(Duration::from_micros(249_001)), "250 ms");
        assert_eq!(wait_text(Duration::from_secs(7_500)), "2 h 5 min");
    }

    #[test]
    fn a_quota_refused_at_build_says_why() {
        let refused = |quota: Quota| quota.validate().unwrap_err().to_string();
        assert!(refused(Quota::per_second(0)).contains("rate is 0"));
        assert!(refused(Quota::per_second(10).burst(0)).contains("burst is 0"));
        assert!(refused(Quota::per(1, Duration::ZERO)).contains("period is 0"));
        assert!(refused(Quota::per_second(2_000_000)).contains("one cell per microsecond"));
        let endless = Quota::per(1, Duration::from_secs(u64::MAX));
        assert!(
            refused(endless).contains("285 years"),
            "{}",
            refused(endless)
        );
        let long = Quota::per(1, Duration::from_secs(200 * 365 * 86_400)).burst(2);
        assert!(refused(long).contains("285 years"));
        assert!(
            Quota::per(1, Duration::from_secs(200 * 365 * 86_400))
                .validate()
                .is_ok()
        );
        assert!(Quota::per_hour(1_000).burst(50_000).validate().is_ok());
    }
}
