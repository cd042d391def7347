//! Leader election: [`Election`] (a handle on one election, for candidates and observers alike),
//! [`Leadership`] (what a candidate holds while it leads) and [`Leader`] (who leads, as observers
//! see it).
//!
//! # Design
//! * **Leading is holding a mutex.** The leadership is a watchdog-renewed hold of the mutex
//!   `election:<name>` (keys `<prefix>{election:<name>}…`): candidates wait in the mutex's FIFO
//!   queue, a resignation hands the lock straight to the oldest candidate (a push, no polling),
//!   a leader that dies is replaced when its lease runs out (the waiting candidates' fallback
//!   timer is capped by it), and the server never has two holders, hence never two leaders.
//!   The leader's fencing token is the hold's fence, so it exceeds every earlier leader's.
//! * **Named, not a new key kind.** The mutex is named `election:<name>` rather than given a
//!   suffix of its own in `key::LockKind`: elections then reuse the mutex's scripts, waiters,
//!   orphan releases, `Client::inspect` and `Client::force_unlock` unchanged, and `key.rs` (shared
//!   by every kind) stays as it is. The price: a *mutex* a user names `election:<name>` is the
//!   same lock as the election `<name>`. Mutex names starting with `election:` are best left to
//!   elections.
//! * **The leader record.** The leader writes `<prefix>{election:<name>}:leader` =
//!   `1 <fence> <value>` and publishes a notice on the channel of the same name
//!   (`scripts/election.lua`, `scripts/wire.rs`), in one owner-checked script: only the current
//!   holder, with its own fence, writes; a stale leader (paused past its lease, cut off) never
//!   overwrites or deletes its successor's record. The leader refreshes the record's expiry every
//!   renewal interval (twice the lock's remaining lease, so it outlives the renewals in between);
//!   readers check it against the lock (`scripts/election_read.lua`), so a record that outlives
//!   its leader is never reported. Resigning deletes the record and announces the vacancy.
//! * **Observers** ([`Election::observe`]) listen on the channel over the client's own
//!   connection (`transport/listen.rs`: no extra connection) and also read the record every renewal
//!   interval, just after the leader's lease would end (each read returns the lock's `PTTL`,
//!   so an observer built with the default lease follows candidates that use a short one),
//!   right after a reconnection, and when they start: a lost message never leaves them stale
//!   for longer than that, and a leader that died without a successor is reported gone within
//!   about the candidates' lease. They keep the highest fence seen and never go
//!   back to an older one, so every observer sees leaders in the same order (fences strictly
//!   increase). A reply and a notice can cross; each read also reports the slot's fence counter
//!   and the lock's fence at the time it ran, so an old read never hides a newer leader.
//! * **A watch channel** (`tokio::sync::watch::Receiver<Option<Leader>>`) rather than a
//!   `Stream`: the latest leader is what observers act on, a slow observer never builds a
//!   backlog, and `borrow()`, `changed()` and `wait_for()` are familiar (wrap it in
//!   `tokio_stream::wrappers::WatchStream` for a `Stream`). The price: an observer may skip a
//!   leader replaced before it looked, and may or may not see the vacancy between two leaders —
//!   it never sees them out of order.
//!
//! What it does not do: fence the leader's *work*. A leader paused past its lease still believes
//! it leads until it looks at its lease ([`Leadership::lost`], [`Leadership::remaining`]); a
//! store that must never accept a stale leader's write checks [`Leadership::fencing_token`].
//!
//! Here: the handle, campaigning, the leader record's writes and the observers' task; what an
//! observer knows, and [`Leader`], in `observed.rs`.

mod observed;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::client::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::{MutexGuard, ReleaseOutcome};
use crate::key::{LockKeys, validate_name};
use crate::kinds::mutex::Mutex;
use crate::lease::{Lease, LeaseLost};
use crate::options::{MutexOptions, Renewal};
use crate::runtime::spawn_detached;
use crate::scripts::wire::LeaderNotice;
use crate::scripts::{self, Call, ElectionReply, LeaderRead, unexpected};
use crate::token::{FencingToken, OwnerToken};
use crate::transport::listen::{Heard, Subscription};

pub use observed::Leader;
use observed::Observed;

/// What the election's mutex is named after: `election:<name>`.
const MUTEX_PREFIX: &str = "election:";

/// Longest accepted leader value, in bytes: it is published with every change of leader.
const MAX_VALUE_LEN: usize = 64 * 1024;

/// How long after a lease's end, by the server's `PTTL`, an observer reads again: the key has
/// expired by then (Redis counts expiry in ms), so the read sees the vacancy.
const EXPIRY_MARGIN: Duration = Duration::from_millis(10);

/// A handle on the leader election called `name`, for candidates and observers. Cheap to clone.
///
/// Create it with [`crate::Client::election`]. [`Election::campaign`] waits until this caller
/// leads (first come, first served among candidates) and returns its [`Leadership`];
/// [`Election::observe`] follows who leads, candidate or not.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// let election = client.election("billing-primary")?;
/// let leadership = election.campaign("10.0.0.7:8080").await?;
/// tokio::select! {
///     lost = leadership.lost() => eprintln!("no longer the leader: {lost}"),
///     () = async { /* … lead, passing leadership.fencing_token() to the store … */ } => {
///         leadership.resign().await?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: Arc<Context>,
    mutex: Mutex,
    /// The mutex's keys: the lock key, and the slot's fence counter.
    keys: LockKeys,
    /// The election's name, as the user gave it.
    name: Box<str>,
    /// `<lock key>:leader`: the leader record, and the channel of its notices.
    record: Box<str>,
    /// How often the leader refreshes its record and observers read it: the watchdog's renewal
    /// interval.
    interval: Duration,
}

impl Election {
    /// Checks the name and options and builds the handle (see [`crate::Client::election_with`]).
    pub(crate) fn new(ctx: Arc<Context>, name: &str, mut options: MutexOptions) -> Result<Self> {
        validate_name(name)?;
        let mutex_name = format!("{MUTEX_PREFIX}{name}");
        validate_name(&mutex_name)?;
        // The leadership is renewed while it lasts; its fence must be kept in the lock's value,
        // where the scripts check it (the `fenced` fast path keeps it with the holder only).
        options.watchdog = true;
        options.fenced = false;
        let settings = options.settings(ctx.config.default_ttl)?;
        let interval = match settings.renewal {
            Renewal::Watchdog { interval, .. } => interval,
            Renewal::Fixed => settings.ttl / 3,
        };
        let keys = LockKeys::new(&ctx.config.key_prefix, &mutex_name);
        let record = format!("{}:leader", keys.lock).into_boxed_str();
        let mutex = Mutex::new(ctx.clone(), keys.clone(), settings);
        Ok(Self {
            inner: Arc::new(Inner {
                ctx,
                mutex,
                keys,
                name: name.into(),
                record,
                interval,
            }),
        })
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The leader's lease: a leader that dies is replaced within about this long.
    pub fn ttl(&self) -> Duration {
        self.inner.mutex.ttl()
    }

    /// Waits, without a time limit, until this caller leads, then publishes `value` as the
    /// leader's and returns the [`Leadership`].
    ///
    /// Candidates are served first come, first served, across processes: a resigning leader
    /// hands over to the oldest candidate at once, a leader that died is replaced once its
    /// lease has run out. The lease is renewed by the client's watchdog while the leadership
    /// lasts.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a value longer than 64 KiB; [`ErrorKind::LeaseLost`]
    /// when the leadership was lost before it could be published (nothing is held then);
    /// otherwise as [`crate::Mutex::acquire`] ([`ErrorKind::Connection`],
    /// [`ErrorKind::Timeout`], [`ErrorKind::Shutdown`] …).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves the candidates' queue, and a leadership obtained
    /// meanwhile is given back in the background (the next candidate leads).
    pub async fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        self.campaign_until(value.into(), None).await
    }

    /// As [`Election::campaign`], waiting at most `wait` to lead.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when another candidate led for the whole wait (this caller is not a
    /// candidate any more), otherwise as [`Election::campaign`].
    ///
    /// # Cancel safety
    /// As [`Election::campaign`].
    pub async fn campaign_timeout(
        &self,
        value: impl Into<String>,
        wait: Duration,
    ) -> Result<Leadership> {
        self.campaign_until(value.into(), Some(wait)).await
    }

    async fn campaign_until(&self, value: String, wait: Option<Duration>) -> Result<Leadership> {
        if value.len() > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "election `{}`: the leader's value is {} bytes long; the limit is \
                 {MAX_VALUE_LEN} bytes (publish an address or an id, not a payload)",
                self.name(),
                value.len()
            )));
        }
        let guard = match wait {
            None => self.inner.mutex.acquire().await?,
            Some(wait) => self.inner.mutex.acquire_timeout(wait).await?,
        };
        // Issued with a hand-off; one round trip (kept in the lock's value) otherwise.
        let fence = guard.fencing_token().await?;
        let lease = guard.lease();
        let token = lease.core.token;
        let held = Held {
            election: self.clone(),
            guard: Some(guard),
            token,
            fence,
        };
        if held.write(Write::Publish(&value)).await? == ElectionReply::NotLeader {
            return Err(Error::new(
                ErrorKind::LeaseLost,
                format!(
                    "election `{}`: the leadership was lost before it was published (its lease \
                     ran out); campaign again",
                    self.name()
                ),
            ));
        }
        tracing::debug!(election = %self.name(), %fence, "dlock: leading");
        let value: Arc<str> = value.into();
        spawn_refresh(held.refresh(value.clone()), lease.cancellation_token());
        Ok(Leadership { lease, value, held })
    }

    /// Who leads now, by one read of the leader record, checked against the election's lock:
    /// `None` while nobody leads (or the new leader has not published yet).
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer in time.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.read().await?.leader.map(|(fence, value)| Leader {
            fence: FencingToken::new(fence),
            value,
        }))
    }

    /// Follows who leads: a receiver of the current leader (`None` while nobody leads), updated
    /// as leaders change. Anyone may observe, candidate or not.
    ///
    /// Changes arrive pushed (a notice published with every change of leader, heard on the
    /// client's own connection); the record is also read every renewal interval (a third of the
    /// lease by default), just after the current leader's lease would end (so an observer
    /// follows the lease its candidates use, whatever this handle's) and after a reconnection,
    /// so a lost notice, or a leader that died without a successor, is noticed within about the
    /// shorter of the two. Every observer sees leaders in
    /// the same order, fences strictly increasing: it never goes back to an older leader. It may
    /// skip a leader replaced before it looked, and a vacancy between two leaders. While Redis
    /// cannot be reached it keeps the last leader it knew.
    ///
    /// Following ends when every receiver is dropped, or the client is shut down (then
    /// `changed()` returns an error).
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let mut leaders = client.election("billing-primary")?.observe().await?;
    /// loop {
    ///     if let Some(leader) = &*leaders.borrow_and_update() {
    ///         println!("send writes to {} (fence {})", leader.value(), leader.fencing_token());
    ///     }
    ///     if leaders.changed().await.is_err() {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when the subscription or the first
    /// read fails (later failures are retried in the background); [`ErrorKind::Shutdown`] after
    /// [`crate::Client::shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the subscription.
    pub async fn observe(&self) -> Result<watch::Receiver<Option<Leader>>> {
        if self.inner.ctx.is_closed() {
            return Err(self.inner.ctx.closed_error(self.name()));
        }
        // Subscribe first, then read: a change published in between is heard, not lost.
        let subscription = self
            .inner
            .ctx
            .transport
            .subscribe(&self.inner.record)
            .await?;
        let mut seen = Observed::default();
        let first = self.read().await?;
        let next_read = self.next_read(&first);
        seen.read(first);
        let (sender, receiver) = watch::channel(seen.current.clone());
        let follow = follow(self.clone(), subscription, seen, sender, next_read);
        if !spawn_detached(follow) {
            return Err(Error::no_runtime("dlock_core::Election::observe"));
        }
        Ok(receiver)
    }

    /// When an observer reads the record again after `read`: within its renewal interval, and
    /// just after the leader's lease would end unless its candidates renew it. The candidates
    /// may use a shorter lease than this handle (an observer is often built with the
    /// defaults): a leader that died is then noticed within its own lease, not this handle's
    /// interval.
    fn next_read(&self, read: &LeaderRead) -> Instant {
        let interval = self.inner.interval;
        let wait = read
            .lease_left
            .map_or(interval, |left| interval.min(left + EXPIRY_MARGIN));
        Instant::now() + wait
    }

    /// Runs `election_read.lua` once.
    async fn read(&self) -> Result<LeaderRead> {
        let inner = &self.inner;
        let mut call = Call::new(&scripts::ELECTION_READ, 2);
        call.arg(&*inner.keys.lock)
            .arg(&*inner.record)
            .arg(inner.keys.counter());
        let reply = inner
            .ctx
            .transport
            .run(&call, "election", self.name())
            .await?;
        LeaderRead::decode(&reply).ok_or_else(|| unexpected("election", &reply))
    }
}

/// An observer's background task: applies notices and reads to `seen`, and sends each change,
/// until every receiver is gone or the client is shut down.
async fn follow(
    election: Election,
    mut subscription: Subscription,
    mut seen: Observed,
    sender: watch::Sender<Option<Leader>>,
    mut next_read: Instant,
) {
    let interval = election.inner.interval;
    loop {
        let mut read_now = false;
        let changed = tokio::select! {
            () = sender.closed() => return,
            heard = subscription.next() => match heard {
                Some(Heard::Message(payload)) => match LeaderNotice::parse(&payload) {
                    Some(notice) => {
                        // A new leader: one read learns its lease (the notice does not carry
                        // it), so that the next read follows it.
                        read_now = matches!(notice, LeaderNotice::Leader { .. });
                        seen.notice(notice)
                    }
                    None => {
                        tracing::debug!(election = %election.name(), "dlock: ignored a notice dlock did not write");
                        false
                    }
                },
                Some(Heard::Gap) => {
                    read_now = true;
                    false
                }
                None => return,
            },
            () = tokio::time::sleep_until(next_read.into()) => {
                read_now = true;
                false
            }
        };
        if changed {
            sender.send_replace(seen.current.clone());
        }
        if election.inner.ctx.is_closed() {
            return;
        }
        if read_now {
            next_read = Instant::now() + interval;
            match election.read().await {
                Ok(read) => {
                    next_read = election.next_read(&read);
                    if seen.read(read) {
                        sender.send_replace(seen.current.clone());
                    }
                }
                Err(e) => {
                    tracing::debug!(election = %election.name(), error = %e, "dlock: reading the leader failed; retrying");
                }
            }
        }
    }
}

/// The leadership of one candidate: it leads until it resigns, drops this, or its lease is
/// lost.
///
/// The lease is renewed by the client's watchdog; [`Leadership::lost`] and
/// [`Leadership::cancellation_token`] say when it ends for any other reason (renewal failed,
/// Redis unreachable past the lease, `max_hold`, the client shut down). Dropping it resigns in
/// the background.
///
/// ```no_run
/// # async fn demo(election: dlock_core::Election) -> Result<(), dlock_core::Error> {
/// let leadership = election.campaign("worker-3").await?;
/// let stop = leadership.cancellation_token();
/// // … hand `stop` to the work only the leader does …
/// # drop(stop);
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
pub struct Leadership {
    lease: Lease,
    value: Arc<str>,
    held: Held,
}

impl Leadership {
    /// The election's name.
    pub fn name(&self) -> &str {
        self.held.election.name()
    }

    /// The value this leader published.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The leadership's fencing token: larger than every earlier leader's. Pass it to the
    /// storage the leader writes to.
    pub fn fencing_token(&self) -> FencingToken {
        self.held.fence
    }

    /// A cheap handle on the leadership's lease.
    pub fn lease(&self) -> Lease {
        self.lease.clone()
    }

    /// Until when this caller certainly leads (the lease, counted conservatively).
    pub fn safe_until(&self) -> Instant {
        self.lease.safe_until()
    }

    /// How long this caller certainly leads; zero once the lease ran out.
    pub fn remaining(&self) -> Duration {
        self.lease.remaining()
    }

    /// Completes when the leadership is lost (see [`crate::Lease::lost`]): from then on another
    /// candidate may lead.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LeaseLost {
        self.lease.lost().await
    }

    /// A token cancelled when the leadership is lost (or given up).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.lease.cancellation_token()
    }

    /// Gives the leadership up: deletes the leader record and announces the vacancy (only if it
    /// is still this leader's), then releases the lock, which hands it to the oldest candidate
    /// at once. Says what the release found.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer the
    /// release in time (it is retried once in the background; the lease expires otherwise). A
    /// failed announcement is only logged: observers learn from the next leader or their next
    /// read.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future releases the leadership in the background.
    pub async fn resign(self) -> Result<ReleaseOutcome> {
        let mut held = self.held;
        if let Err(e) = held.write(Write::Resign).await {
            tracing::warn!(election = %held.election.name(), error = %e, "dlock: announcing the resignation failed; releasing anyway");
        }
        match held.guard.take() {
            Some(guard) => guard.release().await,
            None => Ok(ReleaseOutcome::Expired),
        }
    }
}

/// A write about the leadership (`election.lua`'s modes).
#[derive(Clone, Copy)]
enum Write<'a> {
    /// Write the record with this value and announce it (or refresh its expiry).
    Publish(&'a str),
    /// Delete the record and announce the vacancy.
    Resign,
}

/// The hold behind a [`Leadership`]: dropped without a resignation, it resigns in the
/// background (the record first, then the lock).
struct Held {
    election: Election,
    guard: Option<MutexGuard>,
    token: OwnerToken,
    fence: FencingToken,
}

impl Held {
    /// Runs `election.lua` once, as this hold.
    async fn write(&self, write: Write<'_>) -> Result<ElectionReply> {
        run_write(&self.election, self.token, self.fence, write).await
    }

    /// What the refresh task needs: it outlives nothing (it stops with the lease).
    fn refresh(&self, value: Arc<str>) -> Refresh {
        Refresh {
            election: self.election.clone(),
            token: self.token,
            fence: self.fence,
            value,
        }
    }
}

/// Runs `election.lua` once for the hold of `token` with `fence`.
async fn run_write(
    election: &Election,
    token: OwnerToken,
    fence: FencingToken,
    write: Write<'_>,
) -> Result<ElectionReply> {
    let inner = &election.inner;
    let (mode, value) = match write {
        Write::Publish(value) => ("publish", value),
        Write::Resign => ("resign", ""),
    };
    let mut call = Call::new(&scripts::ELECTION, 2);
    call.arg(&*inner.keys.lock)
        .arg(&*inner.record)
        .arg(mode)
        .arg(token)
        .arg(fence.get())
        .arg(inner.ctx.transport.slot().publish_command())
        .arg(value);
    let reply = inner
        .ctx
        .transport
        .run(&call, "election", election.name())
        .await?;
    ElectionReply::decode(&reply).ok_or_else(|| unexpected("election", &reply))
}

/// The leader's refresh of its record (its expiry, or the record itself if it went missing).
struct Refresh {
    election: Election,
    token: OwnerToken,
    fence: FencingToken,
    value: Arc<str>,
}

/// Refreshes the record every renewal interval until `stop` is cancelled (the lease is lost or
/// given up) or the script finds this leader no longer leads.
fn spawn_refresh(refresh: Refresh, stop: CancellationToken) {
    spawn_detached(async move {
        let interval = refresh.election.inner.interval;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let write = Write::Publish(&refresh.value);
            match run_write(&refresh.election, refresh.token, refresh.fence, write).await {
                // The lease is lost: the watchdog tells the leader.
                Ok(ElectionReply::NotLeader) => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(election = %refresh.election.name(), error = %e, "dlock: refreshing the leader record failed; retrying");
                }
            }
        }
    });
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let (election, token, fence) = (self.election.clone(), self.token, self.fence);
        // Without a runtime the future is dropped unrun, and the guard with it (which releases
        // in the background where it can; the lease expires otherwise).
        spawn_detached(async move {
            if let Err(e) = run_write(&election, token, fence, Write::Resign).await {
                tracing::debug!(election = %election.name(), error = %e, "dlock: announcing a dropped leadership failed");
            }
            drop(guard);
        });
    }
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner {
            ctx: _,
            mutex,
            keys: _,
            name,
            record,
            interval,
        } = &*self.inner;
        f.debug_struct("Election")
            .field("name", name)
            .field("record", record)
            .field("ttl", &mutex.ttl())
            .field("interval", interval)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { lease, value, held } = self;
        f.debug_struct("Leadership")
            .field("name", &held.election.name())
            .field("value", value)
            .field("fence", &held.fence)
            .field("remaining", &lease.remaining())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A handle on the leader election called `name` (the client's default TTL as the
    /// leader's lease, renewed by the watchdog); see [`Election`].
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let leadership = client.election("scheduler")?.campaign("host-a").await?;
    /// # drop(leadership); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name (as [`Client::mutex`]; the election's
    /// mutex is named `election:<name>`, which must fit [`crate::MAX_NAME_LEN`] too).
    pub fn election(&self, name: &str) -> Result<Election> {
        self.election_with(name, MutexOptions::new())
    }

    /// A handle on the leader election called `name` with explicit options: the leader's lease
    /// (`ttl`), `renew_every`, `max_hold` (leadership ends after it) and `label` apply as to a
    /// mutex's hold; the watchdog is always on; `reentrant`, `on_lost` and `fenced` do not
    /// apply (every leadership is fenced).
    ///
    /// # Errors
    /// As [`Client::election`], and for invalid options (as [`Client::mutex_with`]).
    pub fn election_with(&self, name: &str, options: MutexOptions) -> Result<Election> {
        Election::new(self.ctx.clone(), name, options)
    }
}
