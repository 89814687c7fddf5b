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

/// An error of the binary's own as the run crate's. One that is a
/// [`RunError`] carried through `anyhow` (a sweep's refused trial) is that
/// error again, so its exit status holds (3 for a refusal, not 1).
pub fn caller(e: anyhow::Error) -> RunError {
    let e = match e.downcast::<RunError>() {
        Ok(run) => return run,
        Err(e) => e,
    };
    // A closed reader (`| head`) must stay recognisable: main exits quietly
    // on it. anyhow's boxed form hides its typed causes from downcasts, so
    // the closed pipe is carried as the run crate's own I/O error.
    let pipe = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
            == Some(std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    });
    if pipe {
        return RunError::Io(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            format!("{e:#}"),
        ));
    }
    RunError::Caller(e.into())
}
