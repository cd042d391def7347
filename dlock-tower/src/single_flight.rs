//! Single-flight across replicas: one caller computes, every concurrent caller of the same key
//! (in this process or another) receives its result.
//!
//! How ([`SingleFlightExt::single_flight`]):
//! 1. A result stored for the key and still fresh is returned at once.
//! 2. The caller tries the key's mutex (`sf:<key>`, a watchdog lease). The winner looks again
//!    under the lock (a flight may have ended in between), computes, and stores the result by
//!    a **guarded write under its lease** with the result's lifetime (`ttl`), then releases
//!    and announces `done` on the key's own channel (`<prefix>{sf:<key>}:done`, not the lock's
//!    wake channel, whose messages are grants).
//! 3. The others subscribe to that channel first, then look again (so an announcement between
//!    the two is not missed), then wait for an announcement or a re-check timer (messages can
//!    be lost), each time reading the result, or trying the lock if it is free.
//! 4. A winner whose computation fails releases and announces `failed`: the waiters try the
//!    lock, one wins and computes, the others keep waiting for it. A winner that dies or loses
//!    its lease stores nothing (the guarded write is refused: fenced), its lock runs out or is
//!    taken, and again one waiter takes over. A stale winner's result never reaches anyone;
//!    its own caller gets [`ErrorKind::LeaseLost`].
//!
//! Why here and not in dlock-core: it needs serde for the results, which dlock-core does not
//! depend on, and it is built from dlock-core's public API alone (a mutex, a guarded write,
//! `ext::subscribe`); dlock-core stays as it is.
//!
//! The stored result, versioned like every dlock-tower record:
//! `dlock-single-flight/1\n<fence>\n<the value as JSON>`; another version is refused
//! ([`ErrorKind::Format`]).

use std::future::Future;
use std::time::{Duration, Instant};

use dlock_core::{Client, Guarded, Mutex, MutexGuard, MutexOptions, ext};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind, Result};

const MAGIC: &str = "dlock-single-flight/";
const VERSION: u32 = 1;

/// How a single flight waits and what it accepts; [`SingleFlightOptions::default`] has the
/// defaults named on each setter.
#[derive(Clone, Debug)]
pub struct SingleFlightOptions {
    lease: Duration,
    wait: Duration,
    recheck: Duration,
    max_size: usize,
    fail_open: bool,
    prefix: String,
}

impl Default for SingleFlightOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            wait: Duration::from_secs(30),
            recheck: Duration::from_millis(250),
            max_size: 1 << 20,
            fail_open: false,
            prefix: "singleflight:".into(),
        }
    }
}

impl SingleFlightOptions {
    /// The winner's lease, renewed by the watchdog every third (default 30 s): how long a
    /// winner that died keeps the waiters waiting before one takes over.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a caller waits for another's result before [`ErrorKind::Timeout`] (default
    /// 30 s).
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// How often a waiter looks again without an announcement (default 250 ms): the bound on
    /// how late a lost message or a winner's death is noticed, besides the lease.
    #[must_use]
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every;
        self
    }

    /// The largest serialized result (default 1 MiB); larger is [`ErrorKind::TooLarge`] for
    /// the winner, and a waiter takes over.
    #[must_use]
    pub fn max_size(mut self, bytes: usize) -> Self {
        self.max_size = bytes;
        self
    }

    /// When Redis cannot be reached: `false` (default) returns the error; `true` computes
    /// without coordination (every such caller computes).
    #[must_use]
    pub fn fail_open(mut self, open: bool) -> Self {
        self.fail_open = open;
        self
    }

    /// The prefix of the result keys (default `singleflight:`); outside the client's key
    /// prefix.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

/// `client.single_flight(key, ttl, || fut)` on a dlock [`Client`].
pub trait SingleFlightExt {
    /// Runs `compute` on one caller of `key` at a time across every process that shares the
    /// Redis, and gives its result to every caller that waits for it; the result stays
    /// readable for `ttl` after it is stored (callers in that time get it without computing).
    /// See the module docs for the protocol.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_tower::Error> {
    /// use std::time::Duration;
    /// use dlock_tower::SingleFlightExt;
    ///
    /// let prices: Vec<u32> = client
    ///     .single_flight("prices:eu", Duration::from_secs(5), || async {
    ///         Ok::<_, std::io::Error>(vec![120, 99]) // the expensive call
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// * [`ErrorKind::Compute`]: this caller computed and `compute` failed (its error is the
    ///   source); a waiter takes over.
    /// * [`ErrorKind::Timeout`]: no result within the options' `wait`.
    /// * [`ErrorKind::LeaseLost`]: this caller computed but lost its lease first: its result
    ///   was not stored (a successor's is the one shared).
    /// * [`ErrorKind::TooLarge`]: this caller's result is over `max_size`.
    /// * [`ErrorKind::Format`]: the stored result is of another format version, or does not
    ///   deserialize as `T`.
    /// * [`ErrorKind::Core`]: Redis failed (unless failing open), or the key is one dlock
    ///   refuses as a lock name, or the lease is under dlock's shortest watchdog lease;
    ///   [`ErrorKind::InvalidInput`] for a `ttl` or a re-check interval under 1 ms.
    ///
    /// # Cancel safety
    /// A dropped winner releases its lock in the background (a waiter takes over at its next
    /// re-check); a dropped waiter leaves nothing behind.
    fn single_flight<T, E, F, Fut>(
        &self,
        key: &str,
        ttl: Duration,
        compute: F,
    ) -> impl Future<Output = Result<T>> + Send
    where
        T: Serialize + DeserializeOwned + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send;

    /// [`SingleFlightExt::single_flight`] with options.
    ///
    /// # Errors
    /// As [`SingleFlightExt::single_flight`].
    ///
    /// # Cancel safety
    /// As [`SingleFlightExt::single_flight`].
    fn single_flight_with<T, E, F, Fut>(
        &self,
        key: &str,
        ttl: Duration,
        options: &SingleFlightOptions,
        compute: F,
    ) -> impl Future<Output = Result<T>> + Send
    where
        T: Serialize + DeserializeOwned + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send;
}

impl SingleFlightExt for Client {
    fn single_flight<T, E, F, Fut>(
        &self,
        key: &str,
        ttl: Duration,
        compute: F,
    ) -> impl Future<Output = Result<T>> + Send
    where
        T: Serialize + DeserializeOwned + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
    {
        let options = SingleFlightOptions::default();
        let key = key.to_owned();
        async move { flight(self, &key, ttl, &options, compute).await }
    }

    fn single_flight_with<T, E, F, Fut>(
        &self,
        key: &str,
        ttl: Duration,
        options: &SingleFlightOptions,
        compute: F,
    ) -> impl Future<Output = Result<T>> + Send
    where
        T: Serialize + DeserializeOwned + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
    {
        flight(self, key, ttl, options, compute)
    }
}

async fn flight<T, E, F, Fut>(
    client: &Client,
    key: &str,
    ttl: Duration,
    options: &SingleFlightOptions,
    compute: F,
) -> Result<T>
where
    T: Serialize + DeserializeOwned + Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = std::result::Result<T, E>> + Send,
{
    let (mutex, flight) = Flight::new(client, key, ttl, options)?;
    let deadline = Instant::now() + options.wait;
    let mut subscription: Option<ext::Subscription> = None;
    loop {
        match flight.read::<T>().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => return fallback(e, options, compute).await,
        }
        match mutex.try_acquire().await {
            Ok(Some(guard)) => return flight.lead(guard, compute).await,
            Ok(None) => {}
            Err(e) => return fallback(e.into(), options, compute).await,
        }
        let Some(sub) = subscription.as_mut() else {
            // Subscribed first, then looked at again: an announcement in between is not lost.
            match ext::subscribe(client, &flight.channel).await {
                Ok(sub) => subscription = Some(sub),
                Err(e) => return fallback(e.into(), options, compute).await,
            }
            continue;
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::new(
                ErrorKind::Timeout,
                format!("single flight `{key}`: no result within {:?}", options.wait),
            ));
        }
        tokio::select! {
            _ = sub.next() => {}
            () = tokio::time::sleep(options.recheck.min(deadline - now)) => {}
        }
    }
}

/// Redis failed: compute alone when it is unreachable and the options fail open, else the
/// error.
async fn fallback<T, E, F, Fut>(e: Error, options: &SingleFlightOptions, compute: F) -> Result<T>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
    F: FnOnce() -> Fut,
    Fut: Future<Output = std::result::Result<T, E>>,
{
    if e.is_unavailable() && options.fail_open {
        tracing::warn!(error = %e, "single flight: Redis unavailable, computing alone (fail open)");
        return compute().await.map_err(computed);
    }
    Err(e)
}

fn computed<E: Into<Box<dyn std::error::Error + Send + Sync>>>(e: E) -> Error {
    let source = e.into();
    Error::new(
        ErrorKind::Compute,
        format!("single flight: the computation failed: {source}"),
    )
    .with_source(source)
}

/// One key's flight: where its result and announcements go.
struct Flight<'a> {
    client: &'a Client,
    result: String,
    channel: String,
    ttl: Duration,
    options: &'a SingleFlightOptions,
}

impl<'a> Flight<'a> {
    /// The key's mutex and flight, after checking the arguments.
    fn new(
        client: &'a Client,
        key: &str,
        ttl: Duration,
        options: &'a SingleFlightOptions,
    ) -> Result<(Mutex, Self)> {
        if ttl < Duration::from_millis(1) || options.recheck < Duration::from_millis(1) {
            return Err(Error::invalid(
                "single flight: the result's ttl and the re-check interval must be at least 1 ms",
            ));
        }
        let lock = format!("sf:{key}");
        let mutex = client.mutex_with(
            &lock,
            MutexOptions::new()
                .ttl(options.lease)
                .watchdog()
                .reentrant(false)
                .fenced(),
        )?;
        let result = format!("{}{{{lock}}}", options.prefix);
        let flight = Self {
            client,
            channel: format!("{result}:done"),
            result,
            ttl,
            options,
        };
        Ok((mutex, flight))
    }

    /// The stored result, if any.
    async fn read<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        let cmd = dlock_core::redis::cmd("GET").arg(&self.result).clone();
        let value: Option<Vec<u8>> =
            ext::query(self.client, &cmd, "read a single-flight result").await?;
        value.map(|bytes| decode(&self.result, &bytes)).transpose()
    }

    /// The winner: look again under the lock, compute, store under the lease, release,
    /// announce.
    async fn lead<T, E, F, Fut>(&self, guard: MutexGuard, compute: F) -> Result<T>
    where
        T: Serialize + DeserializeOwned,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        match self.read::<T>().await {
            Ok(None) => {}
            done => {
                release(guard).await;
                return done.and_then(|value| {
                    value.ok_or_else(|| Error::invalid("single flight: no result"))
                });
            }
        }
        let fence = guard.issued_fencing_token().map_or(0, |f| f.get());
        let value = match compute().await {
            Ok(value) => value,
            Err(e) => return Err(self.abandon(guard, computed(e)).await),
        };
        let bytes = match encode(fence, &value) {
            Ok(bytes) if bytes.len() <= self.options.max_size => bytes,
            Ok(bytes) => {
                let e = Error::new(
                    ErrorKind::TooLarge,
                    format!(
                        "single flight: the result is {} bytes, over the limit of {}",
                        bytes.len(),
                        self.options.max_size
                    ),
                );
                return Err(self.abandon(guard, e).await);
            }
            Err(e) => return Err(self.abandon(guard, e).await),
        };
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let written = guard
            .guarded()
            .cmd("SET", &self.result, (bytes, "PX", ttl_ms))
            .exec()
            .await;
        release(guard).await;
        match written {
            Ok(Guarded::Applied(_)) => {
                self.announce("done").await;
                Ok(value)
            }
            Ok(_) => {
                self.announce("failed").await;
                Err(Error::new(
                    ErrorKind::LeaseLost,
                    "single flight: the lease was lost before the result was stored; nothing                      stored, a successor's result is the one shared",
                ))
            }
            Err(e) => {
                self.announce("failed").await;
                Err(e.into())
            }
        }
    }

    /// The winner gives up: release, let a waiter take over, return `e`.
    async fn abandon(&self, guard: MutexGuard, e: Error) -> Error {
        release(guard).await;
        self.announce("failed").await;
        e
    }

    /// Wakes the waiters (best effort: they re-check on a timer anyway).
    async fn announce(&self, what: &str) {
        let cmd = dlock_core::redis::cmd(ext::publish_command(self.client))
            .arg(&self.channel)
            .arg(what)
            .clone();
        if let Err(e) = ext::query::<i64>(self.client, &cmd, "announce a single flight").await {
            tracing::debug!(error = %e, "single flight: announcement failed; waiters re-check");
        }
    }
}

async fn release(guard: MutexGuard) {
    if let Err(e) = guard.release().await {
        tracing::debug!(error = %e, "single flight: release failed; the lease runs out by itself");
    }
}

fn encode<T: Serialize>(fence: u64, value: &T) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(value).map_err(|e| {
        Error::new(
            ErrorKind::Format,
            format!("single flight: the result does not serialize: {e}"),
        )
    })?;
    let mut out = format!("{MAGIC}{VERSION}\n{fence}\n").into_bytes();
    out.extend_from_slice(&json);
    Ok(out)
}

fn decode<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T> {
    let format = |why: String| {
        Error::new(
            ErrorKind::Format,
            format!("single-flight result `{key}`: {why}"),
        )
    };
    let text = bytes
        .strip_prefix(MAGIC.as_bytes())
        .ok_or_else(|| format("not written by dlock-tower".into()))?;
    let mut parts = text.splitn(3, |b| *b == b'\n');
    let (version, _fence, json) = (parts.next(), parts.next(), parts.next());
    let version = String::from_utf8_lossy(version.unwrap_or_default());
    if version.parse::<u32>().ok() != Some(VERSION) {
        return Err(format(format!(
            "format version {version:?}, and this dlock-tower reads version {VERSION} only"
        )));
    }
    let json = json.ok_or_else(|| format("truncated".into()))?;
    serde_json::from_slice(json)
        .map_err(|e| format(format!("does not deserialize as the type asked for: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_and_other_versions_are_refused() {
        let bytes = encode(7, &vec![1u32, 2]).unwrap();
        assert!(bytes.starts_with(b"dlock-single-flight/1\n7\n"));
        assert_eq!(decode::<Vec<u32>>("k", &bytes).unwrap(), vec![1, 2]);
        let e = decode::<Vec<u32>>("k", b"dlock-single-flight/2\n7\n[1]").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format);
        assert!(e.to_string().contains("version \"2\""), "{e}");
        assert_eq!(
            decode::<u32>("k", b"junk").unwrap_err().kind(),
            ErrorKind::Format
        );
        assert_eq!(
            decode::<u32>("k", &bytes).unwrap_err().kind(),
            ErrorKind::Format
        );
    }
}
