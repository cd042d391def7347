//! Starting redis-servers, replicas and sentinels inside the nodes of a [`Network`], and
//! asking the sentinels where the master is.
//!
//! Each binds the node's address (clients in other nodes reach it through the router) and
//! announces it (`replica-announce-ip`, `sentinel announce-ip`), so that what a sentinel tells
//! a client is an address the client can reach. The harness reaches each through a Unix socket
//! (see `node_server.rs`).

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::node_server::{NetServer, Role, Spec};
use super::{
    FAILOVER_TIMEOUT, LINK_TIMEOUT, Network, NodeId, SENTINEL_MASTER_NAME, SENTINEL_PORT,
    SERVER_PORT, log_arg, poll, server_binary, server_dir, socket_addr, write_file,
};
use crate::{HarnessError, ServerOptions};

/// `sentinel down-after-milliseconds`, as [`crate::RedisSentinels`] has it.
const DOWN_AFTER_MS: u64 = 1000;
/// `sentinel failover-timeout`.
const FAILOVER_TIMEOUT_MS: u64 = 3000;

impl Network {
    /// Starts a redis-server with `options` in `node`, on [`SERVER_PORT`] of the node's
    /// address, and waits until it answers.
    ///
    /// # Errors
    ///
    /// When the node is not in the network or already runs a server, the options ask for TLS
    /// or a cluster (not offered inside a network), or the server does not start (the error
    /// has its log).
    pub fn start_server(
        &mut self,
        node: NodeId,
        options: ServerOptions,
    ) -> Result<&NetServer, HarnessError> {
        self.launch_server(node, options, &[])
    }

    /// Starts a replica of `master`'s server in `node`, and waits until its link to the master
    /// is up. A master with `requirepass` needs the same password in `options`.
    ///
    /// # Errors
    ///
    /// As [`start_server`](Self::start_server); also when `master` runs no server, or the
    /// link is not up within 20 s.
    pub fn start_replica(
        &mut self,
        node: NodeId,
        master: NodeId,
        options: ServerOptions,
    ) -> Result<&NetServer, HarnessError> {
        self.server(master)?;
        let master_ip = self.address(master).to_string();
        let mut extra = vec![
            ("replicaof".to_owned(), format!("{master_ip} {SERVER_PORT}")),
            (
                "replica-announce-ip".to_owned(),
                self.address(node).to_string(),
            ),
        ];
        if let Some(password) = options.password() {
            extra.push(("masterauth".to_owned(), password.to_owned()));
        }
        let extra: Vec<(&str, &str)> = extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.launch_server(node, options, &extra)?;
        let replica = self.server(node)?;
        poll(LINK_TIMEOUT, || {
            let info: String = replica
                .query(redis::cmd("INFO").arg("replication"))
                .map_err(|e| e.to_string())?;
            if info.lines().any(|l| l.trim() == "master_link_status:up") {
                Ok(())
            } else {
                Err(format!(
                    "the replica in node {} has no link up to its master",
                    node.0
                ))
            }
        })
        .map_err(|why| HarnessError::new(why).with_section("replica log", replica.log()))?;
        Ok(replica)
    }

    fn launch_server(
        &mut self,
        node: NodeId,
        options: ServerOptions,
        extra: &[(&str, &str)],
    ) -> Result<&NetServer, HarnessError> {
        options.validate()?;
        if options.has_tls() || options.is_cluster() {
            return Err(HarnessError::new(
                "a Network runs plain standalone servers: TLS and cluster options are not offered",
            ));
        }
        if self.servers.iter().any(|(n, _)| *n == node) {
            return Err(HarnessError::new(format!(
                "node {} already runs a server",
                node.0
            )));
        }
        let ns = self.namespace(node)?.to_owned();
        let addr = socket_addr(self.address(node), SERVER_PORT);
        let dir = server_dir()?;
        let mut args = options.command_args(SERVER_PORT, dir.path());
        // The kit's servers bind 127.0.0.1: here, the node's address.
        if let Some(value) = args
            .iter()
            .position(|a| a == "--bind")
            .and_then(|i| args.get_mut(i + 1))
        {
            *value = addr.ip().to_string().into();
        }
        let socket = NetServer::socket_path(dir.path());
        for (name, value) in [
            ("unixsocket", socket.into_os_string()),
            ("unixsocketperm", "700".into()),
        ]
        .into_iter()
        .chain(extra.iter().map(|(k, v)| (*k, OsString::from(*v))))
        {
            args.push(format!("--{name}").into());
            args.push(value);
        }
        let env = options.env(dir.path())?;
        let binary = server_binary(&options)?;
        let password = options.password().map(str::to_owned);
        let spec = Spec {
            ns,
            role: Role::Server,
            addr,
            program: binary,
            args,
            env,
            password,
        };
        let server = NetServer::launch(spec, dir)?;
        self.servers.push((node, server));
        Ok(&self.servers[self.servers.len() - 1].1)
    }

    /// Starts a sentinel in `node` that monitors `master`'s server (as
    /// [`SENTINEL_MASTER_NAME`], with `quorum`), on [`SENTINEL_PORT`] of the node's address.
    /// A node may run a server and a sentinel. Call
    /// [`wait_sentinels`](Self::wait_sentinels) once all are started.
    ///
    /// # Errors
    ///
    /// When the node already runs a sentinel, `master` runs no server, or the sentinel does
    /// not start.
    pub fn start_sentinel(
        &mut self,
        node: NodeId,
        master: NodeId,
        quorum: usize,
    ) -> Result<&NetServer, HarnessError> {
        if self.sentinels.iter().any(|(n, _)| *n == node) {
            return Err(HarnessError::new(format!(
                "node {} already runs a sentinel",
                node.0
            )));
        }
        self.server(master)?;
        let ns = self.namespace(node)?.to_owned();
        let addr = socket_addr(self.address(node), SENTINEL_PORT);
        let dir = server_dir()?;
        let config = format!(
            "port {SENTINEL_PORT}\nbind {ip}\nunixsocket {socket}\nunixsocketperm 700\n\
             dir {dir}\nlogfile {log}\ndaemonize no\nprotected-mode no\n\
             sentinel announce-ip {ip}\n\
             sentinel monitor {name} {master_ip} {SERVER_PORT} {quorum}\n\
             sentinel down-after-milliseconds {name} {DOWN_AFTER_MS}\n\
             sentinel failover-timeout {name} {FAILOVER_TIMEOUT_MS}\n",
            ip = addr.ip(),
            socket = NetServer::socket_path(dir.path()).display(),
            dir = dir.path().display(),
            log = log_arg(&dir).to_string_lossy(),
            name = SENTINEL_MASTER_NAME,
            master_ip = self.address(master),
        );
        let config = write_file(&dir, "sentinel.conf", &config)?;
        let binary = server_binary(&ServerOptions::new())?;
        let args = vec![config, "--sentinel".into()];
        let spec = Spec {
            ns,
            role: Role::Sentinel,
            addr,
            program: binary,
            args,
            env: Vec::new(),
            password: None,
        };
        let sentinel = NetServer::launch(spec, dir)?;
        self.sentinels.push((node, sentinel));
        Ok(&self.sentinels[self.sentinels.len() - 1].1)
    }

    /// Waits until every running sentinel sees the master up, `replicas` replicas and every
    /// other sentinel (hello messages come every 2 s, so this takes seconds).
    ///
    /// # Errors
    ///
    /// When they have not within 30 s; the error says what one of them still missed.
    pub fn wait_sentinels(&self, replicas: usize) -> Result<(), HarnessError> {
        let others = self.sentinels.len().saturating_sub(1);
        poll(FAILOVER_TIMEOUT, || {
            for (node, sentinel) in self.sentinels.iter().filter(|(_, s)| s.pid().is_some()) {
                let master: Vec<String> = sentinel
                    .query(redis::cmd("SENTINEL").arg("MASTER").arg(SENTINEL_MASTER_NAME))
                    .map_err(|e| e.to_string())?;
                let field = |name: &str| {
                    master
                        .chunks(2)
                        .find(|kv| kv[0] == name)
                        .and_then(|kv| kv.get(1).cloned())
                        .unwrap_or_default()
                };
                let seen = (field("flags"), field("num-slaves"), field("num-other-sentinels"));
                if seen != ("master".into(), replicas.to_string(), others.to_string()) {
                    return Err(format!(
                        "the sentinel in node {} sees (flags, replicas, other sentinels) = {seen:?}",
                        node.0
                    ));
                }
            }
            Ok(())
        })
        .map_err(HarnessError::new)
    }

    /// The node whose server the sentinel in `sentinel_node` names as the master.
    ///
    /// # Errors
    ///
    /// When that node runs no sentinel, it cannot be asked, or it names an address outside
    /// the network.
    pub fn sentinel_master(&self, sentinel_node: NodeId) -> Result<NodeId, HarnessError> {
        let sentinel = self.sentinel(sentinel_node)?;
        let addr: Option<(String, u16)> = sentinel.query(
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(SENTINEL_MASTER_NAME),
        )?;
        let (host, _) = addr.ok_or_else(|| HarnessError::new("the sentinel knows no master"))?;
        self.nodes()
            .into_iter()
            .find(|&n| self.address(n).to_string() == host)
            .ok_or_else(|| {
                HarnessError::new(format!("the sentinel names {host}, no node's address"))
            })
    }

    /// Waits until a majority of the running sentinels name the same master other than
    /// `old`, and that server says it is a master; returns its node. A majority, not all: a
    /// sentinel isolated with the old master goes on naming it until the heal.
    ///
    /// # Errors
    ///
    /// When no failover completes within 30 s (the error says what was seen last).
    pub fn wait_failover(&self, old: NodeId) -> Result<NodeId, HarnessError> {
        poll(FAILOVER_TIMEOUT, || {
            let running: Vec<NodeId> = self
                .sentinels
                .iter()
                .filter(|(_, s)| s.pid().is_some())
                .map(|(n, _)| *n)
                .collect();
            let mut named: BTreeMap<NodeId, usize> = BTreeMap::new();
            for &node in &running {
                if let Ok(master) = self.sentinel_master(node) {
                    *named.entry(master).or_insert(0) += 1;
                }
            }
            let (new, votes) = named
                .iter()
                .filter(|(n, _)| **n != old)
                .max_by_key(|(_, v)| **v)
                .map(|(n, v)| (*n, *v))
                .ok_or_else(|| format!("the sentinels name {named:?} (node indices)"))?;
            if votes * 2 <= running.len() {
                return Err(format!(
                    "{votes} of {} sentinels name node {}",
                    running.len(),
                    new.0
                ));
            }
            let role: Vec<redis::Value> = self
                .server(new)
                .and_then(|s| s.query(&redis::cmd("ROLE")))
                .map_err(|e| e.to_string())?;
            match role.first() {
                Some(redis::Value::BulkString(r)) if r == b"master" => Ok(new),
                other => Err(format!("node {} answers ROLE with {other:?}", new.0)),
            }
        })
        .map_err(HarnessError::new)
    }

    /// The redis-server in `node`.
    ///
    /// # Errors
    ///
    /// When the node runs none.
    pub fn server(&self, node: NodeId) -> Result<&NetServer, HarnessError> {
        find(&self.servers, node, "server")
    }

    /// The redis-server in `node`, to kill or restart it.
    ///
    /// # Errors
    ///
    /// When the node runs none.
    pub fn server_mut(&mut self, node: NodeId) -> Result<&mut NetServer, HarnessError> {
        self.servers
            .iter_mut()
            .find(|(n, _)| *n == node)
            .map(|(_, s)| s)
            .ok_or_else(|| HarnessError::new(format!("node {} runs no server", node.0)))
    }

    /// The sentinel in `node`.
    ///
    /// # Errors
    ///
    /// When the node runs none.
    pub fn sentinel(&self, node: NodeId) -> Result<&NetServer, HarnessError> {
        find(&self.sentinels, node, "sentinel")
    }

    /// The URLs of every sentinel, for a Sentinel client inside the network.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(|(_, s)| s.url()).collect()
    }
}

fn find<'a>(
    list: &'a [(NodeId, NetServer)],
    node: NodeId,
    what: &str,
) -> Result<&'a NetServer, HarnessError> {
    list.iter()
        .find(|(n, _)| *n == node)
        .map(|(_, s)| s)
        .ok_or_else(|| HarnessError::new(format!("node {} runs no {what}", node.0)))
}
