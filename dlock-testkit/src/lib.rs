//! A real-Redis test harness for the dlock workspace (`publish = false`).
//!
//! Integration tests, examples and the benchmark run against real `redis-server` child
//! processes, never a mock and never a system Redis service. Each server lives in its own temp
//! dir on a free port of 127.0.0.1, with persistence off, and is SIGKILLed and reaped when its
//! handle drops.
//!
//! - [`RedisServer`]: one standalone server, with fault injection: [`kill`](RedisServer::kill)
//!   (a crash), [`restart`](RedisServer::restart) (same port, data lost),
//!   [`pause`](RedisServer::pause) / [`resume`](RedisServer::resume) (SIGSTOP / SIGCONT).
//! - [`RedisCluster`]: N masters (default 3) joined with `redis-cli --cluster create`, returned
//!   once every node reports `cluster_state:ok`.
//! - [`RedisNodes`]: N independent servers, for Redlock.
//! - [`RedisReplicaSet`]: one master and N replicas (`REPLICAOF`), returned once every replica
//!   is linked and caught up, with [`kill_master`](RedisReplicaSet::kill_master),
//!   [`pause_replica`](RedisReplicaSet::pause_replica) (SIGSTOP: real replication lag on
//!   loopback), [`promote_replica`](RedisReplicaSet::promote_replica) (`REPLICAOF NO ONE`) and
//!   replication offsets.
//! - [`RedisSentinels`]: 3 sentinels (`redis-server --sentinel`, quorum 2, a master down after
//!   1 s) watching a [`RedisReplicaSet`], returned once each knows the master, the replicas and
//!   the other sentinels; [`wait_failover`](RedisSentinels::wait_failover) waits until they
//!   have promoted a new master.
//! - A movable wall clock for one server ([`ServerOptions::movable_clock`],
//!   [`RedisServer::jump_clock`]): a clock shim preloaded into that process only.
//! - TLS for one server ([`ServerOptions::tls`]): a TLS port beside the plain one, with a CA,
//!   a server and a client certificate made at start-up ([`TlsMaterial`]). The same options
//!   make a TLS replica set (`tls-replication yes`, one CA), whose [`RedisSentinels`] get TLS
//!   ports too ([`RedisSentinels::tls_urls`]), and a TLS cluster (`tls-cluster yes`,
//!   [`RedisCluster::tls_urls`]). The harness itself keeps using the plain ports.
//! - [`PostgresServer`]: one PostgreSQL server (Debian's PostgreSQL 15) listening only on a
//!   Unix socket in its temp dir, run as the `postgres` OS user when the tests run as root,
//!   stopped by pid on drop; [`PostgresServer::check_requirements`] says what is missing
//!   where it cannot run, so that its tests can say they are skipped.
//! - [`ChildGuard`]: any child process, killed and reaped on drop (multi-process tests).
//! - [`LineChild`]: a child process that talks in lines on its stdin and stdout (test workers,
//!   the benchmark's children), read with a time limit.
//!
//! Every startup failure is a [`HarnessError`] whose text includes the command line and the tail
//! of the server log, so a failing test explains itself.
//!
//! # Requirements
//!
//! `redis-server` and `redis-cli` (Redis 7): found through `DLOCK_REDIS_SERVER` /
//! `DLOCK_REDIS_CLI`, else `PATH`, else `/usr/bin`. On Debian: `apt-get install -y redis-server
//! redis-tools` (or `make deps`).
//!
//! PostgreSQL, only for [`PostgresServer`]: `initdb` and `postgres` in `$DLOCK_POSTGRES_BIN`,
//! else `/usr/lib/postgresql/15/bin`, else `pg_config --bindir`. On Debian, as root:
//! `apt-get install -y postgresql-15`, or `make deps`, which keeps the package from creating
//! and starting a cluster of its own.
//!
//! # Example
//!
//! ```no_run
//! use dlock_testkit::RedisServer;
//!
//! let server = RedisServer::start()?;
//! let mut con = server.connection()?;
//! let pong: String = redis::cmd("PING").query(&mut con)?;
//! assert_eq!(pong, "PONG");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
//! # Layout
//!
//! | module | what |
//! | --- | --- |
//! | `error` | [`HarnessError`] |
//! | `binary` | locating `redis-server` / `redis-cli` |
//! | `options` | [`ServerOptions`] and the server command line |
//! | `port` | free ports (and free cluster bus ports) |
//! | `launch` | spawning one server (or sentinel), waiting until it is ready (pid-checked), wiping data for a restart |
//! | `server` | [`RedisServer`] |
//! | `clock` | the movable clock: building `clock_shim.c`, its offset file |
//! | `cluster` | [`RedisCluster`] |
//! | `tls` | certificates for a TLS server, made with `rcgen` |
//! | `nodes` | [`RedisNodes`] |
//! | `replicas` | [`RedisReplicaSet`], and reading `INFO replication` |
//! | `sentinel` | [`RedisSentinels`]: config files, discovery, failover |
//! | `postgres` | [`PostgresServer`]: finding the programs, the template cluster, start-up and stop |
//! | `process` | [`ChildGuard`] and signals |
//! | `lines` | [`LineChild`]: the line protocol over a child's stdin and stdout |

mod binary;
mod clock;
mod cluster;
mod error;
mod launch;
mod lines;
mod lock_keys;
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
pub use lines::LineChild;
pub use lock_keys::DEFAULT_KEY_PREFIX;
pub use nodes::RedisNodes;
pub use options::ServerOptions;
pub use pause::{Paused, pause_process};
pub use postgres::{POSTGRES_BIN_ENV, PostgresServer};
pub use process::ChildGuard;
pub use replicas::RedisReplicaSet;
pub use sentinel::RedisSentinels;
pub use server::RedisServer;
pub use tls::{TlsMaterial, unrelated_ca_pem};
