//! What a test or a server is asked to do, as plain values: the client's
//! [`ClientConfig`] (and [`RrConfig`] around it), the server's
//! [`ServerConfig`], and what `--iperf3` tests ask beyond a linerate test.
//! The binary's command line validates its flags into these; a program
//! using this crate builds them itself.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use linerate_engine::engines::auto;
use linerate_engine::engines::EngineKind;
use linerate_engine::EngineError;
use linerate_proto::limits::{EngineOffer, ServerLimits};
use linerate_proto::spec::TestSpec;
use linerate_report::render::Format;

use crate::guard::GuardConfig;

/// Where the client's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Remote {
        host: String,
        port: u16,
    },
    /// A server started inside this process on loopback.
    Embedded,
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub target: Target,
    pub spec: TestSpec,
    pub engine: EngineKind,
    /// With `--engine auto`: which engine it chose and what it skipped.
    pub engine_note: Option<String>,
    pub cpus: Vec<usize>,
    pub format: Format,
    pub connect_timeout: Duration,
    /// `--iperf3`: the server is a real iperf3; speak its protocol.
    pub iperf3: bool,
    /// `--server-engine`: the engine asked of the server for its side.
    pub server_engine: Option<String>,
    /// `--auth-key`: authenticate to the server with this key.
    pub auth_key: Option<linerate_proto::auth::AuthKey>,
    /// `--iface DEV`: the interface whose counters the report adds.
    pub iface: Option<String>,
    /// `--report FILE.html`: also write the HTML page.
    pub report: Option<PathBuf>,
    /// `--plot FILE.svg` (tcp, udp): throughput per interval.
    pub plot: Option<PathBuf>,
    /// `-i 0`: print no interval lines (they are still measured).
    pub quiet_intervals: bool,
    /// A probe beside this test, or this test beside another ([`Beside`]).
    pub beside: Beside,
}

/// Latency probes beside a load (qualify, issue 27), admitted by the
/// server as part of the load's test (`crate::guard::Ask::beside`), so a
/// server that runs one test at a time runs them.
#[derive(Debug, Clone, Default)]
pub enum Beside {
    /// A test on its own.
    #[default]
    Alone,
    /// The load: its token is set here once its streams start, for the
    /// probe to name.
    Load(std::sync::Arc<std::sync::OnceLock<linerate_proto::wire::Token>>),
    /// The probe beside the running test with this token.
    Probe(linerate_proto::wire::Token),
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connection-level limits: address filters, connection cap, rates.
    pub guard: GuardConfig,
    /// `--auth-key`: clients must prove they hold this key.
    pub auth_key: Option<linerate_proto::auth::AuthKey>,
    /// `--metrics ADDR:PORT`: serve Prometheus text there.
    pub metrics: Option<std::net::SocketAddr>,
    /// `--json-lines FILE`: a record per completed test.
    pub json_lines: Option<PathBuf>,
    pub bind: Option<IpAddr>,
    pub port: u16,
    pub once: bool,
    pub max_concurrent: usize,
    pub limits: ServerLimits,
    /// `--threads`: event-loop threads for `--flows` tests (`None`: the
    /// client's number).
    pub flow_threads: Option<u16>,
    /// `--engine`: one engine, or `auto` applied per test.
    pub engine: auto::Configured,
    pub cpus: Vec<usize>,
    pub format: Format,
    /// `linerate iperf3 -s --logfile FILE`: standard output and error
    /// appended to FILE, as iperf3 does.
    pub logfile: Option<PathBuf>,
}

/// A request/response test (rr or crr): the client config plus the files
/// the distributions are exported to.
#[derive(Debug, Clone)]
pub struct RrConfig {
    pub client: ClientConfig,
    pub histogram: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// Estimate the clock offset by probes even when both ends share a kernel.
    pub probe_clock: bool,
    /// `--transport unix|unix-dgram|shm`: both ends on this host, the
    /// serving process started by the client.
    pub local: Option<linerate_local::Transport>,
}

/// What the drop-in command line (`linerate iperf3 -c`) asks beyond a
/// linerate test.
#[derive(Debug, Clone, Default)]
pub struct Iperf3Extras {
    /// `--get-server-output`: ask the server for its report.
    pub get_server_output: bool,
    /// `-4` / `-6`: connect over this address family only.
    pub family: Option<Iperf3Family>,
    /// `-B ADDR`: connect from this local address (control and data).
    pub bind: Option<std::net::IpAddr>,
    /// `-A N,M`: the CPU the server is asked to pin itself to (sent as
    /// `server_affinity`, as iperf3 does).
    pub server_affinity: Option<u32>,
}

/// An address family (`-4`, `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iperf3Family {
    V4,
    V6,
}

/// `--engine auto`'s name (not an engine: a rule that picks one).
pub const AUTO: &str = "auto";

/// What the server answers to `--server-engine`: every engine of this
/// build, refused when `--allow-engines` leaves it out or this kernel
/// cannot run it (probed once, here), and `auto` — the server's own rule
/// for the test, picking among the engines offered — refused only when an
/// `--allow-engines` list leaves it out.
pub fn engine_offers(allow: Option<&str>) -> Result<Vec<EngineOffer>, EngineError> {
    let listed: Option<Vec<&str>> = match allow.map(str::trim) {
        None => None,
        Some("none") => Some(Vec::new()),
        Some(list) => Some(list.split(',').map(str::trim).collect()),
    };
    let allowed: Option<Vec<EngineKind>> = match &listed {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .filter(|&&n| n != AUTO)
                .map(|n| n.parse::<EngineKind>())
                .collect::<Result<_, _>>()?,
        ),
    };
    let not_allowed = || {
        format!(
            "not allowed on this server (its --allow-engines is {})",
            allow.unwrap_or_default()
        )
    };
    let mut offers: Vec<EngineOffer> = EngineKind::ALL
        .iter()
        .map(|k| EngineOffer {
            name: k.name().into(),
            refused: match &allowed {
                Some(a) if !a.iter().any(|x| x.name() == k.name()) => Some(not_allowed()),
                _ => k
                    .check()
                    .err()
                    .map(|e| format!("not supported by the server's kernel: {e}")),
            },
        })
        .collect();
    offers.push(EngineOffer {
        name: AUTO.into(),
        refused: match &listed {
            Some(names) if !names.contains(&AUTO) => Some(not_allowed()),
            _ => None,
        },
    });
    Ok(offers)
}
