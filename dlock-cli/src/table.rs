//! Human output: aligned tables, times and durations; and the JSON forms of times.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};

/// A table with a header row; columns are padded to their widest cell.
#[derive(Debug)]
pub(crate) struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&'static str]) -> Self {
        Self {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, columns two spaces apart.
    pub(crate) fn render(&self) -> String {
        let header: Vec<String> = self.header.iter().map(|h| (*h).to_owned()).collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let width = widths.get(i).copied().unwrap_or(0);
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A duration for people: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub(crate) fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// A time for people, in UTC to the second: `2026-11-25 11:00:00Z`.
pub(crate) fn human_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%SZ").to_string()
}

/// A time for people in the IANA zone `zone`, labelled with the zone's abbreviation:
/// `2026-11-25 12:00:00 CET`; in UTC (`…Z`) when this version does not know the zone.
pub(crate) fn zoned(t: DateTime<Utc>, zone: &str) -> String {
    match zone.parse::<chrono_tz::Tz>() {
        Ok(tz) => t
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => human_time(t),
    }
}

/// A time for people under the CLI's one zone policy: in the job's zone `zone` (labelled),
/// or in UTC (`…Z`) with `--utc` or when the job has no zone (`None`: a one-off job's, or one
/// no replica registers now).
pub(crate) fn shown(t: DateTime<Utc>, zone: Option<&str>, utc: bool) -> String {
    match zone {
        Some(zone) if !utc => zoned(t, zone),
        _ => human_time(t),
    }
}

/// A time for JSON: RFC 3339 in UTC with milliseconds.
pub(crate) fn json_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A system time as a UTC date-time.
pub(crate) fn utc(t: SystemTime) -> DateTime<Utc> {
    DateTime::<Utc>::from(t)
}

/// A duration in whole milliseconds, for JSON.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_their_columns() {
        let mut t = Table::new(&["NAME", "TTL"]);
        t.row(vec!["order:42".into(), "1.5s".into()]);
        t.row(vec!["a".into(), "850ms".into()]);
        assert_eq!(
            t.render(),
            "NAME      TTL\norder:42  1.5s\na         850ms\n"
        );
    }

    #[test]
    fn zoned_times_carry_their_zone() {
        let t = DateTime::parse_from_rfc3339("2026-11-25T11:00:00Z")
            .unwrap_or_default()
            .with_timezone(&Utc);
        assert_eq!(zoned(t, "Europe/Berlin"), "2026-11-25 12:00:00 CET");
        assert_eq!(zoned(t, "UTC"), "2026-11-25 11:00:00 UTC");
        assert_eq!(zoned(t, "Mars/Olympus"), "2026-11-25 11:00:00Z");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(human_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(human_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(human_duration(Duration::from_secs(7380)), "2h03m");
    }
}
