//! `--repeat N` on tcp, udp, rr and crr: flags and validation. The test is
//! validated as usual, then wrapped in a [`RepeatConfig`].

use anyhow::{bail, Result};
use clap::Args;

use super::{args, Command};

/// Flags of repeated tests.
#[derive(Debug, Args, Default)]
pub struct RepeatArgs {
    /// Run the test N times and report each figure's mean, standard
    /// deviation, min, max and 95% confidence interval (Student t), per
    /// flow and per message size.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
}

/// A test to run `n` times.
#[derive(Debug, Clone)]
pub struct RepeatConfig {
    pub n: u32,
    /// The validated test (Tcp, Udp or Rr).
    pub test: Box<Command>,
}

/// Takes the repeat flags out of a test's arguments.
pub fn take(cmd: &mut args::Cmd) -> RepeatArgs {
    match cmd {
        args::Cmd::Tcp(t) => std::mem::take(&mut t.repeat),
        args::Cmd::Udp(u) => std::mem::take(&mut u.repeat),
        args::Cmd::Rr(r) | args::Cmd::Crr(r) => std::mem::take(&mut r.repeat),
        _ => RepeatArgs::default(),
    }
}

/// Wraps a validated test when `--repeat` was given.
pub fn attach(cmd: Command, flags: RepeatArgs) -> Result<Command> {
    let Some(n) = flags.repeat else {
        return Ok(cmd);
    };
    if n == 0 {
        bail!("--repeat must be at least 1");
    }
    match &cmd {
        Command::Tcp(c) | Command::Udp(c) if c.iface.is_some() => {
            bail!("--iface and --repeat together are not supported: run `linerate iface DEV --watch` beside the repeated test")
        }
        Command::Rr(r) if r.histogram.is_some() || r.plot.is_some() => {
            bail!("--histogram and --plot describe one run: leave them out with --repeat")
        }
        Command::Tcp(_) | Command::Udp(_) | Command::Rr(_) => {}
        _ => bail!("--repeat applies to tcp, udp, rr and crr"),
    }
    Ok(Command::Repeat(RepeatConfig {
        n,
        test: Box::new(cmd),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_from;

    fn parse(args: &str) -> Result<Command, clap::Error> {
        parse_from(
            std::iter::once("linerate".to_owned())
                .chain(args.split_whitespace().map(str::to_owned)),
        )
    }

    #[test]
    fn repeat_wraps_the_test() {
        for (args, rr) in [
            ("tcp --repeat 3", false),
            ("udp --repeat 3", false),
            ("rr --repeat 3", true),
            ("crr --repeat 3", true),
        ] {
            let Ok(Command::Repeat(r)) = parse(args) else {
                panic!("{args} parses")
            };
            assert_eq!(r.n, 3);
            assert_eq!(matches!(*r.test, Command::Rr(_)), rr, "{args}");
        }
        assert!(matches!(parse("tcp"), Ok(Command::Tcp(_))));
        for bad in [
            "tcp --repeat 0",
            "tcp --repeat 2 --iface lo",
            "rr --repeat 2 --plot x.svg",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
