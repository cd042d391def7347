//! What dlock reads from each tested server, checked on the server the run uses (Redis 7.0 by
//! default; Valkey 8.1 or 9.1 with `DLOCK_REDIS_SERVER` pointing into `.deps/`: `make test`
//! runs this file on all three).
//!
//! - Every row of dlock's table of refusal texts without an error code
//!   (`dlock-core/src/server_texts.rs`) that names this server is what this server says, provoked
//!   with a real ACL user; and every such meaning has a row for this server (a server whose text
//!   no row knows fails here, naming the text to add).
//! - A `NOPERM` names the command and says it may be a service's allow-list, not only an ACL.
//! - Every Lua script of dlock-core and dlock-scheduler loads (`SCRIPT LOAD`) under the hash
//!   the client sends with `EVALSHA`.
//!
//! Standalone only: the texts and the scripts are a server's, not a deployment's.

use std::collections::BTreeSet;

use dlock_core::__private::conformance::{Said, Source, TEXTS, read_server_text};
use dlock_core::ErrorKind;
use dlock_testkit::{RedisServer, server_flavour};

use crate::support::{client, raw, redis};

/// The server's name as the table's rows write it: "Redis 7.0", "Valkey 9.1".
fn this_server() -> String {
    let flavour = server_flavour().unwrap();
    let shown = flavour.to_string();
    match shown.rsplit_once('.') {
        Some((major_minor, _patch)) => major_minor.to_owned(),
        None => shown,
    }
}

/// Creates `user` (password `pw`) with `rules`.
async fn acl_user(server: &RedisServer, user: &str, rules: &[&str]) {
    let mut con = raw(server).await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for rule in rules {
        cmd.arg(*rule);
    }
    let () = cmd.query_async(&mut con).await.unwrap();
}

/// The error text of `EVAL <script> 0` run as `user`.
async fn script_error_as(server: &RedisServer, user: &str, script: &str) -> String {
    let url = format!("redis://{user}:pw@127.0.0.1:{}/", server.port());
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let reply: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg(script)
        .arg(0)
        .query_async(&mut con)
        .await;
    match reply {
        Err(e) => e.to_string(),
        Ok(value) => panic!("{user} ran `{script}`: {value:?}"),
    }
}

/// What this server says for each coded-less refusal the table knows, provoked for real.
async fn provoked(server: &RedisServer) -> Vec<(Said, String)> {
    acl_user(server, "nocmd", &["~*", "&*", "+eval", "+get"]).await;
    acl_user(server, "nokey", &["~a*", "&*", "+@all"]).await;
    acl_user(server, "nochan", &["~*", "&a*", "+@all"]).await;
    let mut said = vec![
        (
            Said::ScriptCommand,
            script_error_as(server, "nocmd", "return redis.call('set', 'k', 'x')").await,
        ),
        (
            Said::ScriptKey,
            script_error_as(server, "nokey", "return redis.call('get', 'b')").await,
        ),
        (
            Said::ScriptChannel,
            script_error_as(server, "nochan", "return redis.call('publish', 'b', 'x')").await,
        ),
    ];
    let mut con = raw(server).await;
    let slots: redis::RedisResult<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut con)
        .await;
    said.push((Said::ClusterDisabled, slots.unwrap_err().to_string()));
    said
}

#[tokio::test]
async fn every_row_for_this_server_is_what_it_says() {
    let name = this_server();
    let server = redis();
    for (meaning, text) in provoked(&server).await {
        let rows: Vec<_> = TEXTS
            .iter()
            .filter(|row| row.said == meaning && row.servers.contains(&name.as_str()))
            .collect();
        assert!(
            !rows.is_empty(),
            "dlock-core/src/server_texts.rs has no {meaning:?} row for {name}, which says: {text}"
        );
        for row in rows {
            assert!(
                text.to_lowercase().contains(row.fragment),
                "the {meaning:?} row for {name} ({:?}) is not what {name} says: {text}",
                row.fragment
            );
        }
        assert_eq!(read_server_text(&text), Some(meaning), "{name}: {text}");
        println!("{name}: {meaning:?}: {text}");
    }
}

/// The same refusals reach the user as `Permission` errors through dlock: a script refused a
/// write inside (force unlock by a user who may run scripts but not delete), and a command
/// refused outside one (`SET` by a user without it), whose message names the command and says
/// that a service's allow-list answers the same way as an ACL.
#[tokio::test]
async fn refusals_reach_the_user_as_permission_errors_that_name_what_to_check() {
    let server = redis();
    let holder = client(&server);
    let guard = holder.mutex("order").unwrap().acquire().await.unwrap();
    let rules = [
        "~*",
        "&*",
        "+@read",
        "+@connection",
        "+evalsha",
        "+eval",
        "+script|load",
        "+time",
        "+info",
    ];
    acl_user(&server, "reader", &rules).await;
    let url = format!("redis://reader:pw@127.0.0.1:{}/", server.port());
    let reader = dlock_core::Client::builder(url).build().unwrap();
    let err = reader.force_unlock("order").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(holder.inspect("order").await.unwrap().is_some(), "kept");
    let err = reader
        .mutex("other")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("`SET`"), "names the command: {text}");
    assert!(text.contains("allow-list"), "names the allow-list: {text}");
    assert!(text.contains("ACL"), "and the ACL: {text}");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn every_script_loads_on_this_server() {
    let name = this_server();
    let server = redis();
    let mut con = raw(&server).await;
    for source in Source::ALL {
        let script = source.script();
        let hash = script
            .load_async(&mut con)
            .await
            .unwrap_or_else(|e| panic!("{source:?} does not load on {name}: {e}"));
        assert_eq!(hash, script.get_hash(), "{source:?} on {name}");
    }
    let scheduler = dlock_scheduler::__private::scripts();
    for (file, script) in &scheduler {
        let hash = script
            .load_async(&mut con)
            .await
            .unwrap_or_else(|e| panic!("dlock-scheduler's {file} does not load on {name}: {e}"));
        assert_eq!(hash, script.get_hash(), "{file} on {name}");
    }
    // The scheduler's list is every script file of its folder (common.lua is a prefix).
    let folder = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dlock-scheduler/src/scripts"
    );
    let files: BTreeSet<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|file| file.ends_with(".lua") && file != "common.lua")
        .collect();
    let listed: BTreeSet<String> = scheduler.iter().map(|(f, _)| (*f).to_owned()).collect();
    assert_eq!(files, listed, "dlock_scheduler::__private::scripts() lists");
    println!(
        "{name}: {} dlock-core and {} dlock-scheduler scripts loaded",
        Source::ALL.len(),
        scheduler.len()
    );
}
