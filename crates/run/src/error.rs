//! Why running a test (or serving) failed: [`RunError`], with the exit
//! status each kind maps to, and [`Context`] to say what was being done
//! when a lower layer failed.
//!
//! Every error's `Display` is its own line only; what caused it is its
//! [`source`](std::error::Error::source) chain. Printed with `{:#}` (or
//! through `anyhow`), the chain follows, joined by `": "`.

use std::fmt;

use linerate_engine::EngineError;
use linerate_local::LocalError;
use linerate_proto::session::SessionError;
use linerate_proto::wire::WireError;

/// What this crate's fallible functions return.
pub type Result<T, E = RunError> = std::result::Result<T, E>;

/// A failed test or server, with the exit status it maps to
/// ([`RunError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The server refused the test (exit status 3).
    #[error("{0}")]
    Refused(String),
    /// The user pressed Ctrl-C; the server was told. `reported`: the test
    /// stopped early and what was measured until then was reported;
    /// otherwise (it was not running yet) nothing was.
    #[error("{}", if *reported { "interrupted by the user: the figures above cover the test until then" } else { "test aborted: interrupted by the user" })]
    Interrupted { reported: bool },
    /// The server was stopped by its operator mid-test and stopped the
    /// test; what was measured until then was reported.
    #[error("the server stopped the test before its limit (it is shutting down): the figures above cover the test until then")]
    ServerStopped,
    /// What was asked cannot run: a flag, a spec or a limit (checked here,
    /// before or while the test starts).
    #[error("{0}")]
    Spec(String),
    /// The peer broke the protocol, went away, or the session ended in a
    /// state it should not have.
    #[error("{0}")]
    Protocol(String),
    /// What both sides measured does not add up (the checks of a
    /// finished test's report).
    #[error("{0}")]
    Check(String),
    /// A system call failed (see [`Context`] for what was being done).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The engine (the data path) failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A local transport (`--transport unix|unix-dgram|shm`) failed.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// A control frame could not be decoded.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The control session failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The caller's own error, carried through a run: writing its output
    /// or the files it asked for.
    #[error(transparent)]
    Caller(Box<dyn std::error::Error + Send + Sync>),
    /// What was being done when `source` happened.
    #[error("{doing}")]
    Context {
        doing: String,
        #[source]
        source: Box<RunError>,
    },
}

impl RunError {
    /// The test was cut short and what it measured until then is already
    /// reported (the files asked for are written from it; a machine format
    /// gets no second document).
    pub fn reported(&self) -> bool {
        matches!(
            self,
            RunError::Interrupted { reported: true } | RunError::ServerStopped
        )
    }

    /// The process's exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Refused(_) => 3,
            // 128 + SIGINT, as shells report a process ended by Ctrl-C.
            RunError::Interrupted { .. } => 130,
            _ => 1,
        }
    }

    /// This error and the chain of its causes, joined by `": "` (what
    /// `anyhow` prints with `{:#}`).
    pub fn chain(&self) -> Chain<'_> {
        Chain(self)
    }

    /// This error and each of its causes, outermost first, with the error
    /// a transparent variant wraps standing in for it (so a caller finds an
    /// `io::Error` of kind `BrokenPipe` however deep it is).
    pub fn causes(&self) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        std::iter::from_fn(move || {
            let e = unwrap_transparent(next?);
            next = e.source();
            Some(e)
        })
    }
}

/// The error a transparent [`RunError`] variant shows as itself.
fn unwrap_transparent<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    // `Context`'s source is its `Box<RunError>`, which is an error too.
    let run = e
        .downcast_ref::<RunError>()
        .or_else(|| e.downcast_ref::<Box<RunError>>().map(|b| &**b));
    match run {
        Some(RunError::Io(e)) => e,
        Some(RunError::Engine(e)) => e,
        Some(RunError::Local(e)) => e,
        Some(RunError::Wire(e)) => e,
        Some(RunError::Session(e)) => e,
        Some(RunError::Caller(e)) => unwrap_transparent(e.as_ref()),
        _ => e,
    }
}

/// [`RunError::chain`]'s display.
#[derive(Debug)]
pub struct Chain<'a>(&'a RunError);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.causes().enumerate() {
            if i > 0 {
                f.write_str(": ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// The system had no randomness for `what` (a nonce, token or name).
pub(crate) fn no_randomness(what: &str, e: getrandom::Error) -> RunError {
    RunError::Context {
        doing: format!("no randomness for {what}"),
        source: Box::new(std::io::Error::other(e.to_string()).into()),
    }
}

/// Says what was being done when an error happened, as `anyhow`'s
/// `Context` does, for the error kinds a run meets.
pub trait Context<T> {
    fn context(self, doing: impl Into<String>) -> Result<T, RunError>;
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T, RunError>;
}

impl<T, E: Into<RunError>> Context<T> for Result<T, E> {
    fn context(self, doing: impl Into<String>) -> Result<T, RunError> {
        self.map_err(|e| RunError::Context {
            doing: doing.into(),
            source: Box::new(e.into()),
        })
    }
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T, RunError> {
        self.map_err(|e| RunError::Context {
            doing: doing().into(),
            source: Box::new(e.into()),
        })
    }
}

/// Fails with a [`RunError`] of one of the message kinds (`Spec`,
/// `Protocol`, `Check`), formatted:
/// `fail!(Protocol, "…", args)`.
macro_rules! fail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::RunError::$kind(format!($($arg)*)).into())
    };
}
pub(crate) use fail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_24_chain_prints_what_was_done_then_why() {
        let r: Result<(), std::io::Error> = Err(std::io::ErrorKind::BrokenPipe.into());
        let e = r.context("writing output").expect_err("an error");
        assert_eq!(e.to_string(), "writing output");
        assert_eq!(e.chain().to_string(), "writing output: broken pipe");
        let io = e.causes().find_map(|c| c.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::BrokenPipe),
            "the I/O error is found through the transparent variant"
        );
        assert_eq!(e.exit_code(), 1);
        assert_eq!(RunError::Refused("busy".into()).exit_code(), 3);
        assert_eq!(RunError::Interrupted { reported: true }.exit_code(), 130);
    }
}
