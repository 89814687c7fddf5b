//! Flags and validation of the host-insight commands (`iface`, `doctor`)
//! and of the host flags the tests take (`--iface`). Kept apart from the
//! test flags so each concept has one file.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use linerate_host::doctor::Kind;
use linerate_stats::units::parse_duration;

use linerate_run::config::ClientConfig;

/// Output of the host commands: human text, one JSON document, or JSON Lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFormat {
    Human,
    Json,
    JsonLines,
}

#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct HostOutputArgs {
    /// One JSON document (see docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// JSON Lines: one record per interface (per interval with --watch).
    #[arg(long)]
    pub json_lines: bool,
}

impl HostOutputArgs {
    fn format(&self) -> HostFormat {
        if self.json {
            HostFormat::Json
        } else if self.json_lines {
            HostFormat::JsonLines
        } else {
            HostFormat::Human
        }
    }
}

#[derive(Debug, Args)]
pub struct IfaceArgs {
    /// The interface to show (default: every interface).
    pub dev: Option<String>,
    /// Poll the counters every INTERVAL (default 1s) and show rx/tx bit/s,
    /// packets/s, drops and errors per interval: redrawn in place on a
    /// terminal, one line per interface and interval otherwise.
    #[arg(short, long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "1s")]
    pub watch: Option<String>,
    /// With --watch: stop after N intervals (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N", requires = "watch")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub output: HostOutputArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Host whose route (MTU, interface, offloads) to check; default: the
    /// default route's interface.
    pub host: Option<String>,
    /// The kind of test the advice is for: tcp, udp or latency.
    #[arg(long = "for", value_name = "tcp|udp|latency", default_value = "udp")]
    pub kind: String,
    /// Write the recommended value of every sysctl that was warned about
    /// (nothing else is changed) and print the command that restores the
    /// old values. Needs root; in a network namespace, changes that
    /// namespace's copies of per-namespace sysctls.
    #[arg(long)]
    pub apply: bool,
    /// One JSON document (see docs/json.md).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PingArgs {
    /// Host to ping (name or address).
    pub host: String,
    /// Requests to send (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N")]
    pub count: Option<u64>,
    /// Time between requests.
    #[arg(short = 'i', long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
    /// Payload bytes per request, after the 8-byte ICMP header.
    #[arg(short = 's', long, value_name = "BYTES", default_value_t = 56)]
    pub size: usize,
    /// How long to wait for replies after the last request.
    #[arg(short = 'W', long, value_name = "DURATION", default_value = "1s")]
    pub wait: String,
    /// Use a raw socket (root) even where an unprivileged ICMP datagram
    /// socket is allowed (net.ipv4.ping_group_range).
    #[arg(long)]
    pub raw: bool,
    /// One JSON document at the end (see docs/json.md).
    #[arg(long)]
    pub json: bool,
}

/// Host flags every throughput test takes.
#[derive(Debug, Args, Default)]
pub struct TestHostArgs {
    /// Add this interface's counters (wire bytes and packets, drops,
    /// errors) to every interval and to the report, and compare the
    /// payload the test moved with the bytes the interface carried.
    #[arg(long, value_name = "DEV")]
    pub iface: Option<String>,
}

#[derive(Debug, Clone)]
pub struct IfaceConfig {
    pub dev: Option<String>,
    pub watch: Option<Duration>,
    pub count: Option<u64>,
    pub format: HostFormat,
}

#[derive(Debug, Clone)]
pub struct DoctorConfig {
    pub kind: Kind,
    pub host: Option<String>,
    pub apply: bool,
    pub json: bool,
}

#[derive(Debug, Clone)]
pub struct PingConfig {
    pub host: String,
    pub params: linerate_host::ping::PingParams,
    pub json: bool,
}

pub fn validate_ping(a: PingArgs) -> Result<PingConfig> {
    let dest = linerate_host::route::resolve(&a.host).context("ping")?;
    let interval = parse_duration(&a.interval).context("--interval")?;
    if interval < Duration::from_millis(1) {
        bail!("--interval must be at least 1ms");
    }
    let wait = parse_duration(&a.wait).context("--wait")?;
    if a.count == Some(0) {
        bail!("--count must be at least 1");
    }
    // 65535 − 20 (IPv4 header) − 8 (ICMP header); IPv6 allows 65527 too.
    if a.size > 65_507 {
        bail!(
            "--size: {} bytes do not fit in one IP packet (at most 65507)",
            a.size
        );
    }
    Ok(PingConfig {
        host: a.host,
        params: linerate_host::ping::PingParams {
            dest,
            count: a.count,
            interval,
            size: a.size,
            wait,
            force_raw: a.raw,
        },
        json: a.json,
    })
}

fn check_dev(dev: &str) -> Result<()> {
    if !linerate_host::iface::exists(dev) {
        bail!(
            "no interface {dev:?} in this network namespace (have: {})",
            linerate_proto::sanitize::sanitize_lines(&linerate_host::iface::names().join(", "))
        );
    }
    Ok(())
}

pub fn validate_iface(a: IfaceArgs) -> Result<IfaceConfig> {
    if let Some(dev) = &a.dev {
        check_dev(dev).context("iface")?;
    }
    let watch = a
        .watch
        .as_deref()
        .map(|w| {
            parse_duration(w)
                .with_context(|| format!("--watch: {w:?} is not an interval (e.g. 1s, 500ms)"))
        })
        .transpose()?;
    if watch.is_some_and(|w| w < Duration::from_millis(10)) {
        bail!("--watch: the interval must be at least 10ms");
    }
    if a.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let format = a.output.format();
    if watch.is_some() && format == HostFormat::Json {
        bail!("--watch streams records: use --json-lines (one record per interface and interval)");
    }
    Ok(IfaceConfig {
        dev: a.dev,
        watch,
        count: a.count,
        format,
    })
}

pub fn validate_doctor(a: DoctorArgs) -> Result<DoctorConfig> {
    let Some(kind) = Kind::parse(&a.kind) else {
        bail!("--for: {:?} is not one of tcp, udp, latency", a.kind);
    };
    Ok(DoctorConfig {
        kind,
        host: a.host,
        apply: a.apply,
        json: a.json,
    })
}

/// Adds the validated host flags to a stream test's config (`stream`:
/// `None` when the command is not a tcp or udp test).
pub fn attach(stream: Option<&mut ClientConfig>, flags: TestHostArgs) -> Result<()> {
    let Some(dev) = flags.iface else {
        return Ok(());
    };
    check_dev(&dev).context("--iface")?;
    let Some(c) = stream else {
        bail!("--iface applies to tcp and udp tests");
    };
    if c.format == linerate_report::render::Format::Csv {
        bail!("--iface: the interface counters are not in CSV output; use --json or --json-lines");
    }
    c.iface = Some(dev);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{parse_from, Command};

    fn parse(args: &str) -> Result<Command, clap::Error> {
        parse_from(
            std::iter::once("linerate".to_owned())
                .chain(args.split_whitespace().map(str::to_owned)),
        )
    }

    #[test]
    fn iface_flags() {
        let Ok(Command::Iface(c)) = parse("iface lo --watch --count 3 --json-lines") else {
            panic!("iface parses")
        };
        assert_eq!(c.watch, Some(Duration::from_secs(1)));
        assert_eq!(
            (c.count, c.format, c.dev.as_deref()),
            (Some(3), HostFormat::JsonLines, Some("lo"))
        );
        let Ok(Command::Iface(c)) = parse("iface --watch 250ms") else {
            panic!("iface parses")
        };
        assert_eq!((c.watch, c.dev), (Some(Duration::from_millis(250)), None));
        for bad in [
            "iface nope0",
            "iface --watch 1ms",
            "iface --count 3",
            "iface lo --watch --json",
            "iface --watch x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn doctor_flags() {
        let Ok(Command::Doctor(c)) = parse("doctor --for latency 192.0.2.1 --apply --json") else {
            panic!("doctor parses")
        };
        assert_eq!(
            (c.kind, c.host.as_deref(), c.apply, c.json),
            (Kind::Latency, Some("192.0.2.1"), true, true)
        );
        let Ok(Command::Doctor(c)) = parse("doctor") else {
            panic!("doctor parses")
        };
        assert_eq!((c.kind, c.apply), (Kind::Udp, false));
        let e = parse("doctor --for sctp").expect_err("refused").to_string();
        assert!(
            e.contains("--for") && e.contains("tcp, udp, latency"),
            "{e}"
        );
    }

    #[test]
    fn ping_flags() {
        let Ok(Command::Ping(c)) = parse("ping 127.0.0.1 -c 5 -i 200ms -s 1000 -W 2s --raw --json")
        else {
            panic!("ping parses")
        };
        let p = &c.params;
        assert_eq!(
            (p.count, p.size, p.force_raw, c.json),
            (Some(5), 1000, true, true)
        );
        assert_eq!(
            (p.interval, p.wait),
            (Duration::from_millis(200), Duration::from_secs(2))
        );
        let Ok(Command::Ping(c)) = parse("ping ::1") else {
            panic!("ping parses")
        };
        assert_eq!(
            (c.params.count, c.params.size, c.params.interval),
            (None, 56, Duration::from_secs(1))
        );
        for bad in [
            "ping",
            "ping 127.0.0.1 -c 0",
            "ping 127.0.0.1 -s 70000",
            "ping 127.0.0.1 -i 0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn iface_flag_on_tests() {
        let Ok(Command::Tcp(c)) = parse("tcp --iface lo") else {
            panic!("tcp parses")
        };
        assert_eq!(c.iface.as_deref(), Some("lo"));
        let Ok(Command::Udp(c)) = parse("udp 192.0.2.1 --iface lo --json") else {
            panic!("udp parses")
        };
        assert_eq!(c.iface.as_deref(), Some("lo"));
        let e = parse("tcp --iface nope0").expect_err("refused").to_string();
        assert!(e.contains("--iface") && e.contains("nope0"), "{e}");
        assert!(parse("tcp --iface lo --csv").is_err());
    }
}
