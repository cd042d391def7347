//! A script call run under Redis's Lua debugger (`SCRIPT DEBUG SYNC`), so that the run can
//! count which reply paths of the shipped text it reached (`coverage.rs`) while the verdict
//! still rests on that very text: the debugger runs the script as `EVAL` would, one line hook
//! aside, and in its synchronous mode keeps every write (the server is blocked meanwhile, as
//! during any script). A breakpoint is set on the line of each reply path; each stop there is
//! one reach of that path; then the script runs on to its reply.
//!
//! The debugger closes the connection after the reply, so each call takes a connection of its
//! own. It accepts at most 64 breakpoints per session (more than any script's paths).

use std::time::Duration;

use dlock_testkit::RedisServer;
use redis::Value;

use super::{Answer, answer, io};

/// What the debugger prints when a breakpoint stops the script.
const STOPPED: &str = "* Stopped at ";

/// The text of a status line of the debugger's output.
fn status(value: &Value) -> Option<&str> {
    match value {
        Value::SimpleString(s) => Some(s.as_str()),
        Value::Okay => Some("OK"),
        _ => None,
    }
}

fn lines(value: &Value) -> Vec<&str> {
    match value {
        Value::Array(items) => items.iter().filter_map(status).collect(),
        other => status(other).into_iter().collect(),
    }
}

/// Runs `text` with `keys` and `args` under the debugger, stopping at `breakpoints` (lines of
/// `text`, 1-based). The script's reply, and the breakpoint lines it stopped at, in order.
pub(crate) fn run(
    server: &RedisServer,
    text: &str,
    keys: &[&str],
    args: &[String],
    breakpoints: &[usize],
) -> Result<(Answer, Vec<usize>), String> {
    let mut con = server.connection().map_err(|e| format!("connect: {e}"))?;
    // A session that does not end blocks the server: a hang must fail the test instead.
    con.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io("read timeout"))?;
    // Not pipelined: the debugger reads the connection itself once EVAL starts it.
    redis::cmd("SCRIPT")
        .arg("DEBUG")
        .arg("SYNC")
        .exec(&mut con)
        .map_err(io("SCRIPT DEBUG"))?;
    let mut eval = redis::cmd("EVAL");
    eval.arg(text).arg(keys.len());
    for key in keys {
        eval.arg(*key);
    }
    for arg in args {
        eval.arg(arg.as_str());
    }
    // The session stops before the first line.
    let _: Value = eval
        .query(&mut con)
        .map_err(io("EVAL under the debugger"))?;
    if breakpoints.len() > 64 {
        return Err(format!(
            "{} reply paths: the debugger sets at most 64 breakpoints",
            breakpoints.len()
        ));
    }
    // All lines in one `b` (one round trip, as on Redis 7 and Valkey 8). Valkey 9.1 refuses
    // several lines in one `b` ("Unknown debugger command or wrong number of arguments") and
    // sets none, which read as every path never reached: there, one `b` per line. Any other
    // refusal fails the run, never a silent skip.
    let mut set = redis::cmd("b");
    for line in breakpoints {
        set.arg(*line);
    }
    if let Err(refused) = set_breakpoints(&mut con, &set)? {
        if !refused.starts_with("<error> Unknown debugger command") {
            return Err(format!("debugger: {refused}"));
        }
        for line in breakpoints {
            if let Err(refused) = set_breakpoints(&mut con, redis::cmd("b").arg(*line))? {
                return Err(format!("debugger: b {line}: {refused}"));
            }
        }
    }
    let mut hits = Vec::new();
    loop {
        let out: Value = redis::cmd("c")
            .query(&mut con)
            .map_err(io("debugger continue"))?;
        let out = lines(&out);
        for line in &out {
            if let Some(rest) = line.strip_prefix(STOPPED) {
                let at = rest.split(',').next().unwrap_or("");
                hits.push(
                    at.trim()
                        .parse()
                        .map_err(|_| format!("debugger: {line:?}"))?,
                );
            }
        }
        if out.contains(&"<endsession>") {
            // The script's reply follows the end of the session.
            let reply = match con.recv_response() {
                Ok(Value::ServerError(e)) => Err(e.into()),
                other => other,
            };
            return Ok((answer(reply)?, hits));
        }
    }
}

/// Sends one `b` command: `Ok(Err(text))` when the debugger refused it.
fn set_breakpoints(
    con: &mut redis::Connection,
    command: &redis::Cmd,
) -> Result<Result<(), String>, String> {
    let added: Value = command.query(con).map_err(io("debugger break"))?;
    Ok(
        match lines(&added)
            .into_iter()
            .find(|l| l.contains("Too many") || l.starts_with("<error>"))
        {
            Some(refused) => Err(refused.to_owned()),
            None => Ok(()),
        },
    )
}
