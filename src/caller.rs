//! The binary's own failures (writing its output, files and pages) inside
//! a command that ends in linerate-run's error: carried as
//! [`RunError::Caller`], so the exit status and message are found the one
//! way for both.

use linerate_run::error::RunError;

/// The binary's own failures (writing its output, files and pages) inside
/// a command that ends in the run crate's error, which carries them as
/// [`RunError::Caller`].
pub trait OrRun<T> {
    fn or_run(self) -> Result<T, RunError>;
}

impl<T> OrRun<T> for anyhow::Result<T> {
    fn or_run(self) -> Result<T, RunError> {
        self.map_err(caller)
    }
}

/// An error of the binary's own as the run crate's.
pub fn caller(e: anyhow::Error) -> RunError {
    RunError::Caller(e.into())
}
