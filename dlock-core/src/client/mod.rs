//! [`Client`]: one Redis connection shared by every lock of a process, and its configuration.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod builder;
pub(crate) mod context;
mod credentials;
pub(crate) mod fenced;
pub(crate) mod inspect;
pub(crate) mod shutdown;
mod unsupported;

use crate::error::Result;
use crate::transport::conn::Connection;
use context::Context;

/// A handle on one Redis deployment: cheap to clone, share it across tasks.
///
/// All locks of a client share one auto-reconnecting, multiplexed RESP3 connection, which also
/// carries the wake-up messages of waiting `acquire` calls. Or they share the application's own
/// redis-rs connection ([`crate::ClientBuilder::app_connection`]), and the client keeps a
/// connection of its own for the wake-ups alone.
///
/// ```no_run
/// # async fn demo() -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.mutex("order:42")?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("fencing token {}", guard.fencing_token().await?);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) ctx: Arc<Context>,
}

impl Client {
    /// Checks that Redis answers.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Connection`] or [`crate::ErrorKind::Timeout`] when it does not.
    ///
    /// # Cancel safety
    /// Cancel safe: `PING` changes nothing.
    pub async fn ping(&self) -> Result<()> {
        let _pong: String = self
            .ctx
            .transport
            .query(&redis::cmd("PING"), "PING")
            .await?;
        Ok(())
    }

    /// The client's Redis connection, for your own commands; see [`crate::Connection`].
    pub fn connection(&self) -> Connection {
        Connection::new(self.ctx.transport.slot().clone())
    }

    /// The prefix of every key this client writes.
    pub fn key_prefix(&self) -> &str {
        &self.ctx.config.key_prefix
    }

    /// The lease of locks that do not set their own.
    pub fn default_ttl(&self) -> Duration {
        self.ctx.config.default_ttl
    }

    /// The bound on every Redis request.
    pub fn command_timeout(&self) -> Duration {
        self.ctx.transport.command_timeout()
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.ctx, f)
    }
}
