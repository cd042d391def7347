//! Real Redis for your tests, and the trouble a distributed lock must survive.
//!
//! dlock-testkit starts real `redis-server` processes for one test — never a mock, never a
//! system Redis service — and breaks them when the test says so: a lease lost in the middle of
//! the work, a lock holder that stops running, a master that dies, a clock that jumps,
//! connections that drop. It was written for the tests of [dlock](https://docs.rs/dlock-core)
//! and knows dlock's key layout, but the servers work with any Redis client.
//!
//! ```no_run
//! use dlock_testkit::RedisServer;
//!
//! let server = RedisServer::start()?; // a free port on 127.0.0.1, its own temp dir
//! let url = server.url(); // "redis://127.0.0.1:<port>/": build the client under test with it
//! // ... the code under test takes the lock "invoice:7" and works under it ...
//! # let mut con = server.connection()?;
//! # redis::cmd("SET").arg("dlock:{invoice:7}").arg("holder").exec(&mut con)?;
//! server.expire_lock("invoice:7")?; // its lease is lost now
//! // ... assert that it stopped, and that its late writes are refused ...
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A complete `#[tokio::test]` with a dlock client — a handler that stops when its lease is
//! lost, and a stale write refused by its fencing token — is in the crate's README.
//!
//! # What it starts
//!
//! Every server runs in a temp dir of its own on a free port of 127.0.0.1, with persistence
//! off; a handle that drops SIGKILLs and reaps its processes and removes the dir. A server that
//! loses the race for its port is started again on another. Every failure is a
//! [`HarnessError`] that carries the command line and the tail of the server's log, so a failing
//! test explains itself.
//!
//! - [`RedisServer`]: one standalone server ([`ServerOptions`] adds `redis-server` arguments,
//!   a password, TLS, a movable clock).
//! - [`RedisCluster`]: a Redis Cluster of 3 masters (or more), every slot served, returned once
//!   each node reports `cluster_state:ok`.
//! - [`RedisNodes`]: N independent servers, as Redlock (quorum mode) expects.
//! - [`RedisReplicaSet`]: a master and N replicas, returned once every replica is linked and
//!   caught up; [`RedisSentinels`]: 3 sentinels watching it (a master is down after 1 s).
//! - [`PostgresServer`]: a PostgreSQL server on a Unix socket in its temp dir, for code that
//!   checks fencing tokens in SQL.
//! - [`Network`]: servers, replicas, sentinels and client processes in network namespaces of
//!   their own, joined through a router namespace where faults cut the links (root and
//!   iproute2 only; see below).
//! - [`ChildGuard`] and [`LineChild`]: a child process of the test — a lock holder of your
//!   own — killed and reaped on drop; `LineChild` talks to it in lines on stdin and stdout.
//!
//! # Faults
//!
//! | what happens | how | what the code under test should see |
//! | --- | --- | --- |
//! | the lease is lost now | [`RedisServer::expire_lock`], [`RedisCluster::expire_lock`] (`_with_prefix` for a custom key prefix) | its next renewal finds the lock gone: `lease.lost()` resolves, the cancellation token fires |
//! | a holder stops running (a GC pause, a VM freeze) | [`ChildGuard::pause`], [`pause_process`]: a [`Paused`] guard that resumes it on drop | its lease runs out while it sleeps; resumed, it acts on what it knew, and only a fencing token stops its writes |
//! | connections drop | [`RedisServer::cut_connections`], [`RedisCluster::cut_connections`] | requests in flight fail; the client reconnects |
//! | Redis hangs | [`RedisServer::pause`] / [`resume`](RedisServer::resume) | requests time out; a renewed lease is lost once it can no longer be renewed in time |
//! | Redis crashes | [`RedisServer::kill`], [`restart`](RedisServer::restart) (empty), [`crash_and_recover`](RedisServer::crash_and_recover) (back to the last save), [`RedisCluster::restart_node`] | errors while it is down; locks and fence counters gone after an empty restart |
//! | the master dies | [`RedisReplicaSet::kill_master`], then [`RedisSentinels::wait_failover`] or [`RedisReplicaSet::promote_replica`] | a failover: writes not yet replicated are lost |
//! | a replica lags | [`RedisReplicaSet::pause_replica`] | `WAIT` counts it out |
//! | a network partition | [`Network::partition`] (any sets of nodes), [`Network::isolate`] (a master with a minority) | requests across the cut time out; a lease that cannot be renewed is lost within its TTL |
//! | a one-way cut | [`Network::cut_one_way`] | TCP stalls both ways (its acknowledgements are cut) |
//! | a half-open link: packets vanish, no RST | [`Network::half_open`] | both ends keep their connections open and hear nothing until a timeout of their own |
//! | the network heals | [`Network::heal`] | the client is back within its own timeouts, not TCP's |
//! | a slow, jittery link | [`Network::relay`] (a user-space TCP relay in a node, [`Latency`]) | every round trip through it takes its delay twice, plus jitter; bytes keep their order |
//! | the server's clock jumps | [`ServerOptions::movable_clock`] + [`RedisServer::jump_clock`] | keys expire early; the machine's clock is not touched |
//!
//! `expire_lock` knows dlock's keys: `<prefix>{<name>}` for a mutex, `<prefix>{<name>}:sem`
//! (and `:sem:exp`) for a semaphore, `<prefix>{<name>}:rw` (and `:rw:exp`) for a read-write
//! lock, with dlock's default prefix [`DEFAULT_KEY_PREFIX`] (`dlock:`). It returns how many
//! keys it removed, and is an error when there was none, so a test knows the fault landed.
//!
//! # Blocking calls in async tests
//!
//! The kit is synchronous. Starting a server, `expire_lock` or `cut_connections` take
//! milliseconds and can be called straight from a `#[tokio::test]`. Calls that wait for the
//! servers — a cluster start, [`RedisSentinels::wait_failover`], [`RedisServer::jump_clock`] —
//! block the thread for up to seconds: while the code under test must run meanwhile (a
//! watchdog renewing, a waiter being woken), use a multi-thread runtime
//! (`#[tokio::test(flavor = "multi_thread")]`) or `tokio::task::spawn_blocking`.
//!
//! If the test process itself is killed (SIGKILL), its servers outlive it: a child cannot be
//! tied to its parent's death without `unsafe`, which the kit does not use.
//!
//! # Requirements
//!
//! - **Linux.** Processes are paused with signals and the movable clock is an `LD_PRELOAD`
//!   library.
//! - **`redis-server` and `redis-cli`, Redis 7** (`redis-cli` only for [`RedisCluster`], which
//!   it creates): `$DLOCK_REDIS_SERVER` / `$DLOCK_REDIS_CLI` ([`REDIS_SERVER_ENV`],
//!   [`REDIS_CLI_ENV`]: a path, or a name looked up in `PATH`), else `PATH`, else `/usr/bin`.
//!   A variable that names no executable is an error, not a fallback. On Debian or Ubuntu:
//!   `apt-get install -y redis-server redis-tools` (the kit never uses the package's own
//!   service).
//! - **A C compiler** (`$CC`, else `cc`), only for [`ServerOptions::movable_clock`]: the clock
//!   shim is compiled on first use and cached in the temp dir. On Debian: `apt-get install -y
//!   gcc`.
//! - **PostgreSQL 15**, only for [`PostgresServer`]: `initdb` and `postgres` in
//!   `$DLOCK_POSTGRES_BIN` ([`POSTGRES_BIN_ENV`]), else `/usr/lib/postgresql/15/bin`, else
//!   `pg_config --bindir`. On Debian: `apt-get install -y postgresql-15`.
//!   [`PostgresServer::check_requirements`] says what is missing, for a test that reports
//!   itself skipped.
//!
//! - **Root and iproute2**, only for [`Network`] (`ip netns`, veth pairs, `ip rule … blackhole`;
//!   the kernel needs no `tc`). On Debian: `apt-get install -y iproute2`.
//!   [`Network::check_requirements`] says what is missing, for a test that reports itself
//!   skipped.
//!
//! TLS needs nothing more: certificates are made at start-up ([`TlsMaterial`]).
//!
//! # Example: a failover
//!
//! ```no_run
//! use dlock_testkit::{RedisReplicaSet, RedisSentinels};
//!
//! let mut set = RedisReplicaSet::start(2)?;
//! let sentinels = RedisSentinels::start(&set)?;
//! let mut master = set.master().connection()?;
//! let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut master)?;
//! let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut master)?;
//! assert!(acked >= 1);
//!
//! let old = set.master().port();
//! set.kill_master();
//! let new = sentinels.wait_failover(old)?; // seconds: down after 1 s, then a vote
//! let promoted = &set.replicas()[set.replica_index(new).ok_or("not a replica")?];
//! let v: Option<String> = redis::cmd("GET").arg("k").query(&mut promoted.connection()?)?;
//! assert_eq!(v.as_deref(), Some("v"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Example: a holder process frozen past its lease
//!
//! ```no_run
//! use std::process::Command;
//! use std::time::Duration;
//! use dlock_testkit::{LineChild, RedisServer};
//!
//! let server = RedisServer::start()?;
//! let mut cmd = Command::new("target/debug/my-worker"); // your program: takes a lock, works
//! cmd.env("REDIS_URL", server.url());
//! let holder = LineChild::spawn(cmd)?;
//! holder.wait_for("locked", Duration::from_secs(10))?; // it printed "locked"
//! {
//!     let _frozen = holder.process().pause()?;
//!     // ... its lease runs out; take the lock from the test, write with the newer fence ...
//! } // SIGCONT: the holder runs on, and its next write must be refused
//! # Ok::<(), dlock_testkit::HarnessError>(())
//! ```
//!
//! # Example: a partition
//!
//! ```no_run
//! use dlock_testkit::{Network, ServerOptions};
//!
//! let mut net = Network::start()?; // needs root: see Requirements
//! let master = net.add_node("master")?;
//! let replica = net.add_node("replica")?;
//! net.start_server(master, ServerOptions::new())?;
//! net.start_replica(replica, master, ServerOptions::new())?;
//! net.partition(&[&[master], &[replica]])?;
//! // The test's own connection goes through a Unix socket: no fault cuts it.
//! let mut con = net.server(master)?.connection()?;
//! let acked: i64 = redis::cmd("WAIT").arg(1).arg(100).query(&mut con)?;
//! assert_eq!(acked, 0); // the replica is cut off
//! net.heal()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! | module | what |
//! | --- | --- |
//! | `error` | [`HarnessError`] |
//! | `binary` | locating `redis-server` / `redis-cli` |
//! | `flavour` | [`ServerFlavour`]: Redis or Valkey, and its version, from the binary's `--version` |
//! | `options` | [`ServerOptions`] and the server command line |
//! | `port` | free ports (and free cluster bus ports) |
//! | `launch` | spawning one server (or sentinel), waiting until it is ready (pid-checked), wiping data for a restart |
//! | `server` | [`RedisServer`], its faults |
//! | `lock_keys` | dlock's key layout, for [`RedisServer::expire_lock`] |
//! | `clock` | the movable clock: building `clock_shim.c`, its offset file |
//! | `cluster` | [`RedisCluster`] |
//! | `tls` | certificates for a TLS server, made with `rcgen` |
//! | `nodes` | [`RedisNodes`] |
//! | `replicas` | [`RedisReplicaSet`], and reading `INFO replication` |
//! | `sentinel` | [`RedisSentinels`]: config files, discovery, failover |
//! | `postgres` | [`PostgresServer`]: finding the programs, the template cluster, start-up and stop |
//! | `network` | [`Network`]: namespaces and veth links (`netns`), the cuts of each fault (`cuts`) and their `ip rule`s (`faults`), servers and sentinels inside a node (`servers`, `node_server`: [`NetServer`]), the TCP relay (`relay`: [`Relay`]) |
//! | `process` | [`ChildGuard`] and signals |
//! | `pause` | [`Paused`]: a process frozen until the guard drops |
//! | `lines` | [`LineChild`]: the line protocol over a child's stdin and stdout |

mod binary;
mod clock;
mod cluster;
mod error;
mod flavour;
mod launch;
mod lines;
mod lock_keys;
mod network;
mod nodes;
mod options;
mod pause;
mod port;
mod postgres;
mod process;
mod replicas;
mod sentinel;
mod server;
mod tls;

pub use binary::{REDIS_CLI_ENV, REDIS_SERVER_ENV, redis_cli_binary, redis_server_binary};
pub use cluster::RedisCluster;
pub use error::HarnessError;
pub use flavour::{ServerFlavour, ServerKind, server_flavour};
pub use lines::LineChild;
pub use lock_keys::DEFAULT_KEY_PREFIX;
pub use network::relay::{Latency, Relay};
pub use network::{NetServer, Network, NodeId, SENTINEL_MASTER_NAME, SENTINEL_PORT, SERVER_PORT};
pub use nodes::RedisNodes;
pub use options::ServerOptions;
pub use pause::{Paused, pause_process};
pub use postgres::{POSTGRES_BIN_ENV, PostgresServer};
pub use process::ChildGuard;
pub use replicas::RedisReplicaSet;
pub use sentinel::RedisSentinels;
pub use server::RedisServer;
pub use tls::{TlsMaterial, unrelated_ca_pem};
