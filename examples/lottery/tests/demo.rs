//! `make demo` as a test: the lottery across three replicas (their own redis-server) ends with
//! every draw run exactly once and every replica having drawn, and says so.

use std::process::Command;

#[test]
fn the_demo_draws_exactly_once_on_every_replica() {
    let out = Command::new(env!("CARGO_BIN_EXE_lottery"))
        .env_remove("DLOCK_REDIS_URL")
        .output()
        .expect("run the lottery demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("each draw ran exactly once: yes"),
        "{stdout}"
    );
    // Replica A served the dashboard and said where.
    assert!(
        stdout.contains("dashboard: http://127.0.0.1:")
            && stdout.contains("/jobs (served by replica-a)"),
        "{stdout}"
    );
    let spread = stdout
        .lines()
        .find(|l| l.starts_with("draws per replica: "))
        .unwrap_or_else(|| panic!("no per-replica line: {stdout}"));
    for replica in ["replica-a", "replica-b", "replica-c"] {
        let count: usize = spread
            .split(&format!("{replica} "))
            .nth(1)
            .and_then(|rest| rest.split([',', ';']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count for {replica}: {spread}"));
        assert!(count > 0, "{replica} drew nothing: {spread}");
    }
    assert!(spread.ends_with("every replica drew: yes"), "{spread}");
}
