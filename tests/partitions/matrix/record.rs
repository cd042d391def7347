//! A matrix cell's history as JSON lines: what the harness did (cut, failover seen, heal),
//! every operation each client saw (acquires and releases, in `history.rs`'s terms), every
//! write and fenced set with its answer, and the data as the new master held it at the end.
//! Saved under the results dir, one file per cell, so a run can be checked again
//! ([`Cell::load`], `replay` in `mod.rs`) without the network.
//!
//! One object a line, its `type` first: `meta` (row, nemesis), `nemesis` (`what`: cut,
//! failover, heal; `at_us`), `op` (workload, process, kind, invoked_us, completed_us or null,
//! outcome, fence, safe_until_us), `write` / `fenced` (workload, process, invoked_us,
//! completed_us, result, value), `final` (workload, key, value: a list or a string),
//! `sentinel` (node, line: a sentinel's log line of the failover). Times are µs since the
//! epoch on the machine's one clock.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::partitions::history::{Kind, Op, Outcome};

/// A write's or fenced set's answer, as a client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Write {
    pub(crate) workload: String,
    /// `write` (a guarded write, or the plain client's write) or `fenced` (`fenced_set`).
    pub(crate) what: String,
    pub(crate) process: u32,
    pub(crate) invoked_us: u128,
    pub(crate) completed_us: Option<u128>,
    /// `applied`, `refused`, `written`, `stale` or `unknown`.
    pub(crate) result: String,
    pub(crate) value: String,
}

/// Why an operation ended `unknown`: the error its client saw (the worker's `error` line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ErrorText {
    pub(crate) workload: String,
    pub(crate) process: u32,
    /// The operation's `invoked_us`.
    pub(crate) invoked_us: u128,
    pub(crate) text: String,
}

/// One cell's run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    pub(crate) row: String,
    pub(crate) nemesis: String,
    /// `(what, at_us)`: `cut`, `failover`, `heal`.
    pub(crate) timeline: Vec<(String, u128)>,
    /// Operations with the workload they belong to.
    pub(crate) ops: Vec<(String, Op)>,
    pub(crate) writes: Vec<Write>,
    /// `(workload, key, value)` read from the new master at the end.
    pub(crate) finals: Vec<(String, String, Value)>,
    /// `(node, line)`: the sentinels' log lines of the failover (`cell.rs`).
    pub(crate) sentinels: Vec<(usize, String)>,
    /// The errors behind the `unknown` outcomes (diagnosis only: nothing is measured on them).
    pub(crate) errors: Vec<ErrorText>,
}

impl Cell {
    /// When `what` happened, if it did.
    pub(crate) fn at(&self, what: &str) -> Option<u128> {
        self.timeline
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, at)| *at)
    }

    /// How many failovers the sentinels completed (their leaders' `+failover-end`).
    pub(crate) fn failovers(&self) -> usize {
        self.sentinels
            .iter()
            .filter(|(_, line)| line.contains("+failover-end"))
            .count()
    }

    /// Takes one worker line (`op …`, `write …`, `fenced …`, `error …`) of `workload`; other
    /// lines (`done`) are ignored.
    ///
    /// # Errors
    ///
    /// A line that starts like an event but does not parse.
    pub(crate) fn take_line(&mut self, workload: &str, line: &str) -> Result<(), String> {
        if let Some(op) = line.strip_prefix("op ") {
            let history = crate::partitions::history::History::load(op)?;
            for op in history.ops {
                self.ops.push((workload.to_owned(), op));
            }
            return Ok(());
        }
        let (what, rest) = line.split_once(' ').unwrap_or((line, ""));
        if what == "error" {
            let bad = || format!("not an error line: {line:?}");
            let mut words = rest.splitn(3, ' ');
            let (Some(process), Some(invoked), text) = (words.next(), words.next(), words.next())
            else {
                return Err(bad());
            };
            self.errors.push(ErrorText {
                workload: workload.to_owned(),
                process: process.parse().map_err(|_| bad())?,
                invoked_us: invoked.parse().map_err(|_| bad())?,
                text: text.unwrap_or_default().to_owned(),
            });
            return Ok(());
        }
        if what != "write" && what != "fenced" {
            return Ok(());
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        let bad = || format!("not a {what} line: {line:?}");
        let [process, invoked, completed, result, value] = words[..] else {
            return Err(bad());
        };
        self.writes.push(Write {
            workload: workload.to_owned(),
            what: what.to_owned(),
            process: process.parse().map_err(|_| bad())?,
            invoked_us: invoked.parse().map_err(|_| bad())?,
            completed_us: match completed {
                "-" => None,
                c => Some(c.parse().map_err(|_| bad())?),
            },
            result: result.to_owned(),
            value: value.to_owned(),
        });
        Ok(())
    }

    /// The cell as JSON lines.
    pub(crate) fn save(&self) -> String {
        let mut out = String::new();
        let mut line = |v: Value| {
            let _ = writeln!(out, "{v}");
        };
        line(json!({"type": "meta", "row": self.row, "nemesis": self.nemesis}));
        for (what, at) in &self.timeline {
            line(json!({"type": "nemesis", "what": what, "at_us": us(*at)}));
        }
        for (workload, op) in &self.ops {
            let (outcome, fence, safe_until) = match op.outcome {
                Outcome::Granted {
                    fence,
                    safe_until_us,
                } => ("granted", Some(fence), Some(us(safe_until_us))),
                Outcome::Busy => ("busy", None, None),
                Outcome::Released => ("released", None, None),
                Outcome::NotHeld => ("not-held", None, None),
                Outcome::Unknown => ("unknown", None, None),
            };
            line(json!({
                "type": "op", "workload": workload, "process": op.process,
                "kind": if op.kind == Kind::Acquire { "acquire" } else { "release" },
                "invoked_us": us(op.invoked_us), "completed_us": op.completed_us.map(us),
                "outcome": outcome, "fence": fence, "safe_until_us": safe_until,
            }));
        }
        for w in &self.writes {
            line(json!({
                "type": w.what, "workload": w.workload, "process": w.process,
                "invoked_us": us(w.invoked_us), "completed_us": w.completed_us.map(us),
                "result": w.result, "value": w.value,
            }));
        }
        for (workload, key, value) in &self.finals {
            line(json!({"type": "final", "workload": workload, "key": key, "value": value}));
        }
        for (node, text) in &self.sentinels {
            line(json!({"type": "sentinel", "node": node, "line": text}));
        }
        for e in &self.errors {
            line(json!({
                "type": "error", "workload": e.workload, "process": e.process,
                "invoked_us": us(e.invoked_us), "text": e.text,
            }));
        }
        out
    }

    /// Reads what [`save`](Self::save) wrote.
    ///
    /// # Errors
    ///
    /// The first line that is not one of the records, and why.
    pub(crate) fn load(text: &str) -> Result<Cell, String> {
        let mut cell = Cell::default();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value =
                serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
            cell.take_record(&v)
                .ok_or_else(|| format!("line {}: not a record: {line}", n + 1))?;
        }
        Ok(cell)
    }

    fn take_record(&mut self, v: &Value) -> Option<()> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let n = |k: &str| v.get(k).and_then(Value::as_u64).map(u128::from);
        match v.get("type")?.as_str()? {
            "meta" => {
                self.row = s("row")?;
                self.nemesis = s("nemesis")?;
            }
            "nemesis" => self.timeline.push((s("what")?, n("at_us")?)),
            "op" => {
                let outcome = match s("outcome")?.as_str() {
                    "granted" => Outcome::Granted {
                        fence: v.get("fence")?.as_u64()?,
                        safe_until_us: n("safe_until_us")?,
                    },
                    "busy" => Outcome::Busy,
                    "released" => Outcome::Released,
                    "not-held" => Outcome::NotHeld,
                    "unknown" => Outcome::Unknown,
                    _ => return None,
                };
                let op = Op {
                    process: u32::try_from(v.get("process")?.as_u64()?).ok()?,
                    kind: if s("kind")? == "acquire" {
                        Kind::Acquire
                    } else {
                        Kind::Release
                    },
                    invoked_us: n("invoked_us")?,
                    completed_us: n("completed_us"),
                    outcome,
                };
                self.ops.push((s("workload")?, op));
            }
            what @ ("write" | "fenced") => self.writes.push(Write {
                workload: s("workload")?,
                what: what.to_owned(),
                process: u32::try_from(v.get("process")?.as_u64()?).ok()?,
                invoked_us: n("invoked_us")?,
                completed_us: n("completed_us"),
                result: s("result")?,
                value: s("value")?,
            }),
            "final" => self
                .finals
                .push((s("workload")?, s("key")?, v.get("value")?.clone())),
            "sentinel" => self
                .sentinels
                .push((usize::try_from(v.get("node")?.as_u64()?).ok()?, s("line")?)),
            "error" => self.errors.push(ErrorText {
                workload: s("workload")?,
                process: u32::try_from(v.get("process")?.as_u64()?).ok()?,
                invoked_us: n("invoked_us")?,
                text: s("text")?,
            }),
            _ => return None,
        }
        Some(())
    }
}

/// µs as JSON's integer (u64 holds µs since the epoch for 500,000 years).
fn us(at: u128) -> u64 {
    u64::try_from(at).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_saved_as_json_lines_loads_back_the_same() -> Result<(), String> {
        let mut cell = Cell {
            row: "none".into(),
            nemesis: "partition".into(),
            timeline: vec![("cut".into(), 10), ("heal".into(), 20)],
            ..Cell::default()
        };
        cell.take_line("lock", "op 1 acquire 1 2 granted:7:900")?;
        cell.take_line("lock", "op 2 acquire 3 - unknown")?;
        cell.take_line("guarded", "write 1 4 5 applied 7")?;
        cell.take_line("guarded", "fenced 2 6 - unknown 8")?;
        cell.take_line(
            "guarded",
            "error 2 6 NOREPLICAS Not enough good replicas to write.",
        )?;
        cell.take_line("set", "done ops=3")?;
        cell.finals
            .push(("guarded".into(), "{g}:writes".into(), json!(["7"])));
        cell.sentinels
            .push((1, "+failover-end master dlock".into()));
        assert_eq!(cell.ops.len(), 2);
        assert_eq!(cell.writes.len(), 2);
        assert_eq!(
            cell.errors,
            [ErrorText {
                workload: "guarded".into(),
                process: 2,
                invoked_us: 6,
                text: "NOREPLICAS Not enough good replicas to write.".into(),
            }]
        );
        assert_eq!(Cell::load(&cell.save())?, cell);
        assert!(cell.take_line("lock", "error x 1 boom").is_err());
        assert!(cell.take_line("lock", "write 1 x").is_err());
        assert!(Cell::load("{\"type\":\"op\"}").is_err());
        Ok(())
    }
}
