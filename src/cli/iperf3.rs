//! `linerate iperf3 …` (or the binary run under the name `iperf3`): a
//! drop-in command line that takes iperf3's flags as iperf3 spells them
//! and means them as iperf3 does. `-c HOST` runs a test over iperf3's
//! protocol (which a `linerate server` speaks as well as a real iperf3
//! server), printed as iperf3 prints it (`-J`: iperf3's JSON schema);
//! `-s` is `linerate server`. An iperf3 option linerate does not support
//! is refused by name, never ignored.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use linerate_engine::engines::auto;
use linerate_engine::engines::batch::Toggle;
use linerate_engine::engines::{Batch, EngineKind};
use linerate_iperf3::json::Params;
use linerate_proto::limits::ServerLimits;
use linerate_proto::spec::{Protocol, TestSpec};
use linerate_report::render::Format;
use linerate_stats::units::{parse_rate, parse_size};

use super::values::direction;
use linerate_run::config::{ClientConfig, Iperf3Extras as Extras, Iperf3Family as Family, Target};

use super::args;
use super::command::{Command, Iperf3Config, Iperf3Style as Style};
use super::test_line;

impl Style {
    /// `-J`, `--json-stream`, or iperf3's text.
    fn of(a: &Args) -> Style {
        if a.json {
            Style::Json
        } else if a.json_stream {
            Style::JsonStream
        } else {
            Style::Text
        }
    }
}

/// iperf3's flags, as iperf3 spells them.
#[derive(Parser, Debug)]
#[command(
    name = "linerate iperf3",
    about = "iperf3's command line, run by linerate: -c HOST runs a test over iperf3's \
             protocol (against a real iperf3 server or a linerate server), printed as \
             iperf3 prints it (-J: iperf3's JSON schema); -s is `linerate server`, which \
             serves iperf3 and linerate clients on one port",
    disable_version_flag = true
)]
struct Args {
    /// Run as a server (`linerate server`).
    #[arg(short = 's', long = "server", conflicts_with = "client")]
    server: bool,
    /// Run as a client of the server at HOST.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    client: Option<String>,
    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 5201)]
    port: u16,
    /// Seconds to transmit for (default 10).
    #[arg(short = 't', long = "time", value_name = "SECS")]
    time: Option<u32>,
    /// Bytes to transmit instead of a time (K/M/G: 1024-based).
    #[arg(short = 'n', long = "bytes", value_name = "N[KMG]", conflicts_with_all = ["time", "blockcount"])]
    bytes: Option<String>,
    /// Blocks (writes of -l bytes; UDP: datagrams) to transmit instead of a time.
    #[arg(
        short = 'k',
        long = "blockcount",
        value_name = "N[KMG]",
        conflicts_with = "time"
    )]
    blockcount: Option<String>,
    /// Parallel streams.
    #[arg(short = 'P', long = "parallel", default_value_t = 1)]
    parallel: u16,
    /// Reverse: the server sends.
    #[arg(short = 'R', long = "reverse", conflicts_with = "bidir")]
    reverse: bool,
    /// Both ways at once.
    #[arg(long = "bidir")]
    bidir: bool,
    /// UDP instead of TCP.
    #[arg(short = 'u', long = "udp")]
    udp: bool,
    /// Target bitrate per stream in bits/s, `RATE[/BURST]` (UDP default 1M;
    /// TCP: unlimited by default, else paced by the kernel).
    #[arg(
        short = 'b',
        long = "bitrate",
        alias = "bandwidth",
        value_name = "N[KMG][/N]"
    )]
    bitrate: Option<String>,
    /// Bytes per read/write (TCP default 128K; UDP: the datagram, default 1460).
    #[arg(short = 'l', long = "length", value_name = "N[KMG]")]
    length: Option<String>,
    /// Socket buffer size (TCP window).
    #[arg(short = 'w', long = "window", value_name = "N[KMG]")]
    window: Option<String>,
    /// Seconds to omit at the start (warm-up).
    #[arg(short = 'O', long = "omit", value_name = "SECS")]
    omit: Option<u32>,
    /// Seconds between interval reports (0: none; default 1).
    #[arg(short = 'i', long = "interval", value_name = "SECS")]
    interval: Option<f64>,
    /// JSON output in iperf3's schema (server: linerate's JSON report).
    #[arg(short = 'J', long = "json")]
    json: bool,
    /// iperf3's JSON events, one a line (server: linerate's JSON lines).
    #[arg(long = "json-stream", conflicts_with = "json")]
    json_stream: bool,
    /// Server: serve one test, then exit.
    #[arg(short = '1', long = "one-off")]
    one_off: bool,
    /// Server: listen on this address; client: connect from it.
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    bind: Option<IpAddr>,
    /// IPv4 only.
    #[arg(short = '4', long = "version4", conflicts_with = "v6")]
    v4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "version6")]
    v6: bool,
    /// TCP congestion control algorithm.
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    congestion: Option<String>,
    /// TCP_NODELAY.
    #[arg(short = 'N', long = "no-delay")]
    no_delay: bool,
    /// TCP maximum segment size.
    #[arg(short = 'M', long = "set-mss", value_name = "BYTES")]
    mss: Option<u32>,
    /// CPU affinity: `N` pins this side's streams to CPU N; `N,M` also asks
    /// the server to pin itself to CPU M (client only, as in iperf3).
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]")]
    affinity: Option<String>,
    /// Zero-copy sends (linerate's zerocopy engine).
    #[arg(short = 'Z', long = "zerocopy")]
    zerocopy: bool,
    /// TCP receivers discard the data with MSG_TRUNC instead of copying it
    /// (iperf3 3.21's option; sent to the server in the parameters).
    #[arg(long = "skip-rx-copy")]
    skip_rx_copy: bool,
    /// UDP GSO and GRO (linerate's batch engine with both on).
    #[arg(long = "gsro")]
    gsro: bool,
    /// 64-bit UDP counters (linerate always uses them with iperf3 peers).
    #[arg(long = "udp-counters-64bit")]
    udp_counters_64bit: bool,
    /// Print the server's report of the test too.
    #[arg(long = "get-server-output")]
    get_server_output: bool,
    /// Append the output (and, with -s, the server's log) to FILE instead
    /// of printing it.
    #[arg(long = "logfile", value_name = "FILE")]
    logfile: Option<PathBuf>,
    /// Print linerate's version.
    #[arg(short = 'v', long = "version")]
    version: bool,
}

/// iperf3 options linerate does not support, with what to do instead.
/// Refused by name before parsing (clap would say only "unexpected").
const UNSUPPORTED: &[(&str, &str)] = &[
    ("-f", "--format"),
    ("", "--forceflush"),
    ("", "--timestamps"),
    ("-d", "--debug"),
    ("-V", "--verbose"),
    ("-D", "--daemon"),
    ("-I", "--pidfile"),
    ("-F", "--file"),
    ("-T", "--title"),
    ("-S", "--tos"),
    ("", "--dscp"),
    ("-L", "--flowlabel"),
    ("-X", "--xbind"),
    ("-m", "--mptcp"),
    ("", "--cport"),
    ("", "--nstreams"),
    ("", "--server-bitrate-limit"),
    ("", "--idle-timeout"),
    ("", "--rcv-timeout"),
    ("", "--snd-timeout"),
    ("", "--cntl-ka"),
    ("", "--bind-dev"),
    ("", "--connect-timeout"),
    ("", "--fq-rate"),
    ("", "--pacing-timer"),
    ("", "--extra-data"),
    ("", "--dont-fragment"),
    ("", "--username"),
    ("", "--rsa-public-key-path"),
    ("", "--rsa-private-key-path"),
    ("", "--authorized-users-path"),
    ("", "--time-skew-threshold"),
    ("", "--use-pkcs1-padding"),
    ("", "--repeating-payload"),
];

/// The first unsupported iperf3 option in `args`, by the name it was given.
fn unsupported(args: &[String]) -> Option<String> {
    args.iter().find_map(|a| {
        let name = a.split('=').next().unwrap_or(a);
        UNSUPPORTED.iter().find_map(|&(short, long)| {
            let hit =
                name == long || (!short.is_empty() && a.starts_with(short) && !a.starts_with("--"));
            hit.then(|| if name == long { long } else { short }.to_owned())
        })
    })
}

/// Parses the drop-in's flags (`argv` without the program name and the
/// `iperf3` word) into a command.
pub fn parse(args: &[String]) -> Result<Command, clap::Error> {
    if let Some(flag) = unsupported(args) {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::UnknownArgument,
            format!(
                "iperf3's {flag} is not supported by linerate iperf3; see `linerate iperf3 --help` \
                 for the iperf3 options it takes (and `linerate tcp|udp --help` for linerate's own)\n"
            ),
        ));
    }
    let argv = std::iter::once("linerate iperf3".to_owned()).chain(args.iter().cloned());
    let a = Args::try_parse_from(argv)?;
    validate(a).map_err(|e| {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!("linerate iperf3: {e:#}\n"),
        )
    })
}

fn validate(a: Args) -> Result<Command> {
    if a.version {
        return Ok(Command::Print(
            format!(
                "linerate {} (iperf3 3.x command line and protocol)\n",
                env!("CARGO_PKG_VERSION")
            )
            .into_bytes(),
        ));
    }
    if a.server {
        return server(a);
    }
    if a.client.is_none() {
        bail!("give -c HOST (client) or -s (server), as with iperf3");
    }
    client(a).map(Command::Iperf3)
}

/// Server-only and client-only flags used on the wrong side.
fn refuse_misplaced(a: &Args) -> Result<()> {
    let client_only = [
        (a.time.is_some(), "-t"),
        (a.bytes.is_some(), "-n"),
        (a.blockcount.is_some(), "-k"),
        (a.parallel != 1, "-P"),
        (a.reverse, "-R"),
        (a.bidir, "--bidir"),
        (a.udp, "-u"),
        (a.bitrate.is_some(), "-b"),
        (a.length.is_some(), "-l"),
        (a.window.is_some(), "-w"),
        (a.omit.is_some(), "-O"),
        (a.congestion.is_some(), "-C"),
        (a.no_delay, "-N"),
        (a.mss.is_some(), "-M"),
        (a.zerocopy, "-Z"),
        (a.skip_rx_copy, "--skip-rx-copy"),
        (a.gsro, "--gsro"),
        (a.get_server_output, "--get-server-output"),
        (a.udp_counters_64bit, "--udp-counters-64bit"),
        (a.interval.is_some(), "-i"),
    ];
    if a.server {
        if let Some((_, f)) = client_only.iter().find(|(set, _)| *set) {
            bail!("{f} is a client option (the client decides the test)");
        }
        if a.affinity.as_deref().is_some_and(|v| v.contains(',')) {
            bail!("-A N,M is a client option (M pins the server); a server takes -A N");
        }
    } else if a.one_off {
        bail!("-1 is a server option");
    }
    Ok(())
}

fn server(a: Args) -> Result<Command> {
    refuse_misplaced(&a)?;
    let bind = match (a.bind, a.v4, a.v6) {
        (Some(b), _, _) => Some(b),
        (None, true, _) => Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        (None, _, true) => Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        _ => None,
    };
    // `linerate server` with these flags: its defaults and checks as is.
    let mut argv: Vec<String> = ["linerate", "server", "--port"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.push(a.port.to_string());
    if let Some(b) = bind {
        argv.extend(["--bind".to_owned(), b.to_string()]);
    }
    if a.one_off {
        argv.push("--once".into());
    }
    if a.json {
        argv.push("--json".into());
    } else if a.json_stream {
        argv.push("--json-lines".into());
    }
    if let Some(n) = &a.affinity {
        // iperf3's server -A N pins the server: linerate's --cpus N.
        argv.extend(["--cpus".to_owned(), n.clone()]);
    }
    let mut command = args::Cli::try_parse_from(argv)
        .and_then(|cli| test_line::validate(cli).map_err(test_line::usage_error))
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))?;
    if let Command::Server(s) = &mut command {
        s.logfile = a.logfile;
    }
    Ok(command)
}

/// `-b RATE[/BURST]`: bits/s (1000-based, as iperf3) and the burst.
fn bitrate(v: &str) -> Result<(u64, u32)> {
    let (rate, burst) = match v.split_once('/') {
        Some((r, b)) => (
            r,
            b.parse::<u32>()
                .ok()
                .filter(|&b| b >= 1)
                .with_context(|| format!("-b {v}: the burst after / must be a whole number ≥ 1"))?,
        ),
        None => (v, 1),
    };
    // iperf3's -b 0: unlimited.
    if rate.trim().parse::<f64>().is_ok_and(|r| r == 0.0) {
        return Ok((0, burst));
    }
    let bps = parse_rate(rate).with_context(|| format!("-b {v}"))?;
    Ok((bps as u64, burst))
}

fn size(flag: &str, v: &str) -> Result<u64> {
    parse_size(v).with_context(|| format!("{flag} {v}"))
}

fn size_u32(flag: &str, v: &str) -> Result<u32> {
    u32::try_from(size(flag, v)?).map_err(|_| anyhow::anyhow!("{flag} {v}: too large"))
}

fn client(a: Args) -> Result<Iperf3Config> {
    refuse_misplaced(&a)?;
    let protocol = if a.udp { Protocol::Udp } else { Protocol::Tcp };
    let len = match (&a.length, protocol) {
        (Some(l), _) => size_u32("-l", l)?,
        (None, Protocol::Tcp) => 128 * 1024,
        (None, Protocol::Udp) => 1460,
    };
    if len == 0 {
        bail!("-l must be at least 1 byte");
    }
    let time = a.time.unwrap_or(10);
    let (num, blockcount) = amounts(&a, time)?;
    if a.parallel == 0 {
        bail!("-P must be at least 1");
    }
    let (rate, burst) = send_rate(&a, protocol)?;
    let omit = a.omit.unwrap_or(0);
    let (interval_ms, intervals) = interval(a.interval, time, omit)?;
    let window = a.window.as_deref().map(|w| size_u32("-w", w)).transpose()?;
    refuse_other_protocol_flags(&a, protocol)?;
    // The flags as iperf3 sends them, turned into a test by the one
    // conversion a linerate server applies to a real iperf3 client's
    // parameters; only the report's interval is this side's own.
    let params = Params {
        protocol: linerate_iperf3::iperf3_protocol(protocol),
        omit,
        time,
        num,
        blockcount,
        mss: a.mss,
        nodelay: a.no_delay,
        parallel: u32::from(a.parallel),
        direction: linerate_iperf3::iperf3_direction(direction(a.reverse, a.bidir)),
        window,
        len,
        bandwidth: rate,
        burst: Some(burst),
        congestion: a.congestion.clone(),
        skip_rx_copy: a.skip_rx_copy,
        ..Params::default()
    };
    let spec = TestSpec {
        interval_ms,
        ..linerate_iperf3::spec_of(&params)
    };
    if let Err(e) = linerate_proto::negotiate::negotiate(&spec, &ServerLimits::unlimited()) {
        bail!("{}: {}", e.field, e.reason);
    }
    let (engine, engine_note) = engine(&a, &spec)?;
    let (cpus, server_affinity) = affinity(a.affinity.as_deref())?;
    let style = Style::of(&a);
    Ok(Iperf3Config {
        client: ClientConfig {
            target: Target::Remote {
                host: a.client.unwrap_or_default(),
                port: a.port,
            },
            spec,
            engine,
            engine_note,
            cpus,
            format: Format::Human,
            connect_timeout: Duration::from_secs(10),
            iperf3: true,
            server_engine: None,
            auth_key: None,
            iface: None,
            report: None,
            plot: None,
            quiet_intervals: false,
            beside: linerate_run::config::Beside::Alone,
        },
        extras: Extras {
            get_server_output: a.get_server_output,
            family: match (a.v4, a.v6) {
                (true, _) => Some(Family::V4),
                (_, true) => Some(Family::V6),
                _ => None,
            },
            bind: a.bind,
            server_affinity,
        },
        style,
        intervals,
        logfile: a.logfile,
    })
}

/// `-n` and `-k` as iperf3's parameters carry them (bytes to move,
/// blocks to move; 0: unset, and `-t` ends the test, 10 s without any).
fn amounts(a: &Args, time: u32) -> Result<(u64, u64)> {
    let num = a.bytes.as_deref().map(|n| size("-n", n)).transpose()?;
    let blocks = a.blockcount.as_deref().map(|k| size("-k", k)).transpose()?;
    match (num, blocks) {
        (Some(0), _) | (None, Some(0)) => bail!("-n and -k must be greater than zero"),
        (None, None) if time == 0 => {
            bail!("-t 0 (run until interrupted) is not supported: give a time, -n or -k")
        }
        _ => Ok((num.unwrap_or(0), blocks.unwrap_or(0))),
    }
}

/// `-b`, with iperf3's defaults (1 Mbit/s for UDP, unpaced TCP): the
/// rate in bit/s (0: unpaced) and the burst.
fn send_rate(a: &Args, protocol: Protocol) -> Result<(u64, u32)> {
    let (rate, burst) = match (&a.bitrate, protocol) {
        (Some(b), _) => bitrate(b)?,
        (None, Protocol::Udp) => (1_000_000, 1),
        (None, Protocol::Tcp) => (0, 1),
    };
    if protocol == Protocol::Tcp && rate != 0 && (rate < 8 || burst != 1) {
        bail!(
            "-b {}: TCP is paced by the kernel, at least 8 bit/s and without a /burst",
            a.bitrate.as_deref().unwrap_or_default()
        );
    }
    Ok((rate, burst))
}

/// `-i SECONDS`: the interval in ms and whether its lines are printed.
/// With `-i 0` one interval spans the whole test (omitted part included).
fn interval(interval: Option<f64>, time: u32, omit: u32) -> Result<(u64, bool)> {
    Ok(match interval {
        Some(0.0) => (u64::from(time.max(1) + omit) * 1000 + 1000, false),
        Some(i) if !(0.01..=60.0).contains(&i) => {
            bail!("-i must be 0 (none) or between 0.01 and 60 seconds")
        }
        Some(i) => ((i * 1000.0).round() as u64, true),
        None => (1000, true),
    })
}

/// The flags of the other protocol's tests, refused by name.
fn refuse_other_protocol_flags(a: &Args, protocol: Protocol) -> Result<()> {
    if protocol == Protocol::Tcp {
        let udp_only = [
            (a.gsro, "--gsro"),
            (a.udp_counters_64bit, "--udp-counters-64bit"),
        ];
        if let Some((_, f)) = udp_only.iter().find(|(set, _)| *set) {
            bail!("{f} applies to UDP tests (-u)");
        }
    } else {
        let tcp_only = [
            (a.congestion.is_some(), "-C"),
            (a.no_delay, "-N"),
            (a.mss.is_some(), "-M"),
            (a.zerocopy, "-Z"),
            (a.skip_rx_copy, "--skip-rx-copy"),
        ];
        if let Some((_, f)) = tcp_only.iter().find(|(set, _)| *set) {
            bail!("{f} applies to TCP tests (without -u)");
        }
    }
    Ok(())
}

/// `-A N[,M]`: this side's CPU, and the server's as iperf3 sends it
/// (`server_affinity`, 0–1024 as iperf3 checks it).
fn affinity(v: Option<&str>) -> Result<(Vec<usize>, Option<u32>)> {
    let Some(v) = v else {
        return Ok((Vec::new(), None));
    };
    let (mine, server) = match v.split_once(',') {
        Some((n, m)) => (n, Some(m)),
        None => (v, None),
    };
    let mine = if mine.contains('-') {
        bail!("-A {v}: one CPU number, as iperf3 takes")
    } else {
        super::values::parse_cpus(Some(mine)).context("-A")?
    };
    let server = server
        .map(|m| {
            m.trim()
                .parse::<u32>()
                .ok()
                .filter(|m| *m <= 1024)
                .with_context(|| {
                    format!("-A {v}: the server's CPU must be a number from 0 to 1024")
                })
        })
        .transpose()?;
    Ok((mine, server))
}

/// `-Z` and `--gsro` name linerate engines; otherwise `auto` picks one.
fn engine(a: &Args, spec: &TestSpec) -> Result<(EngineKind, Option<String>)> {
    let kind = if a.zerocopy {
        EngineKind::ZeroCopy { sendfile: false }
    } else if a.gsro {
        EngineKind::Batch(Batch {
            gso: Toggle::On,
            gro: Toggle::On,
        })
    } else {
        let (kind, note) = auto::choose_for(spec);
        return Ok((kind, Some(note)));
    };
    Ok((kind.check()?, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::{Direction, Limit, Pace};

    fn parse_args(a: &[&str]) -> Result<Command, clap::Error> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn client_of(a: &[&str]) -> Iperf3Config {
        match parse_args(a) {
            Ok(Command::Iperf3(c)) => c,
            other => panic!("{a:?}: {other:?}"),
        }
    }

    #[test]
    fn issue_9_iperf3_flags_mean_what_they_mean_to_iperf3() {
        let c = client_of(&[
            "-c", "h", "-u", "-b", "10M/4", "-l", "1400", "-t", "3", "-P", "2", "-R", "-O", "1",
        ]);
        let s = &c.client.spec;
        assert_eq!(s.protocol, Protocol::Udp);
        assert_eq!(
            (s.len, s.streams, s.direction),
            (1400, 2, Direction::Reverse)
        );
        assert_eq!((s.limit, s.omit_ms), (Limit::TimeMs(3000), 1000));
        let u = s.udp.as_ref().expect("udp");
        assert_eq!((u.pace, u.burst), (Pace::Rate(10_000_000), 4));
        assert!(c.client.iperf3);
        assert_eq!(
            c.client.target,
            Target::Remote {
                host: "h".into(),
                port: 5201
            }
        );
        let c = client_of(&["-c", "h", "-n", "1M", "-J", "-p", "6000", "-i", "0"]);
        assert_eq!(c.client.spec.limit, Limit::Bytes(1 << 20));
        assert_eq!((c.style, c.intervals), (Style::Json, false));
        let c = client_of(&["-c", "h", "-k", "10", "-l", "1K"]);
        assert_eq!(c.client.spec.limit, Limit::Bytes(10 << 10));
        // -b 0: unlimited, as in iperf3.
        let c = client_of(&["-c", "h", "-u", "-b", "0", "-l", "1448"]);
        let pace = c.client.spec.udp.as_ref().map(|u| u.pace);
        assert_eq!(pace, Some(Pace::Unlimited));
        // iperf3's UDP default: 1 Mbit/s.
        let c = client_of(&["-c", "h", "-u"]);
        let pace = c.client.spec.udp.as_ref().map(|u| u.pace);
        assert_eq!(pace, Some(Pace::Rate(1_000_000)));
        match parse_args(&["-s", "-1", "-p", "6001", "-J"]) {
            Ok(Command::Server(s)) => {
                assert!(s.once);
                assert_eq!((s.port, s.format), (6001, Format::Json));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn issue_9_bind_affinity_and_server_logfile_are_taken() {
        let c = client_of(&["-c", "h", "-B", "127.0.0.9", "-A", "0,1"]);
        assert_eq!(c.extras.bind, Some("127.0.0.9".parse().expect("ip")));
        assert_eq!(c.extras.server_affinity, Some(1));
        assert_eq!(c.client.cpus, vec![0]);
        let c = client_of(&["-c", "h", "-A", "0"]);
        assert_eq!((c.client.cpus, c.extras.server_affinity), (vec![0], None));
        match parse_args(&["-s", "--logfile", "/tmp/x.log", "-A", "0"]) {
            Ok(Command::Server(s)) => {
                assert_eq!(s.logfile, Some(PathBuf::from("/tmp/x.log")));
                assert_eq!(s.cpus, vec![0]);
            }
            other => panic!("{other:?}"),
        }
        // -n and -k with -R and --bidir, as iperf3 takes them.
        let c = client_of(&["-c", "h", "-R", "-n", "1M"]);
        assert_eq!(c.client.spec.limit, Limit::Bytes(1 << 20));
        let c = client_of(&["-c", "h", "--bidir", "-u", "-k", "100"]);
        assert_eq!(c.client.spec.limit, Limit::Datagrams(100));
    }

    #[test]
    fn issue_9_unsupported_iperf3_options_are_refused_by_name() {
        for (args, name) in [
            (&["-c", "h", "--dscp", "10"][..], "--dscp"),
            (&["-c", "h", "-f", "m"], "-f"),
            (&["-c", "h", "--title=x"], "--title"),
            (&["-c", "h", "-b", "1M/4"], "-b"),
            (&["-c", "h", "-A", "0,2000"], "-A"),
            (&["-s", "-A", "0,1"], "-A"),
            (&["-s", "-t", "3"], "-t"),
            (&["-c", "h", "--gsro"], "--gsro"),
        ] {
            let e = parse_args(args).expect_err("refused").to_string();
            assert!(e.contains(name), "{args:?}: {e}");
        }
        let e = parse_args(&[]).expect_err("needs -c or -s").to_string();
        assert!(e.contains("-c HOST") && e.contains("-s"), "{e}");
    }
}
