//! Asking for the password on the terminal when Redis wants one and none was given (neither in
//! the URL nor in `DLOCK_REDIS_PASSWORD`): read from `/dev/tty` with its echo off (`stty -echo`,
//! so no new dependency and no `unsafe`), never shown. Without a terminal on stdin, or when the
//! echo cannot be turned off, there is no prompt: the refusal is reported as it is.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::{Command, Stdio};

/// The password typed for the Redis at `addresses`, or `None` (no terminal, no echo control,
/// nothing typed).
pub(crate) async fn password(addresses: &str) -> Option<String> {
    let addresses = addresses.to_owned();
    tokio::task::spawn_blocking(move || read_password(&addresses))
        .await
        .ok()
        .flatten()
}

fn read_password(addresses: &str) -> Option<String> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let mut tty = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    // Echo off first: a terminal that cannot hide the answer is not asked for a password.
    stty(&tty, "-echo")?;
    let _ = write!(tty, "Password for Redis at {addresses}: ");
    let _ = tty.flush();
    let mut line = String::new();
    let read = BufReader::new(&tty).read_line(&mut line);
    let _ = stty(&tty, "echo");
    let _ = writeln!(tty);
    read.ok()?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    (!password.is_empty()).then_some(password)
}

/// Runs `stty arg` on the terminal `tty`.
fn stty(tty: &File, arg: &str) -> Option<()> {
    let status = Command::new("stty")
        .arg(arg)
        .stdin(tty.try_clone().ok()?)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then_some(())
}
