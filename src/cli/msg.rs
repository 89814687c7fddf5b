//! Flags and validation of `linerate msg` (whole messages acknowledged by
//! the receiver, over host-local transports) and of the hidden
//! `__msg-peer` command, the receiving process `msg` starts.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use linerate_local::link::Options;
use linerate_local::msg::Plan;
use linerate_local::wait::Spin;
use linerate_local::Transport;
use linerate_proto::rr_core::SpinMode;
use linerate_report::render::Format;
use linerate_stats::units::{parse_duration, parse_size};

use super::common::{OutputArgs, DEFAULT_PORT};
use super::values::format_of;

#[derive(Debug, Args)]
pub struct MsgArgs {
    /// A `linerate server` to send the messages to over TCP (a connection
    /// per concurrent transfer; the server receives and acknowledges);
    /// omit to run both ends on this host over --transport.
    pub host: Option<String>,
    /// Server port (with HOST).
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Message sizes, comma-separated (K/M/G are 1024-based).
    #[arg(long, default_value = "56,4K,64K,1M")]
    pub sizes: String,
    /// Concurrent transfers, comma-separated: each a channel of its own
    /// with one sending thread and one receiving thread.
    #[arg(long, default_value = "1")]
    pub concurrency: String,
    /// Trials per size and concurrency (mean ± sd and a 95% CI across them).
    #[arg(long, default_value_t = 10)]
    pub trials: u32,
    /// Timed messages per trial and channel; `auto`: 64 MiB / size, within
    /// 4..=1000.
    #[arg(long, default_value = "auto")]
    pub messages: String,
    /// Transports, comma-separated: tcp (loopback), unix (stream socket
    /// pair), unix-dgram (datagram socket pair), shm (both of
    /// shm-direct: the message in ring slots, and shm-bulk: the message in
    /// a shared region, a descriptor in the ring).
    /// [default: unix; with HOST: tcp, the only one]
    #[arg(long)]
    pub transport: Option<String>,
    /// Check every byte of every message (a pattern from its number and
    /// offset), outside the timed section; counts corrupt messages.
    #[arg(long)]
    pub verify: bool,
    /// shm-direct: bytes per ring slot, its 8-byte header included; the
    /// largest direct message is this minus 8.
    #[arg(long, default_value = "64")]
    pub shm_slot: String,
    /// shm: how long a waiting end spins on the ring before it sleeps on
    /// its futex doorbell (0: sleep at once); the budget adapts, yielding
    /// when the CPUs may be shared (as rr's --busy-poll).
    #[arg(long, default_value = "20us")]
    pub spin: String,
    /// Write an SVG plot: throughput against size (± 1 sd bands) and
    /// per-message time against size, a line per transport and concurrency.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The hidden receiving process of `linerate msg`.
#[derive(Debug, Args)]
pub struct MsgPeerArgs {
    #[arg(long)]
    pub transport: String,
    /// msg: the plan of messages.
    #[arg(long, required_unless_present = "rr_phases")]
    pub plan: Option<String>,
    /// rr: request:response sizes per phase.
    #[arg(long, conflicts_with = "plan")]
    pub rr_phases: Option<String>,
    /// Inherited descriptors of the channels, in order.
    #[arg(long, value_delimiter = ',')]
    pub fds: Vec<i32>,
    /// The inherited control socket.
    #[arg(long)]
    pub ctl: i32,
    #[arg(long)]
    pub slot: u32,
    #[arg(long)]
    pub ack_slot: u32,
    #[arg(long)]
    pub region: usize,
    #[arg(long)]
    pub spin_ns: u64,
    /// Spin without yielding (a CPU per spinning end).
    #[arg(long)]
    pub spin_dedicated: bool,
    /// Sockets spin too (rr --busy-poll).
    #[arg(long)]
    pub busy_poll: bool,
    /// rr: the client's --cpus (serving flow f takes the CPU after the
    /// client flow f's).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
}

/// A validated `linerate msg`.
#[derive(Debug, Clone)]
pub struct MsgConfig {
    pub transports: Vec<Transport>,
    pub sizes: Vec<usize>,
    pub concurrency: Vec<u32>,
    pub trials: u32,
    /// Fixed timed messages per trial and channel (`None`: by size).
    pub messages: Option<u64>,
    pub verify: bool,
    pub opts: Options,
    pub plot: Option<PathBuf>,
    pub format: Format,
    /// `msg HOST`: the server, its port and how long to wait connecting.
    pub remote: Option<linerate_run::config::ClientConfig>,
}

impl MsgConfig {
    /// Timed messages per trial and channel for `size`.
    pub fn messages_for(&self, size: usize) -> u64 {
        self.messages
            .unwrap_or_else(|| ((64usize << 20) / size.max(1)).clamp(4, 1000) as u64)
    }
}

/// What a peer process runs.
#[derive(Debug, Clone)]
pub enum PeerRun {
    Msg(Plan),
    /// rr: (request, response) bytes per phase.
    Rr(Vec<(usize, usize)>),
}

/// A validated `__msg-peer`.
#[derive(Debug, Clone)]
pub struct MsgPeerConfig {
    pub transport: Transport,
    pub mode: PeerRun,
    pub fds: Vec<i32>,
    pub ctl: i32,
    pub opts: Options,
    /// rr: the client's `--cpus`.
    pub cpus: Vec<usize>,
}

/// The largest message `msg` takes (a bulk region per channel is this big).
const MAX_SIZE: u64 = 1 << 30;

pub fn validate_msg(a: MsgArgs) -> Result<MsgConfig> {
    let transport = match (&a.host, a.transport.as_deref()) {
        (None, t) => t.unwrap_or("unix").to_owned(),
        (Some(_), None | Some("tcp")) => "tcp".to_owned(),
        (Some(h), Some(t)) => bail!(
            "--transport {t}: with HOST ({h}) the messages go over TCP to its server; the \
             local transports run without HOST"
        ),
    };
    let mut sizes = Vec::new();
    for s in a.sizes.split(',').filter(|s| !s.trim().is_empty()) {
        let n = parse_size(s.trim()).context("--sizes")?;
        if n == 0 || n > MAX_SIZE {
            bail!("--sizes: {s:?}: a message is 1 byte to 1 GiB");
        }
        if !sizes.contains(&(n as usize)) {
            sizes.push(n as usize);
        }
    }
    if sizes.is_empty() {
        bail!("--sizes: empty list");
    }
    let mut concurrency = Vec::new();
    for c in a.concurrency.split(',').filter(|s| !s.trim().is_empty()) {
        let n: u32 = c
            .trim()
            .parse()
            .with_context(|| format!("--concurrency: {c:?} is not a number"))?;
        if !(1..=256).contains(&n) {
            bail!("--concurrency: {n}: 1 to 256 concurrent transfers");
        }
        concurrency.push(n);
    }
    if concurrency.is_empty() {
        bail!("--concurrency: empty list");
    }
    if a.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let messages = match a.messages.trim() {
        "auto" => None,
        m => {
            let n: u64 = m
                .parse()
                .with_context(|| format!("--messages: {m:?} is not a number or auto"))?;
            if n == 0 {
                bail!("--messages must be at least 1");
            }
            Some(n)
        }
    };
    let transports =
        Transport::parse_list(&transport).map_err(|e| anyhow::anyhow!("--transport: {e}"))?;
    let slot = parse_size(&a.shm_slot).context("--shm-slot")?;
    if !(16..=1 << 20).contains(&slot) || slot % 8 != 0 {
        bail!("--shm-slot: {slot} bytes; a slot is 16 B to 1 MiB, a multiple of 8");
    }
    let spin = parse_duration(&a.spin).context("--spin")?;
    if spin > Duration::from_secs(1) {
        bail!("--spin: at most 1s");
    }
    let format = format_of(&a.output);
    let remote = a.host.map(|host| linerate_run::config::ClientConfig {
        target: linerate_run::config::Target::Remote { host, port: a.port },
        // Per concurrency, the client fills in streams and the plan.
        spec: linerate_proto::spec::TestSpec {
            kind: linerate_proto::spec::TestKind::Msg,
            // Nagle would hold each acknowledgement (and a small message)
            // for the ACK of the one before.
            tcp: linerate_proto::spec::TcpOptions {
                no_delay: true,
                ..Default::default()
            },
            ..Default::default()
        },
        engine: linerate_engine::engines::EngineKind::Syscall,
        engine_note: None,
        cpus: Vec::new(),
        format,
        connect_timeout: Duration::from_secs(10),
        iperf3: false,
        server_engine: None,
        auth_key: None,
        iface: None,
        report: None,
        plot: None,
        quiet_intervals: false,
        beside: linerate_run::config::Beside::Alone,
    });
    Ok(MsgConfig {
        remote,
        transports,
        opts: Options {
            slot_size: slot as u32,
            // Acknowledgements and verdicts: 8-byte words.
            ack_slot: 16,
            region: sizes
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
                .next_multiple_of(4096),
            spin: Spin {
                budget: spin,
                mode: linerate_engine::wait::side_spin_mode(
                    concurrency.iter().copied().max().unwrap_or(1),
                    &[],
                ),
            },
            // msg's sockets block (it has no --busy-poll).
            busy_poll: false,
        },
        sizes,
        concurrency,
        trials: a.trials,
        messages,
        verify: a.verify,
        plot: a.plot,
        format,
    })
}

pub fn validate_peer(a: MsgPeerArgs) -> Result<MsgPeerConfig> {
    Ok(MsgPeerConfig {
        transport: a
            .transport
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?,
        mode: match (&a.plan, &a.rr_phases) {
            (Some(p), _) => PeerRun::Msg(Plan::from_arg(p).map_err(|e| anyhow::anyhow!(e))?),
            (None, Some(p)) => PeerRun::Rr(
                linerate_local::rr::Plan::parse_phases(p).map_err(|e| anyhow::anyhow!(e))?,
            ),
            (None, None) => bail!("--plan or --rr-phases"),
        },
        fds: a.fds,
        ctl: a.ctl,
        cpus: a.cpus,
        opts: Options {
            slot_size: a.slot,
            ack_slot: a.ack_slot,
            region: a.region,
            spin: Spin {
                budget: Duration::from_nanos(a.spin_ns),
                mode: if a.spin_dedicated {
                    SpinMode::Dedicated
                } else {
                    SpinMode::Shared
                },
            },
            busy_poll: a.busy_poll,
        },
    })
}
