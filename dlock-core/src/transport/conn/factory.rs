//! How a connection is built: one server (a connection manager), a cluster, or the master the
//! sentinels name — the settings, the TCP options and where push messages go.

use super::{Conn, ConnSettings, Factory, SentinelFactory};
use crate::error::{Error, Result};
use crate::runtime::lock;
use crate::transport::sentinel::SentinelSpec;
use redis::ProtocolVersion;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

impl Factory {
    /// How to build a lazily connecting, auto-reconnecting connection to one server, with RESP3
    /// push messages delivered to `push`.
    pub(crate) fn single(
        info: redis::ConnectionInfo,
        settings: ConnSettings,
        push: impl redis::aio::AsyncPushSender,
    ) -> Result<Self> {
        let redis_settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let tcp = tcp_settings(info.tcp_settings().clone(), settings);
        let info = info
            .set_redis_settings(redis_settings)
            .set_tcp_settings(tcp);
        let client = redis::Client::open(info)
            .map_err(|e| Error::invalid(format!("cannot use this Redis address: {e}")))?;
        Ok(Factory::Single(client, manager_config(settings, push)))
    }

    /// How to build a lazily connecting cluster connection (one RESP3 connection per node).
    /// `certs`: the CA and client certificate of `rediss://` nodes, for every node (the
    /// `redis` crate takes them from the builder, not from the seeds' addresses).
    pub(crate) fn cluster(
        nodes: Vec<redis::ConnectionInfo>,
        certs: Option<redis::TlsCertificates>,
        settings: ConnSettings,
        push: impl redis::aio::AsyncPushSender,
    ) -> Result<Self> {
        let first = nodes
            .first()
            .ok_or_else(|| Error::invalid("no cluster node given"))?;
        let tcp = tcp_settings(first.tcp_settings().clone(), settings);
        let auth = first.redis_settings().clone();
        let seeds = nodes
            .iter()
            .map(|node| {
                node.clone()
                    .set_redis_settings(auth.clone())
                    .set_tcp_settings(tcp.clone())
            })
            .collect();
        let mut builder = redis::cluster::ClusterClientBuilder::new(nodes.clone())
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(push)
            .tcp_settings(tcp)
            .response_timeout(settings.command_timeout)
            .connection_timeout(settings.connect_timeout)
            .retries(2);
        if let Some(certs) = certs {
            // Before the certificates, which otherwise switch verification on.
            if let redis::ConnectionAddr::TcpTls { insecure: true, .. } = first.addr() {
                builder = builder.tls(redis::TlsMode::Insecure);
            }
            builder = builder.certs(certs);
        }
        if let Some(user) = auth.username() {
            builder = builder.username(user);
        }
        if let Some(password) = auth.password() {
            builder = builder.password(password);
        }
        let client = builder
            .build()
            .map_err(|e| Error::invalid(format!("cannot use these cluster nodes: {e}")))?;
        Ok(Factory::Cluster(client, seeds))
    }

    /// How to build connections to the master of `master_name`, as the `sentinels` name it;
    /// `node` holds the data nodes' credentials and database. The data nodes are reached over
    /// TLS, with the sentinels' TLS settings, when the sentinels are (`rediss://`).
    pub(crate) fn sentinel(
        master_name: String,
        sentinels: Vec<redis::ConnectionInfo>,
        node: redis::RedisConnectionInfo,
        settings: ConnSettings,
        push: impl redis::aio::AsyncPushSender,
    ) -> Result<Self> {
        if master_name.is_empty() {
            return Err(Error::invalid(
                "the Sentinel master name is empty; give the name the sentinels monitor \
                 (`sentinel monitor <name> …`)",
            ));
        }
        let Some(first) = sentinels.first() else {
            return Err(Error::invalid(
                "no sentinel given; give the addresses of the sentinels (redis://host:26379)",
            ));
        };
        // The data nodes are reached as the sentinels are (all plain, or all TLS with the same
        // CA and client certificate): a deployment runs one or the other.
        let tls = |info: &redis::ConnectionInfo| {
            matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
        };
        if sentinels.iter().any(|s| tls(s) != tls(first)) {
            return Err(Error::invalid(
                "the sentinel URLs mix redis:// and rediss://; give them all as rediss:// (TLS \
                 to the sentinels and the data nodes) or all as redis://",
            ));
        }
        let node_transport = first.addr().clone();
        let tcp = tcp_settings(first.tcp_settings().clone(), settings);
        let sentinels = sentinels
            .into_iter()
            .map(|s| s.set_tcp_settings(tcp.clone()))
            .collect();
        let node = node.set_protocol(ProtocolVersion::RESP3);
        let spec = SentinelSpec::new(
            master_name,
            sentinels,
            node,
            node_transport,
            tcp,
            settings.connect_timeout,
        );
        Ok(Factory::Sentinel(Box::new(SentinelFactory {
            spec: Arc::new(spec),
            config: manager_config(settings, push),
            current: Mutex::new(None),
            last_error: Mutex::new(None),
        })))
    }

    pub(super) fn build(&self) -> Result<Conn> {
        match self {
            Self::Sentinel(sentinel) => {
                let current = lock(&sentinel.current).clone();
                let Some(master) = current else {
                    let why = lock(&sentinel.last_error).clone().map_or_else(
                        || "the sentinels have not been asked yet".into(),
                        |(_, why)| why,
                    );
                    return Ok(Conn::Unresolved(why));
                };
                let client = redis::Client::open(master.info)
                    .map_err(|e| Error::invalid(format!("cannot use the master's address: {e}")))?;
                ConnectionManager::new_lazy_with_config(client, sentinel.config.clone())
                    .map(Conn::Single)
                    .map_err(|e| Error::from_redis("create the connection", e))
            }
            Self::Single(client, config) => {
                ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
                    .map(Conn::Single)
                    .map_err(|e| Error::from_redis("create the connection", e))
            }
            Self::Cluster(client, _) => Ok(Conn::Cluster(
                client.get_pending_async_connection_with_config(
                    redis::cluster::ClusterConfig::default(),
                ),
            )),
        }
    }
}

/// The configuration of a standalone connection: push messages to `push`, subscriptions
/// restored after a reconnect, one reconnect attempt per failing request.
fn manager_config(
    settings: ConnSettings,
    push: impl redis::aio::AsyncPushSender,
) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_push_sender(push)
        .set_automatic_resubscription()
        // The command timeout is applied by `Transport::timed` around the whole request (waiting for
        // a reconnect included); a second per-response timer would only cost CPU.
        .set_response_timeout(None)
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

/// `TCP_NODELAY` as configured (off by default), and dead-peer detection: keepalive probes on an idle
/// connection, and on Linux `TCP_USER_TIMEOUT`, which aborts a connection whose data stays
/// unacknowledged (a host that vanished without a reset) so that the manager reconnects instead
/// of timing out every request forever. A paused but live server still acknowledges, so it is
/// not mistaken for a dead one.
fn tcp_settings(
    base: redis::io::tcp::TcpSettings,
    settings: ConnSettings,
) -> redis::io::tcp::TcpSettings {
    let keepalive = redis::io::tcp::socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(2));
    let tcp = base.set_nodelay(settings.nodelay).set_keepalive(keepalive);
    #[cfg(target_os = "linux")]
    let tcp = tcp.set_user_timeout(super::silence::user_timeout(settings.command_timeout));
    tcp
}
