//! The second stage for one test's or the server's command line (`tcp`,
//! `udp`, `rr`, `crr`, `server`): clap's flags into a [`Command`], and the
//! flags every command line shares ([`Shared`]: the key, the host flags,
//! `--repeat`/`--report`) applied to whichever command it names. Compare,
//! sweep, qualify and `iperf3 -s` build a test's or the server's command
//! line and validate it here ([`validate`]), so it passes exactly the
//! checks the user's own would; the whole command line is dispatched by
//! [`super::parse_from`].

use std::path::PathBuf;

use anyhow::{bail, Result};
use linerate_engine::engines::auto;
use linerate_proto::auth::AuthKey;
use linerate_proto::limits::{EngineRefusal, ServerLimits};
use linerate_proto::spec::TestKind;
use linerate_run::config::ServerConfig;

use super::args;
use super::command::Command;
use super::engine::server_side_engine;
use super::host::{self, TestHostArgs};
use super::repeat::{self, RepeatArgs};
use super::values::{duration_ms, format_of, parse_cpus};
use super::{rr, server, tcp, udp};

/// The flags a command line shares whichever command it names, taken out
/// before the command's own flags are validated and applied after.
pub(super) struct Shared {
    key_file: Option<PathBuf>,
    key: Option<AuthKey>,
    host: TestHostArgs,
    run: RepeatArgs,
}

impl Shared {
    /// Takes the shared flags out of `cli`; the key file is read (and
    /// checked) first.
    pub(super) fn take(cli: &mut args::Cli) -> Result<Shared> {
        let key_file = cli.auth_key.clone();
        let key = server::load_key(key_file.as_deref())?;
        Ok(Shared {
            key_file,
            key,
            host: cli.command.take_host_flags(),
            run: cli.command.take_repeat_flags(),
        })
    }

    /// `cmd` with the host and run flags attached and the key given to
    /// every test it runs.
    pub(super) fn apply(self, mut cmd: Command) -> Result<Command> {
        let stream = match &mut cmd {
            Command::Tcp(c) | Command::Udp(c) => Some(c),
            _ => None,
        };
        host::attach(stream, self.host)?;
        let mut cmd = repeat::attach(cmd, self.run)?;
        give_key(&mut cmd, self.key, self.key_file.as_deref());
        Ok(cmd)
    }
}

/// The key reaches the config of every test the command runs.
fn give_key(cmd: &mut Command, key: Option<AuthKey>, key_file: Option<&std::path::Path>) {
    match cmd {
        Command::Server(s) => s.auth_key = key,
        Command::Tcp(c) | Command::Udp(c) => c.auth_key = key,
        Command::Rr(r) => r.client.auth_key = key,
        Command::Sweep(s) => s.base.auth_key = key,
        // `--repeat` wraps the test before the key is given: it is the
        // repeated test that needs it (it was lost here: issue 28).
        Command::Repeat(r) => give_key(&mut r.test, key, key_file),
        Command::Qualify(q) => {
            for e in &mut q.engines {
                for c in [&mut e.udp, &mut e.tcp, &mut e.rr] {
                    c.auth_key.clone_from(&key);
                }
            }
        }
        // compare's key (given before the test kind) reaches every
        // variant, and the preloaded child by its file.
        Command::Compare(c) if key.is_some() => {
            for v in &mut c.variants {
                if let Ok(t) = &mut v.config {
                    t.auth_key.clone_from(&key);
                }
                if let (Some(p), Some(f)) = (&mut v.preload, key_file) {
                    p.tail
                        .extend(["--auth-key".into(), f.display().to_string()]);
                }
            }
        }
        _ => {}
    }
}

/// A test's or the server's flags into its command (without the shared
/// flags: [`Shared`]).
pub(super) fn command(cmd: args::Cmd) -> Result<Command> {
    match cmd {
        args::Cmd::Server(s) => validate_server(s),
        args::Cmd::Tcp(t) => tcp::validate_tcp(t),
        args::Cmd::Udp(u) => udp::validate_udp(u),
        args::Cmd::Rr(r) => Ok(Command::Rr(rr::validate_rr(r, TestKind::Rr)?)),
        args::Cmd::Crr(r) => Ok(Command::Rr(rr::validate_rr(r, TestKind::Crr)?)),
        _ => bail!("internal: not a test's or the server's command line"),
    }
}

/// One test's or the server's command line, validated as the user's own.
pub(super) fn validate(mut cli: args::Cli) -> Result<Command> {
    let shared = Shared::take(&mut cli)?;
    shared.apply(command(cli.command)?)
}

/// A validation error as a usage error, printed and exited like clap's own.
pub(super) fn usage_error(e: anyhow::Error) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e:#}\n"))
}

/// `linerate server`: the limits, guard and engine it serves with.
fn validate_server(s: args::ServerArgs) -> Result<Command> {
    if s.engine.server_engine.is_some() {
        bail!("--server-engine is a client flag: a server's own engine is --engine");
    }
    if s.max_concurrent == 0 {
        bail!("--max-concurrent must be at least 1");
    }
    let mut limits = ServerLimits::default();
    if let Some(n) = s.max_streams {
        limits.max_streams = n;
    }
    if let Some(n) = s.max_flows {
        limits.max_flows = n;
    }
    if s.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if let Some(t) = &s.max_time {
        limits.max_time_ms = duration_ms("--max-time", t)?;
    }
    let guard = server::validate(&s.guard, &mut limits)?;
    let engine = server_side_engine(&s.engine)?;
    if let auto::Configured::Fixed(k) = engine {
        // The tests this engine cannot serve: its own answer
        // (`EngineKind::server_refusal`), asked by the session at
        // admission unless the client asks for another engine.
        limits.own_engine_refusal = Some(EngineRefusal::new(move |spec| k.server_refusal(spec)));
    }
    Ok(Command::Server(ServerConfig {
        guard,
        auth_key: None,
        metrics: s.fleet.metrics,
        json_lines: s.fleet.json_lines_file,
        bind: s.bind,
        port: s.port,
        once: s.once,
        max_concurrent: s.max_concurrent,
        limits,
        flow_threads: s.threads,
        engine,
        cpus: parse_cpus(s.cpus.as_deref())?,
        format: format_of(&s.output),
        logfile: None,
    }))
}
