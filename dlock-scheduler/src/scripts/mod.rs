//! The scheduler's Lua scripts (one file each, contract on top; `common.lua` is prepended to
//! the scripts that open a run) and how requests are sent: over the dlock client's own
//! connection, bounded by its command timeout, errors classified as dlock-core's.

use std::sync::LazyLock;

use dlock_core::Client;
use redis::{Cmd, FromRedisValue, Pipeline, Script, ScriptInvocation};

use crate::error::Error;

/// Claims a scheduled occurrence (one replica wins; the replica whose turn it is first).
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("claim.lua")
    ))
});

/// Takes the oldest `run_now` request and claims its run, in one step.
pub(crate) static TAKE_REQUEST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("take_request.lua")
    ))
});

/// Queues a `run_now` request and wakes the replicas.
pub(crate) static REQUEST: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("request.lua")));

/// Withdraws a claim whose reply was lost, before anything ran.
pub(crate) static WITHDRAW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("withdraw.lua")));

/// Records how a run ended.
pub(crate) static FINISH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("finish.lua")));

/// Registers a replica as live for a job (or unregisters it).
pub(crate) static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("heartbeat.lua")));

/// Runs a script invocation under the client's command timeout; `context` names the request in
/// the error.
pub(crate) async fn eval<T: FromRedisValue>(
    client: &Client,
    invocation: &ScriptInvocation<'_>,
    context: &str,
) -> Result<T, Error> {
    let mut con = client.connection();
    tokio::time::timeout(client.command_timeout(), invocation.invoke_async(&mut con))
        .await
        .map_err(|_| Error::timeout(context, client.command_timeout()))?
        .map_err(|e| Error::redis(context, e))
}

/// Runs one command under the client's command timeout.
pub(crate) async fn query<T: FromRedisValue>(
    client: &Client,
    cmd: &Cmd,
    context: &str,
) -> Result<T, Error> {
    let mut con = client.connection();
    tokio::time::timeout(client.command_timeout(), cmd.query_async(&mut con))
        .await
        .map_err(|_| Error::timeout(context, client.command_timeout()))?
        .map_err(|e| Error::redis(context, e))
}

/// Runs a pipeline under the client's command timeout.
pub(crate) async fn query_pipe<T: FromRedisValue>(
    client: &Client,
    pipe: &Pipeline,
    context: &str,
) -> Result<T, Error> {
    let mut con = client.connection();
    tokio::time::timeout(client.command_timeout(), pipe.query_async(&mut con))
        .await
        .map_err(|_| Error::timeout(context, client.command_timeout()))?
        .map_err(|e| Error::redis(context, e))
}
