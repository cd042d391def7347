//! The scheduler's Lua scripts (one file each, contract on top) and how requests are sent: over
//! the dlock client's own connection, bounded by its command timeout.

use std::sync::LazyLock;

use dlock_core::Client;
use redis::{Cmd, FromRedisValue, Pipeline, Script, ScriptInvocation};

use crate::error::Error;

/// Claims an occurrence and opens its ledger record.
pub(crate) static CLAIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("claim.lua")));

/// Records how a run ended.
pub(crate) static FINISH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("finish.lua")));

fn timeout_error(client: &Client) -> Error {
    Error::redis_data(format!(
        "Redis did not answer within the command timeout of {:?}",
        client.command_timeout()
    ))
}

fn redis_error(e: redis::RedisError) -> Error {
    Error::redis_data(format!("Redis request failed: {e}"))
}

/// Runs a script invocation under the client's command timeout.
pub(crate) async fn eval<T: FromRedisValue>(
    client: &Client,
    invocation: &ScriptInvocation<'_>,
) -> Result<T, Error> {
    let mut con = client.connection();
    tokio::time::timeout(client.command_timeout(), invocation.invoke_async(&mut con))
        .await
        .map_err(|_| timeout_error(client))?
        .map_err(redis_error)
}

/// Runs one command under the client's command timeout.
pub(crate) async fn query<T: FromRedisValue>(client: &Client, cmd: &Cmd) -> Result<T, Error> {
    let mut con = client.connection();
    tokio::time::timeout(client.command_timeout(), cmd.query_async(&mut con))
        .await
        .map_err(|_| timeout_error(client))?
        .map_err(redis_error)
}

/// Runs a pipeline under the client's command timeout.
pub(crate) async fn query_pipe<T: FromRedisValue>(
    client: &Client,
    pipe: &Pipeline,
) -> Result<T, Error> {
    let mut con = client.connection();
    tokio::time::timeout(client.command_timeout(), pipe.query_async(&mut con))
        .await
        .map_err(|_| timeout_error(client))?
        .map_err(redis_error)
}
