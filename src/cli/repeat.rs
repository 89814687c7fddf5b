//! Flags about a whole run rather than one test: `--repeat N` (tcp, udp,
//! rr, crr) and `--report FILE.html` (those and sweeps). The test is
//! validated as usual, then these are attached (a repeated test is wrapped
//! in a [`RepeatConfig`]).

use anyhow::{bail, Result};
use clap::Args;

use super::command::{Command, RepeatConfig};

/// Flags of repeated tests.
#[derive(Debug, Args, Default)]
pub struct RepeatArgs {
    /// Run the test N times and report each figure's mean, standard
    /// deviation, min, max and 95% confidence interval (Student t), per
    /// flow and per message size.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Also write one self-contained HTML page: the results, the plots
    /// inline, the host and kernel description, the command line, the
    /// version and both sides' engines.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
}

/// Adds `--report` to the test's config and wraps a test given `--repeat`.
pub fn attach(mut cmd: Command, flags: RepeatArgs) -> Result<Command> {
    if let Some(path) = flags.report {
        match &mut cmd {
            Command::Tcp(c) | Command::Udp(c) => c.report = Some(path),
            Command::Rr(r) => r.client.report = Some(path),
            Command::Sweep(s) => s.base.report = Some(path),
            _ => bail!("--report applies to tcp, udp, rr, crr and sweeps"),
        }
    }
    let Some(n) = flags.repeat else {
        return Ok(cmd);
    };
    if n == 0 {
        bail!("--repeat must be at least 1");
    }
    let plot = match &mut cmd {
        Command::Tcp(c) | Command::Udp(c) if c.iface.is_some() => {
            bail!("--iface and --repeat together are not supported: run `linerate iface DEV --watch` beside the repeated test")
        }
        Command::Rr(r) if r.histogram.is_some() => {
            bail!("--histogram describes one run: leave it out with --repeat")
        }
        // With --repeat, --plot draws each size's (rr) or flow's (tcp,
        // udp) mean ± 1 sd.
        Command::Rr(r) => r.plot.take(),
        Command::Tcp(c) | Command::Udp(c) => c.plot.take(),
        _ => bail!("--repeat applies to tcp, udp, rr and crr"),
    };
    Ok(Command::Repeat(RepeatConfig {
        n,
        test: Box::new(cmd),
        plot,
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
        let Ok(Command::Repeat(r)) = parse("rr --repeat 2 --plot x.svg --report r.html") else {
            panic!("rr --repeat --plot parses")
        };
        assert_eq!(r.plot.as_deref(), Some(std::path::Path::new("x.svg")));
        let Command::Rr(rr) = &*r.test else {
            panic!("rr inside")
        };
        assert!(rr.plot.is_none());
        assert_eq!(
            rr.client.report.as_deref(),
            Some(std::path::Path::new("r.html"))
        );
        let Ok(Command::Sweep(s)) = parse("sweep udp --pps 1k --report s.html") else {
            panic!("sweep --report parses")
        };
        assert!(s.base.report.is_some());
        // tcp/udp --plot: per interval alone, mean ± 1 sd with --repeat.
        let Ok(Command::Repeat(r)) = parse("udp --repeat 2 --plot u.svg") else {
            panic!("udp --repeat --plot parses")
        };
        assert_eq!(r.plot.as_deref(), Some(std::path::Path::new("u.svg")));
        let Ok(Command::Tcp(t)) = parse("tcp --plot t.svg") else {
            panic!("tcp --plot parses")
        };
        assert_eq!(t.plot.as_deref(), Some(std::path::Path::new("t.svg")));
        for bad in [
            "tcp --repeat 0",
            "tcp --repeat 2 --iface lo",
            "rr --repeat 2 --histogram h.csv",
            "iface --report r.html",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
