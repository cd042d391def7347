//! What is measured: the raw floor or dlock, behind one `pair` call so that W1 and W2 drive both
//! through exactly the same loop, runtime and warm-up.

use dlock_core::{Client, MutexOptions};
use serde::{Deserialize, Serialize};

use crate::floor::Floor;
use crate::rt::BoxError;
use crate::spec::{ACQUIRE_WAIT, TTL};

/// Which subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Floor,
    Dlock,
}

/// A connected subject.
pub(crate) enum Subject {
    Floor(Floor),
    Dlock(Client),
}

impl Subject {
    /// Connects `kind` to the server at `url`; must run inside the Tokio runtime that will
    /// drive it (dlock's client spawns its connection task there).
    pub(crate) async fn connect(kind: Kind, url: &str) -> Result<Subject, BoxError> {
        Ok(match kind {
            Kind::Floor => Subject::Floor(Floor::connect(url).await?),
            Kind::Dlock => Subject::Dlock(
                Client::builder(url)
                    .build()
                    .map_err(|e| format!("cannot build the dlock client: {e}"))?,
            ),
        })
    }

    /// One pair on lock `name`: acquire, then release.
    ///
    /// dlock goes through its ordinary public API, as a user would: a handle from
    /// `Client::mutex_with` (TTL 10 s), a blocking `acquire_timeout`, and `release`.
    pub(crate) async fn pair(&self, name: &str) -> Result<(), BoxError> {
        match self {
            Subject::Floor(floor) => floor.pair(name).await,
            Subject::Dlock(client) => {
                let lock = client.mutex_with(name, MutexOptions::new().ttl(TTL))?;
                let guard = lock.acquire_timeout(ACQUIRE_WAIT).await?;
                let outcome = guard.release().await?;
                if !outcome.was_held() {
                    return Err(format!("dlock: `{name}` was {outcome:?} at release").into());
                }
                Ok(())
            }
        }
    }

    /// Plain (non-script) commands the subject sends, once per pair, that `INFO commandstats`
    /// cannot tell apart from Lua-internal calls: the floor's `SET`.
    pub(crate) fn own_plain(&self) -> &'static [&'static str] {
        match self {
            Subject::Floor(_) => &["set"],
            Subject::Dlock(_) => &[],
        }
    }
}
