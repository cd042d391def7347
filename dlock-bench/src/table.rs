//! Markdown tables and the number formats of the report. Pure: nothing here knows a workload.

use std::fmt::Write as _;

/// The text of a missing figure.
pub(crate) const NONE: &str = "—";

/// Writes a markdown table, then a blank line. `align` has one letter per column: `l` (left) or
/// `r` (right, for figures).
pub(crate) fn table(
    out: &mut String,
    align: &str,
    header: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) {
    line(out, header.iter().copied());
    let rule: Vec<&str> = align
        .chars()
        .map(|a| if a == 'r' { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for row in rows {
        line(out, row.iter().map(String::as_str));
    }
    out.push('\n');
}

/// A column of [`table_of`]: its header, and its cell for one item.
pub(crate) type Col<T> = (&'static str, fn(&T) -> String);

/// Writes a markdown table with a row per item and the given columns (see [`table`]).
pub(crate) fn table_of<T>(out: &mut String, align: &str, columns: &[Col<T>], items: &[T]) {
    let header: Vec<&str> = columns.iter().map(|(h, _)| *h).collect();
    let rows = items
        .iter()
        .map(|item| columns.iter().map(|(_, cell)| cell(item)).collect());
    table(out, align, &header, rows);
}

fn line<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>) {
    for cell in cells {
        let _ = if cell.is_empty() {
            write!(out, "| ")
        } else {
            write!(out, "| {cell} ")
        };
    }
    out.push_str("|\n");
}

/// A rate with thousands separators, rounded to an integer.
pub(crate) fn int(v: f64) -> String {
    if !v.is_finite() {
        return NONE.to_owned();
    }
    #[allow(clippy::cast_possible_truncation)] // rates are far below i64::MAX
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    if n < 0 {
        format!("-{grouped}")
    } else {
        grouped
    }
}

/// A ratio as `0.95×`, or [`NONE`].
pub(crate) fn times(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_owned(), |v| format!("{v:.2}×"))
}

/// `values` joined with `sep`, each formatted by `f`.
pub(crate) fn joined<T>(values: &[T], sep: &str, f: impl Fn(&T) -> String) -> String {
    values.iter().map(f).collect::<Vec<_>>().join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_get_thousands_separators() {
        assert_eq!(int(0.4), "0");
        assert_eq!(int(999.0), "999");
        assert_eq!(int(1_000.0), "1,000");
        assert_eq!(int(12_345.6), "12,346");
        assert_eq!(int(-1_234_567.0), "-1,234,567");
        assert_eq!(int(f64::NAN), "—");
        assert_eq!(times(Some(0.954)), "0.95×");
        assert_eq!(times(None), "—");
    }

    #[test]
    fn tables_align_each_column() {
        let mut out = String::new();
        table(&mut out, "lr", &["a", "b"], [vec!["x".into(), "1".into()]]);
        assert_eq!(out, "| a | b |\n|---|---:|\n| x | 1 |\n\n");
    }
}
