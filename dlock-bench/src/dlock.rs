//! dlock as a [`Subject`], through its ordinary public API as a user would call it: a handle from
//! `Client::mutex_with` (TTL 10 s), a blocking `acquire_timeout` (30 s), and `release`.

use dlock_core::{Client, ErrorKind, Mutex, MutexGuard, MutexOptions};

use crate::rt::BoxError;
use crate::spec::{ACQUIRE_WAIT, TTL};
use crate::subject::Subject;

/// A dlock client with default options.
#[derive(Clone, Debug)]
pub(crate) struct Dlock(pub(crate) Client);

/// A dlock client with default options for the server at `url` (no I/O until first used).
pub(crate) fn client(url: &str) -> Result<Client, BoxError> {
    Client::builder(url)
        .build()
        .map_err(|e| format!("cannot build the dlock client: {e}").into())
}

impl Subject for Dlock {
    const NAME: &'static str = "dlock";
    const LABEL: &'static str = "dlock";
    const WAITS: bool = true;
    type Lock<'a> = Mutex;
    type Guard<'a> = MutexGuard;

    async fn connect(url: &str) -> Result<Self, BoxError> {
        Ok(Self(client(url)?))
    }

    fn lock<'a>(&'a self, name: &'a str) -> Result<Mutex, BoxError> {
        Ok(self.0.mutex_with(name, MutexOptions::new().ttl(TTL))?)
    }

    async fn acquire<'a, 'l: 'a>(lock: &'a Self::Lock<'l>) -> Result<Option<MutexGuard>, BoxError> {
        match lock.acquire_timeout(ACQUIRE_WAIT).await {
            Ok(guard) => Ok(Some(guard)),
            Err(e) if e.kind() == ErrorKind::Busy => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn release(guard: Self::Guard<'_>) -> Result<bool, BoxError> {
        Ok(guard.release().await?.was_held())
    }
}
