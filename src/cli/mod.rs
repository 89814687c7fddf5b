//! Command-line parsing in two stages: clap parses flags as typed
//! ([`args`]), then [`validate`] turns them into a [`Command`] of plain
//! config types. Clap types never leave this module. The files import
//! only their siblings (this file only declares them, re-exports what
//! `main` uses and dispatches the command line): [`command`] is the leaf
//! every validation builds, [`test_line`] the stage for one test's or the
//! server's command line, which compare, sweep, qualify and `iperf3 -s`
//! build on.

mod args;
mod client;
mod command;
mod common;
mod compare;
mod engine;
mod generate;
mod habits;
mod host;
mod iperf3;
mod msg;
mod netperf;
mod qualify;
mod repeat;
mod rr;
mod server;
mod sweep;
mod tcp;
mod test_line;
mod threading;
mod udp;
mod values;

pub use command::{
    Command, CompareConfig, CompareVariantConfig, Iperf3Config, Iperf3Style, PreloadRun,
    QualifyConfig, QualifyEngine, RepeatConfig, SweepConfig,
};
pub use host::{DoctorConfig, HostFormat, IfaceConfig, PingConfig};
pub use linerate_run::config::{ClientConfig, Target};
pub use msg::{MsgConfig, MsgPeerConfig, PeerRun};

use anyhow::Result;
use clap::{CommandFactory, Parser};

use test_line::Shared;

/// Parses the process arguments (netperf-style names included).
pub fn parse() -> Result<Command, clap::Error> {
    parse_from(std::env::args_os().map(|a| a.to_string_lossy().into_owned()))
}

/// Parses `argv` (program name first). Usage errors come back as clap
/// errors so they print and exit like clap's own.
pub fn parse_from(argv: impl IntoIterator<Item = String>) -> Result<Command, clap::Error> {
    let argv: Vec<String> = argv.into_iter().collect();
    // `linerate iperf3 …`, or this binary installed or linked as `iperf3`.
    let called_iperf3 = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "iperf3");
    if called_iperf3 {
        return iperf3::parse(&argv[1..]);
    }
    if argv.get(1).is_some_and(|a| a == "iperf3") {
        return iperf3::parse(&argv[2..]);
    }
    if let Some(hint) = habits::iperf3_hint(&argv) {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::UnknownArgument,
            hint,
        ));
    }
    let argv = netperf::rewrite(argv)
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")))?;
    let cli = args::Cli::try_parse_from(argv)?;
    validate(cli).map_err(test_line::usage_error)
}

/// The whole command line's second stage: each command's flags into its
/// config, with the shared flags ([`Shared`]) applied to it.
fn validate(mut cli: args::Cli) -> Result<Command> {
    let shared = Shared::take(&mut cli)?;
    let cmd = match cli.command {
        args::Cmd::Iface(a) => Command::Iface(host::validate_iface(a)?),
        args::Cmd::Doctor(a) => Command::Doctor(host::validate_doctor(a)?),
        args::Cmd::Ping(a) => Command::Ping(host::validate_ping(a)?),
        args::Cmd::Completions(a) => generate::completions(&a, args::Cli::command())?,
        args::Cmd::Man => generate::man(args::Cli::command())?,
        args::Cmd::Sweep(args::SweepCmd::Udp(a)) => sweep::validate_sweep(a)?,
        args::Cmd::Compare(a) => compare::validate_compare(a)?,
        args::Cmd::Qualify(a) => qualify::validate_qualify(a)?,
        args::Cmd::Msg(a) => Command::Msg(msg::validate_msg(a)?),
        args::Cmd::MsgPeer(a) => Command::MsgPeer(msg::validate_peer(a)?),
        test => test_line::command(test)?,
    };
    shared.apply(cmd)
}

#[cfg(test)]
mod tests;
