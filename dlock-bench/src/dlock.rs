//! dlock as a [`Subject`], through its ordinary public API as a user would call it: a handle from
//! `Client::mutex_with` (TTL 10 s), a blocking `acquire_timeout` (30 s), and `release`.
//!
//! Its variants ([`Variant`]): the client and lock with default options (the row the targets are
//! about), and, when asked for with `--subjects`, a client built with
//! `ClientBuilder::tcp_nodelay(true)` / `(false)` (to decide that setting by measurement, issue
//! #13) and locks taken with `MutexOptions::fenced()` (the fence fetched in the acquire's own
//! round trip).
//!
//! Three calls here stand in for dlock-core API that is about to change or to appear; each is
//! the one line to edit when it does:
//! * [`read_fence`]: the holder's fencing token (W2-fence), issued on demand
//!   (`MutexGuard::fencing_token`, one round trip the first time unless `fenced`).
//! * [`client_with`]: `ClientBuilder::tcp_nodelay(bool)`, to run dlock with Nagle on or off.
//! * [`mutex_options`]: `MutexOptions::fenced()`, the fence fetched in the acquire's round trip.

use std::marker::PhantomData;

use dlock_core::{Client, ErrorKind, FencingToken, Mutex, MutexGuard, MutexOptions};

use crate::redis_stats::Plain;
use crate::rt::BoxError;
use crate::spec::{ACQUIRE_WAIT, TTL};
use crate::subject::Subject;

/// A dlock client, built as variant `V` says.
#[derive(Debug)]
pub(crate) struct Dlock<V = Defaults>(pub(crate) Client, PhantomData<V>);

impl From<Client> for Dlock {
    fn from(client: Client) -> Self {
        Dlock(client, PhantomData)
    }
}

/// How the benchmark builds a dlock client and its locks.
pub(crate) trait Variant: Send + Sync + 'static {
    /// [`Subject::NAME`].
    const NAME: &'static str;
    /// [`Subject::LABEL`].
    const LABEL: &'static str;
    /// `None`: the builder's default; `Some(on)`: `ClientBuilder::tcp_nodelay(on)`.
    const NODELAY: Option<bool> = None;
    /// Whether locks are taken with `MutexOptions::fenced()`.
    const FENCED: bool = false;
}

/// dlock's default options (today dlock-core turns Nagle off: `TCP_NODELAY` on).
#[derive(Debug)]
pub(crate) struct Defaults;

impl Variant for Defaults {
    const NAME: &'static str = "dlock";
    const LABEL: &'static str = "dlock";
}

/// `ClientBuilder::tcp_nodelay(true)`.
#[derive(Debug)]
pub(crate) struct Nodelay;

impl Variant for Nodelay {
    const NAME: &'static str = "dlock_nodelay";
    const LABEL: &'static str = "dlock, tcp_nodelay(true)";
    const NODELAY: Option<bool> = Some(true);
}

/// `ClientBuilder::tcp_nodelay(false)`: Nagle on, the `redis` crate's default.
#[derive(Debug)]
pub(crate) struct Nagle;

impl Variant for Nagle {
    const NAME: &'static str = "dlock_nagle";
    const LABEL: &'static str = "dlock, tcp_nodelay(false)";
    const NODELAY: Option<bool> = Some(false);
}

/// Locks taken with `MutexOptions::fenced()`.
#[derive(Debug)]
pub(crate) struct Fenced;

impl Variant for Fenced {
    const NAME: &'static str = "dlock_fenced";
    const LABEL: &'static str = "dlock, fenced()";
    const FENCED: bool = true;
}

/// A dlock client with default options for the server at `url` (no I/O until first used).
pub(crate) fn client(url: &str) -> Result<Client, BoxError> {
    client_with(url, None)
}

/// A dlock client for `url`, with `ClientBuilder::tcp_nodelay(on)` when `nodelay` is
/// `Some(on)`.
pub(crate) fn client_with(url: &str, nodelay: Option<bool>) -> Result<Client, BoxError> {
    let builder = Client::builder(url);
    let builder = match nodelay {
        None => builder,
        Some(on) => builder.tcp_nodelay(on),
    };
    builder
        .build()
        .map_err(|e| format!("cannot build the dlock client: {e}").into())
}

/// The options of every lock the benchmark takes: TTL 10 s, and `MutexOptions::fenced()` when
/// `fenced`.
pub(crate) fn mutex_options(fenced: bool) -> Result<MutexOptions, BoxError> {
    let options = MutexOptions::new().ttl(TTL);
    match fenced {
        false => Ok(options),
        true => Ok(options.fenced()),
    }
}

/// Reads the fencing token of `guard`, as a holder that fences its writes does (W2-fence).
///
/// # Errors
/// None today; with issue #13's on-demand fence, the error of fetching it.
pub(crate) async fn read_fence(guard: &MutexGuard) -> Result<FencingToken, BoxError> {
    Ok(guard.fencing_token().await?)
}

impl<V: Variant> Subject for Dlock<V> {
    const NAME: &'static str = V::NAME;
    const LABEL: &'static str = V::LABEL;
    const WAITS: bool = true;
    const FENCES: bool = true;
    /// Every acquire sends one plain `SET NX` first (the uncontended acquire is that `SET`
    /// alone), and dlock's scripts write with `SET` too: the client's `SET`s are the
    /// acquisitions. With `fenced()` the `SET` is in a `MULTI`, and its `EXEC` counts the trip.
    const OWN_PLAIN: Plain = if V::FENCED {
        Plain::NONE
    } else {
        Plain::once_per_op("set")
    };
    type Lock<'a> = Mutex;
    type Guard<'a> = MutexGuard;

    async fn connect(url: &str) -> Result<Self, BoxError> {
        // Fails here, before any workload starts, when dlock-core lacks the variant's option.
        mutex_options(V::FENCED)?;
        Ok(Self(client_with(url, V::NODELAY)?, PhantomData))
    }

    fn lock<'a>(&'a self, name: &'a str) -> Result<Mutex, BoxError> {
        Ok(self.0.mutex_with(name, mutex_options(V::FENCED)?)?)
    }

    async fn acquire<'a, 'l: 'a>(lock: &'a Self::Lock<'l>) -> Result<Option<MutexGuard>, BoxError> {
        match lock.acquire_timeout(ACQUIRE_WAIT).await {
            Ok(guard) => Ok(Some(guard)),
            Err(e) if e.kind() == ErrorKind::Busy => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn read_fence(guard: &Self::Guard<'_>) -> Result<(), BoxError> {
        std::hint::black_box(read_fence(guard).await?);
        Ok(())
    }

    async fn release(guard: Self::Guard<'_>) -> Result<bool, BoxError> {
        Ok(guard.release().await?.was_held())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uncontended_acquire_counts_as_one_round_trip() {
        let one_set = Plain::once_per_op("set");
        assert_eq!(<Dlock<Defaults> as Subject>::OWN_PLAIN, one_set);
        assert_eq!(<Dlock<Nodelay> as Subject>::OWN_PLAIN, one_set);
        assert_eq!(<Dlock<Fenced> as Subject>::OWN_PLAIN, Plain::NONE);
    }
}
