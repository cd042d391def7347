//! The state counts dlock-model/README.md documents, read back by the tests that produce
//! them: tests/check.rs, tests/rates.rs and the unit tests of `attempts`, `schedules` and
//! `sched` (the unit bounds, in `cargo test`), tests/deep.rs (`make model`). Each fails when the unique
//! states it explored differ from the README's row, so the documentation and the checker
//! cannot disagree silently. Unique states only: with the whole space explored they do not
//! depend on the threads' interleaving, where the total count and the time do.

/// The README, as compiled in.
const README: &str = include_str!("../README.md");

/// The unique states the README documents for the model `id`: the last cell of the table row
/// whose first cell is `` `id` `` (digits with thousands commas). `None` without such a row.
pub fn documented(id: &str) -> Option<usize> {
    let row = format!("| `{id}` |");
    let line = README.lines().find(|l| l.starts_with(&row))?;
    let cell = line.trim_end().strip_suffix('|')?.rsplit('|').next()?;
    cell.trim().replace(',', "").parse().ok()
}

/// `Err` naming the fix when `unique` is not what the README documents for `id`.
///
/// # Errors
/// The README has no row for `id`, or its row says another number.
pub fn compare(id: &str, unique: usize) -> Result<(), String> {
    match documented(id) {
        Some(n) if n == unique => Ok(()),
        Some(n) => Err(format!(
            "`{id}`: {unique} unique states, dlock-model/README.md says {n}: the model changed; \
             check why, then update the row"
        )),
        None => Err(format!(
            "`{id}`: {unique} unique states, and dlock-model/README.md has no row `{id}`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_found_by_its_id_and_read_without_commas() {
        assert_eq!(documented("unit mutex").map(|n| n > 0), Some(true));
        assert_eq!(documented("no such model"), None);
    }
}
