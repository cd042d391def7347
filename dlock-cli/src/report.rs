//! What a command that ran hands back to `main`: its output, notes for stderr, and the exit
//! code (a run that found nothing is not a failure, but exits 3).

use serde::Serialize;

use crate::failure::{Exit, Failure};

/// A command's output.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) stdout: String,
    pub(crate) notes: Vec<String>,
    pub(crate) exit: Exit,
}

impl Report {
    pub(crate) fn new(stdout: String) -> Self {
        Self {
            stdout,
            notes: Vec::new(),
            exit: Exit::Ok,
        }
    }

    /// `value` as pretty JSON, one document ending in a newline.
    ///
    /// # Errors
    /// Only if `value` cannot be serialized (never, for the plain structs used here).
    pub(crate) fn json(value: &impl Serialize) -> Result<Self, Failure> {
        let mut text = serde_json::to_string_pretty(value)
            .map_err(|e| Failure::error(format!("cannot write JSON: {e}")))?;
        text.push('\n');
        Ok(Self::new(text))
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub(crate) fn exit(mut self, exit: Exit) -> Self {
        self.exit = exit;
        self
    }
}
