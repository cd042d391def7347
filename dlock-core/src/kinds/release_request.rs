//! Polite release requests: asking the holders of a lock to give it back, without taking it
//! from them ([`Client::request_release`], [`Semaphore::request_release`],
//! [`RwLock::request_release`]); the holder sees [`crate::Lease::release_requested`] and decides.
//!
//! **Delivery.** `ask.lua` records the request beside the lock (`<lock>:ask`: the tokens of
//! the holders asked), and `extend.lua` answers "extended, and asked" to a holder whose token is
//! there. So the request rides on renewals: no subscription per held lock, no new connection,
//! and no wire change for holders that nobody asks (one `HEXISTS` per renewed lock).
//!
//! - A **watchdog** holder learns it with its next renewal: within one renewal interval (a
//!   third of the lease by default, so 10 s for the default 30 s lease), plus a round trip.
//! - A **fixed-lease** holder renews nothing: it learns it only when it calls `extend`.
//! - **Shared locks**: every holder of a semaphore's permits, or every reader (or the writer)
//!   of a read-write lock, at the time of asking is asked; holders that come later are not. A
//!   read-write hold that changes mode (`downgrade`, `upgrade`) becomes a new hold with a new
//!   token: a request it had not heard before the change is not carried over (ask again).
//!
//! A holder that ignores the request keeps the lock: nothing is released or shortened. The
//! forced path stays [`Client::force_unlock`].
//!
//! Trade-off: the latency is the renewal interval, not a round trip. A push to the holder's
//! client would be faster, but it needs the holder's client identity in every lock value (a
//! wire version bump) or a subscription per held lock; a polite request is rarely urgent, and
//! a holder that must go now is forced.

use crate::client::Client;
use crate::error::Result;
use crate::key::{LockKeys, validate_name};
use crate::kinds::rwlock::RwLock;
use crate::kinds::semaphore::Semaphore;
use crate::scripts::{self, Call, unexpected};
use crate::transport::Transport;

impl Client {
    /// Asks the holder of the mutex `name` to give it back; returns how many holders were
    /// asked: 1, or 0 when nobody holds it. The holder sees
    /// [`crate::Lease::release_requested`] resolve — a watchdog holder within one renewal
    /// interval, a fixed-lease holder when it next extends — and decides. Nothing is released:
    /// for that, see [`Client::force_unlock`]. See the module docs for the delivery.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// if client.request_release("nightly-report").await? == 0 {
    ///     println!("nobody holds it");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for an invalid name;
    /// [`crate::ErrorKind::WrongType`] when the lock key holds data dlock did not write (it is
    /// left untouched); [`crate::ErrorKind::Connection`] or [`crate::ErrorKind::Timeout`] when
    /// Redis does not answer in time.
    ///
    /// # Cancel safety
    /// Cancel safe: asking twice asks the same holder again.
    pub async fn request_release(&self, name: &str) -> Result<usize> {
        validate_name(name)?;
        let keys = LockKeys::new(&self.ctx.config.key_prefix, name);
        ask(&self.ctx.transport, &keys).await
    }
}

impl Semaphore {
    /// Asks every holder of this semaphore's permits to give them back; returns how many
    /// holders were asked (0: none). Each sees [`crate::Lease::release_requested`] as a mutex
    /// holder does (see [`Client::request_release`]). Nothing is released.
    ///
    /// # Errors
    /// As [`Client::request_release`].
    ///
    /// # Cancel safety
    /// Cancel safe: asking twice asks the same holders again.
    pub async fn request_release(&self) -> Result<usize> {
        ask(&self.shared.ctx.transport, &self.shared.keys).await
    }
}

impl RwLock {
    /// Asks every holder of this read-write lock (its readers, or its writer) to give it back;
    /// returns how many holders were asked (0: none). Each sees
    /// [`crate::Lease::release_requested`] as a mutex holder does (see
    /// [`Client::request_release`]). Nothing is released.
    ///
    /// # Errors
    /// As [`Client::request_release`].
    ///
    /// # Cancel safety
    /// Cancel safe: asking twice asks the same holders again.
    pub async fn request_release(&self) -> Result<usize> {
        ask(&self.shared.ctx.transport, &self.shared.keys).await
    }
}

/// Runs `ask.lua` for the lock `keys`: the number of holders asked.
async fn ask(transport: &Transport, keys: &LockKeys) -> Result<usize> {
    let mut call = Call::new(&scripts::ASK, 1);
    call.arg(&*keys.lock)
        .arg(if keys.kind().is_shared() { "S" } else { "M" });
    let reply = transport.run(&call, "request_release", keys.name()).await?;
    let asked = match &reply {
        redis::Value::Int(n) => usize::try_from(*n).ok(),
        _ => None,
    }
    .ok_or_else(|| unexpected("request_release", &reply))?;
    tracing::info!(lock = %keys.name(), holders = asked, "dlock: release requested");
    Ok(asked)
}
