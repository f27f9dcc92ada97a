//! The CLI's errors: what went wrong, an optional hint on what to do about it, and the kind
//! that decides the exit status. `main` prints `error: <message>; <hint>` and exits with the
//! kind's code; nothing else in the CLI picks an exit status.

use std::fmt;

/// What kind of failure, and so which exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bad arguments on the command line (exit status 2, as clap's own).
    Usage,
    /// A bad hone.toml or store configuration (exit status 2).
    Config,
    /// The command failed, or the run stopped on an error (exit status 1).
    Runtime,
    /// Ctrl-C stopped the run (130: 128 + SIGINT, as shells report a job stopped by Ctrl-C).
    Interrupted,
}

impl Kind {
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Usage | Kind::Config => 2,
            Kind::Runtime => 1,
            Kind::Interrupted => 130,
        }
    }
}

/// A failure of a command.
#[derive(Debug)]
pub struct CliError {
    pub kind: Kind,
    error: anyhow::Error,
    hint: Option<String>,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(kind: Kind, error: anyhow::Error) -> CliError {
        CliError {
            kind,
            error,
            hint: None,
        }
    }

    /// A bad argument, said in words.
    pub fn usage(message: impl fmt::Display) -> CliError {
        CliError::new(Kind::Usage, anyhow::Error::msg(message.to_string()))
    }

    /// A bad configuration, said in words.
    pub fn config(message: impl fmt::Display) -> CliError {
        CliError::new(Kind::Config, anyhow::Error::msg(message.to_string()))
    }

    /// A failure, said in words.
    pub fn runtime(message: impl fmt::Display) -> CliError {
        CliError::new(Kind::Runtime, anyhow::Error::msg(message.to_string()))
    }

    /// What to do about it, printed after the message.
    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hint = Some(hint.into());
        self
    }

    /// With [`DISK_FULL`] as its hint when it has none and its message says the disk is
    /// full (the system's `No space left on device`, SQLite's `database or disk is full`).
    pub fn with_disk_hint(self) -> CliError {
        let text = format!("{:#}", self.error);
        let full = text.contains("No space left on device") || text.contains("disk is full");
        if full && self.hint.is_none() {
            return self.hint(DISK_FULL);
        }
        self
    }
}

/// What to do when the disk filled up during a run.
pub const DISK_FULL: &str = "the disk is full: `hone run` resumes with every finished experiment kept, and first removes what the last candidates left under .hone/ if the disk is still full; if something else filled it, free some space first";

/// `<message>` (with its causes, `outer: inner`), then `; <hint>` when there is one.
impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)?;
        if let Some(h) = &self.hint {
            write!(f, "; {h}")?;
        }
        Ok(())
    }
}

/// Any other failure is a runtime one.
impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> CliError {
        CliError::new(Kind::Runtime, error)
    }
}

/// Gives a library error its kind.
pub trait Kinded<T> {
    fn usage(self) -> CliResult<T>;
    fn config(self) -> CliResult<T>;
    fn runtime(self) -> CliResult<T>;
}

impl<T, E: Into<anyhow::Error>> Kinded<T> for Result<T, E> {
    fn usage(self) -> CliResult<T> {
        self.map_err(|e| CliError::new(Kind::Usage, e.into()))
    }

    fn config(self) -> CliResult<T> {
        self.map_err(|e| CliError::new(Kind::Config, e.into()))
    }

    fn runtime(self) -> CliResult<T> {
        self.map_err(|e| CliError::new(Kind::Runtime, e.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_the_documented_exit_codes() {
        assert_eq!(Kind::Usage.exit_code(), 2);
        assert_eq!(Kind::Config.exit_code(), 2);
        assert_eq!(Kind::Runtime.exit_code(), 1);
        assert_eq!(Kind::Interrupted.exit_code(), 130);
    }

    #[test]
    fn a_full_disk_says_what_to_do() {
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let e: CliError = anyhow::Error::from(full).context("cannot write x").into();
        assert!(e.with_disk_hint().to_string().ends_with(DISK_FULL));
        let e = CliError::runtime("state database error: database or disk is full");
        assert!(e.with_disk_hint().to_string().ends_with(DISK_FULL));
        let e = CliError::runtime("something else");
        assert_eq!(e.with_disk_hint().to_string(), "something else");
    }

    #[test]
    fn the_hint_follows_the_message_and_causes() {
        let e = CliError::runtime("no hone runs yet").hint("start one with `hone run`");
        assert_eq!(e.to_string(), "no hone runs yet; start one with `hone run`");
        let inner = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let e: CliError = anyhow::Error::from(inner).context("cannot write x").into();
        assert_eq!(e.to_string(), "cannot write x: gone");
        assert_eq!(e.kind, Kind::Runtime);
    }
}
