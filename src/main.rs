//! linerate's entry point: parse the command line, run the command, map
//! failures to exit codes and print them. Nothing else lives here.

mod caller;
mod cli;
mod compare;
mod host;
mod html;
mod iperf3;
mod msg;
mod peer_main;
mod progress;
mod qualify;
mod repeat;
mod sweep;
mod test_cmd;

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use linerate_report::render::Format;
use linerate_run::error::RunError;
use linerate_run::{outcome, server};

fn main() -> ExitCode {
    // Before anything else (and before any thread): what a test asked for
    // through the environment, e.g. io_uring denied by a seccomp filter.
    if let Err(e) = linerate_engine::test_hooks::install() {
        eprintln!("linerate: test hook: {e}");
        return ExitCode::from(1);
    }
    let command = match cli::parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout with status 0, errors with 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // Commands with their own exit status and Ctrl-C handling.
    match &command {
        cli::Command::Ping(cfg) => return host::ping::run(cfg),
        cli::Command::Iface(cfg) => return exit(host::iface::run(cfg), host::format(cfg.format)),
        cli::Command::Doctor(cfg) => {
            let format = host::format(if cfg.json {
                cli::HostFormat::Json
            } else {
                cli::HostFormat::Human
            });
            return exit(host::doctor::run(cfg), format);
        }
        cli::Command::Print(text) => {
            let written = std::io::stdout().lock().write_all(text);
            return exit(written.map_err(anyhow::Error::from), Format::Human);
        }
        // First Ctrl-C: stop running tests as at their limit (the clients
        // are told and still get what was measured), then exit; a second
        // one: the default, immediate exit.
        cli::Command::Server(_) => {
            let _ = ctrlc::set_handler(|| {
                if server::STOPPING.swap(true, Ordering::Relaxed) {
                    std::process::exit(130);
                }
            });
        }
        cli::Command::MsgPeer(cfg) => {
            // Ctrl-C in the terminal reaches this process too: the client
            // ends the run and this process with it.
            let _ = ctrlc::set_handler(|| {});
            return exit(peer_main::peer(cfg), Format::Human);
        }
        // First Ctrl-C: abort the test cleanly (tell the server, report
        // nothing false); a second one: the default, immediate exit.
        _ => {
            let _ = ctrlc::set_handler(|| {
                progress::clear_all();
                if outcome::INTERRUPTED.swap(true, Ordering::Relaxed) {
                    std::process::exit(130);
                }
            });
        }
    }
    if let cli::Command::Qualify(cfg) = &command {
        return qualify::main(cfg);
    }
    let (format, result) = match &command {
        cli::Command::Server(cfg) => (cfg.format, server::run(cfg).map_err(Failure::from)),
        cli::Command::Rr(cfg) => (
            cfg.client.format,
            test_cmd::run_rr(cfg)
                .and_then(|r| html::test(&cfg.client, &r).map_err(caller::caller))
                .map_err(Failure::from),
        ),
        cli::Command::Sweep(cfg) => (
            cfg.base.format,
            sweep::run(cfg)
                .and_then(|r| html::sweep(&cfg.base, &r).map_err(caller::caller))
                .map_err(Failure::from),
        ),
        cli::Command::Compare(cfg) => (
            cfg.format,
            compare::run(cfg).map(drop).map_err(Failure::from),
        ),
        cli::Command::Tcp(cfg) | cli::Command::Udp(cfg) => (
            cfg.format,
            test_cmd::run(cfg)
                .and_then(|r| html::test(cfg, &r).map_err(caller::caller))
                .map_err(Failure::from),
        ),
        cli::Command::Msg(cfg) => (cfg.format, msg::run(cfg).map_err(Failure::from)),
        cli::Command::Iperf3(cfg) => (Format::Human, iperf3::run(cfg).map_err(Failure::from)),
        cli::Command::Repeat(cfg) => (
            repeat_format(cfg),
            repeat::run(cfg).map(drop).map_err(Failure::from),
        ),
        cli::Command::Ping(_)
        | cli::Command::Qualify(_)
        | cli::Command::Iface(_)
        | cli::Command::Doctor(_)
        | cli::Command::MsgPeer(_)
        | cli::Command::Print(_) => {
            unreachable!("handled above")
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit(format),
    }
}

/// Exit status of a command that fails only on I/O or bad state: 0 or 1.
fn exit(r: anyhow::Result<()>, format: Format) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => Failure::from(e).exit(format),
    }
}

/// The output format of a repeated test.
fn repeat_format(cfg: &cli::RepeatConfig) -> Format {
    match &*cfg.test {
        cli::Command::Tcp(c) | cli::Command::Udp(c) => c.format,
        cli::Command::Rr(r) => r.client.format,
        _ => Format::Human,
    }
}

/// A command that failed: its message and exit status.
struct Failure {
    message: String,
    code: u8,
    /// Standard output was closed under us (`linerate … | head`): the reader
    /// has what it wanted.
    closed_stdout: bool,
    /// The report (of what was measured before an interruption) is already
    /// on stdout: a machine format gets no second document.
    reported: bool,
}

/// Whether a closed reader caused the error: an `io::Error` of kind
/// `BrokenPipe` anywhere in the chain, or a JSON writer's error wrapping one
/// (serde_json's error does not expose its `io::Error` as a source, so a
/// `--json` report cut off by `| head` would otherwise read as a failure).
fn chain_has_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(broken_pipe)
}

/// Whether this one error (not its causes) is a closed reader's.
fn broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let kind = e
        .downcast_ref::<std::io::Error>()
        .map(std::io::Error::kind)
        .or_else(|| e.downcast_ref::<serde_json::Error>()?.io_error_kind());
    kind == Some(std::io::ErrorKind::BrokenPipe)
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure {
            closed_stdout: chain_has_broken_pipe(e.as_ref()),
            message: format!("{e:#}"),
            code: 1,
            reported: false,
        }
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        Failure {
            reported: e.reported(),
            message: e.chain().to_string(),
            code: e.exit_code() as u8,
            closed_stdout: e.causes().any(broken_pipe),
        }
    }
}

impl Failure {
    /// Prints the failure — one line on stderr, and for machine formats a
    /// record on stdout so a script reading it gets a document either way
    /// (issue 13) — and returns the exit status. Printing never panics: a
    /// closed stdout or stderr is a quiet exit.
    fn exit(self, format: Format) -> ExitCode {
        if self.closed_stdout {
            // Like `grep … | head`: the reader stopped reading; not an error.
            return ExitCode::SUCCESS;
        }
        let record = match format {
            Format::Json => Some(serde_json::json!({
                "error": self.message,
                "exit_code": self.code,
            })),
            Format::JsonLines => Some(serde_json::json!({
                "type": "error",
                "error": self.message,
                "exit_code": self.code,
            })),
            Format::Human | Format::Csv => None,
        }
        .filter(|_| !self.reported);
        if let Some(r) = record {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{r}").and_then(|()| out.flush());
        }
        // One write, newline included (see `log::put`): with `2>&1` no
        // other line can land inside it.
        let line = format!("linerate: {}\n", self.message);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        ExitCode::from(self.code)
    }
}
