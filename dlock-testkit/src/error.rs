//! [`HarnessError`], the one error type of the harness.
//!
//! A failing test is debugged from its output alone, so an error carries everything needed to
//! understand it: a one-line message, the command line of the process involved, and excerpts of
//! the relevant files (the tail of the server log, the output of `redis-cli`).

use std::error::Error as StdError;
use std::fmt;
use std::fs;
use std::path::Path;

/// How many trailing lines of a log file an error quotes.
pub(crate) const LOG_TAIL_LINES: usize = 40;

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Error type of the harness.
///
/// `Display` prints the message, the command line of the process involved (if any) and excerpts
/// of the relevant files; where a server failed that includes the tail of its log. The underlying
/// I/O or Redis error, if any, is available through [`source`](StdError::source).
///
/// `Debug` prints the same text followed by the chain of causes, so that `.unwrap()` and
/// `fn test() -> Result<(), HarnessError>` show the full report in a failing test's output.
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::RedisServer;
///
/// match RedisServer::start() {
///     Ok(server) => println!("listening on {}", server.url()),
///     Err(error) => eprintln!("{error}"), // message, command line, log tail
/// }
/// ```
pub struct HarnessError {
    message: String,
    command: Option<String>,
    sections: Vec<Section>,
    source: Option<BoxError>,
}

/// A titled excerpt (a log tail, a tool's output) attached to an error.
struct Section {
    title: String,
    body: String,
}

impl HarnessError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            command: None,
            sections: Vec::new(),
            source: None,
        }
    }

    pub(crate) fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    pub(crate) fn with_command(mut self, command: impl Into<String>) -> Self {
        self.command = Some(command.into());
        self
    }

    pub(crate) fn with_section(
        mut self,
        title: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        self.sections.push(Section {
            title: title.into(),
            body: body.into(),
        });
        self
    }

    /// Attaches the last [`LOG_TAIL_LINES`] lines of the file at `path` (or a note that it cannot
    /// be read). Empty files are skipped: they would only add noise.
    pub(crate) fn with_file_tail(self, label: &str, path: &Path) -> Self {
        match fs::read(path) {
            Ok(bytes) if bytes.is_empty() => self,
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(LOG_TAIL_LINES);
                let title = format!(
                    "{label}: last {} lines of {}",
                    lines.len() - start,
                    path.display()
                );
                self.with_section(title, lines[start..].join("\n"))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => self.with_section(
                format!("{label}: {}", path.display()),
                "(not created: the process exited before writing it)",
            ),
            Err(error) => self.with_section(
                format!("{label}: {}", path.display()),
                format!("(cannot read: {error})"),
            ),
        }
    }

    /// The one-line summary of what failed, without the attached command line and excerpts.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let error = dlock_testkit::RedisServer::start().unwrap_err();
    /// eprintln!("{}", error.message()); // e.g. "redis-server not found: install Redis 7 …"
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The command line of the process that failed, if a process was involved.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let error = dlock_testkit::RedisServer::start().unwrap_err();
    /// if let Some(command) = error.command() {
    ///     eprintln!("reproduce with: {command}");
    /// }
    /// ```
    pub fn command(&self) -> Option<&str> {
        self.command.as_deref()
    }
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            message,
            command,
            sections,
            source: _,
        } = self;
        f.write_str(message)?;
        if let Some(command) = command {
            write!(f, "\n  command: {command}")?;
        }
        for Section { title, body } in sections {
            write!(f, "\n--- {title} ---\n{body}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HarnessError {
    /// The `Display` text plus the chain of causes: readable in a failing test's output, where
    /// a struct dump would escape every newline of the log tail.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { source, .. } = self;
        fmt::Display::fmt(self, f)?;
        let mut cause = source.as_deref().map(|e| e as &(dyn StdError + 'static));
        if cause.is_some() {
            f.write_str("\n\nCaused by:")?;
        }
        let mut previous = String::new();
        while let Some(error) = cause {
            // Wrappers often repeat their source's message (redis errors around I/O errors).
            let text = error.to_string();
            if text != previous {
                write!(f, "\n    {text}")?;
            }
            previous = text;
            cause = error.source();
        }
        Ok(())
    }
}

impl StdError for HarnessError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_message_command_and_sections_but_not_source() {
        let error = HarnessError::new("it broke")
            .with_command("redis-server --port 1")
            .with_section("log", "line 1\nline 2")
            .with_source(std::io::Error::other("inner cause"));
        let text = error.to_string();
        assert!(
            text.starts_with("it broke\n  command: redis-server --port 1\n--- log ---\nline 1")
        );
        assert!(!text.contains("inner cause"));
        assert!(format!("{error:?}").contains("Caused by:\n    inner cause"));
        assert!(error.source().is_some());
    }

    #[test]
    fn file_tail_keeps_last_lines() -> Result<(), Box<dyn StdError>> {
        let dir = tempfile::TempDir::new()?;
        let path = dir.path().join("log");
        let text: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        fs::write(&path, text.join("\n"))?;
        let rendered = HarnessError::new("x")
            .with_file_tail("server log", &path)
            .to_string();
        assert!(rendered.contains("last 40 lines of"));
        assert!(rendered.contains("line 99"));
        assert!(rendered.contains("line 60"));
        assert!(!rendered.contains("line 59\n"));
        Ok(())
    }
}
