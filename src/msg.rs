//! `linerate msg`: whole messages between two processes on this host. The
//! client makes both ends of every channel, starts the receiving process
//! (this binary's hidden `__msg-peer`) with the far ends as inherited
//! descriptors, runs the sending side here, and builds the report from
//! both ends' counts. No server takes part.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use linerate_local::link::{self, Options};
use linerate_local::msg::{self as core, Plan, RxTotals, SendRun, BATCH_FACTOR};
use linerate_local::{sock, Transport};
use linerate_report::msg::{
    build_cell, render, skipped_cell, CellInput, MsgCell, MsgCounts, MsgReport, MsgTimer,
    MsgVerify, TrialInput,
};
use linerate_stats::histogram::Histogram;

use crate::cli::MsgConfig;
use crate::outcome::ClientError;

/// How long the client waits for the receiving process's totals after the
/// last message was acknowledged.
const RESULT_WAIT: Duration = Duration::from_secs(30);

/// What the report says about the two ends.
const ENDS: &str = "both ends on this host: linerate started the receiving process itself \
                    (a child process; no server)";

/// Runs `msg` and prints its report; a Ctrl-C ends it as interrupted
/// (nothing reported: the trials are not complete).
pub fn run(cfg: &MsgConfig) -> Result<(), ClientError> {
    if let Some(remote) = &cfg.remote {
        let report = crate::msg_net::measure(cfg, remote)?;
        return output(cfg, &report).map_err(ClientError::Failed);
    }
    run_inner(cfg).map_err(interrupted_or)
}

/// The error of a local run: interrupted when the user pressed Ctrl-C
/// (whatever the channels then saw), else a failure.
pub fn interrupted_or(e: anyhow::Error) -> ClientError {
    if crate::outcome::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
        ClientError::Interrupted { reported: false }
    } else {
        ClientError::Failed(e)
    }
}

fn run_inner(cfg: &MsgConfig) -> Result<()> {
    output(cfg, &measure(cfg)?)
}

/// Prints the report and writes the plot asked for.
fn output(cfg: &MsgConfig, report: &MsgReport) -> Result<()> {
    let mut out = std::io::stdout().lock();
    render(report, cfg.format, &mut out)?;
    out.flush()?;
    if let Some(path) = &cfg.plot {
        linerate_report::msg_plot::svg(report, path)
            .with_context(|| format!("--plot {}", path.display()))?;
    }
    Ok(())
}

fn measure(cfg: &MsgConfig) -> Result<MsgReport> {
    let mut cells = Vec::new();
    let mut granularity_ns = core::clock_granularity_ns();
    for &t in &cfg.transports {
        let (sizes, skipped) = carried(t, cfg)?;
        for &conc in &cfg.concurrency {
            let mut row: Vec<MsgCell> = skipped
                .iter()
                .map(|(size, why)| skipped_cell(t.name(), conc, *size as u64, why.clone()))
                .collect();
            if !sizes.is_empty() {
                if crate::outcome::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
                    bail!("interrupted");
                }
                let plan = Plan {
                    messages: sizes.iter().map(|&s| cfg.messages_for(s)).collect(),
                    sizes: sizes.clone(),
                    trials: cfg.trials,
                    verify: cfg.verify,
                };
                let (run, rx) = run_cell(t, conc as usize, &plan, &cfg.opts)
                    .with_context(|| format!("{t}, concurrency {conc}"))?;
                granularity_ns = run.granularity_ns;
                row.extend(cells_of(t, conc, &plan, &run, &rx));
            }
            row.sort_by_key(|c| c.size);
            cells.extend(row);
        }
    }
    if let Some(why) = cells.iter().all(|c| c.skipped.is_some()).then(|| {
        cells
            .iter()
            .filter_map(|c| {
                Some(format!(
                    "{} {} B: {}",
                    c.transport,
                    c.size,
                    c.skipped.as_ref()?
                ))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }) {
        bail!("nothing to measure: {why}");
    }
    Ok(MsgReport {
        test: "msg".into(),
        software: crate::about::software(),
        ends: ENDS.into(),
        timer: MsgTimer {
            granularity_ns,
            batch_factor: BATCH_FACTOR,
        },
        verify: MsgVerify {
            enabled: cfg.verify,
            outside_timing: true,
        },
        cells,
    })
}

/// The sizes `t` carries whole here, and the others with the reason.
#[allow(clippy::type_complexity)]
fn carried(t: Transport, cfg: &MsgConfig) -> Result<(Vec<usize>, Vec<(usize, String)>)> {
    let limit = match t {
        Transport::ShmDirect => Some((
            cfg.opts.layout(t).limit(),
            format!(
                "exceeds a direct slot's {} B payload (--shm-slot {}; shm-bulk carries it)",
                cfg.opts.layout(t).limit(),
                cfg.opts.slot_size
            ),
        )),
        Transport::UnixDgram => {
            let l = sock::dgram_limit(&cfg.sizes)?;
            Some((
                l,
                "longer than the largest Unix datagram this kernel took (a send of it failed \
                 with EMSGSIZE: the socket's send buffer bounds a datagram)"
                    .to_owned(),
            ))
        }
        _ => None,
    };
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    for &s in &cfg.sizes {
        match &limit {
            Some((l, why)) if s > *l => skipped.push((s, why.clone())),
            _ => ok.push(s),
        }
    }
    Ok((ok, skipped))
}

/// The receiving (serving) process and its control socket.
pub struct Peer {
    child: Mutex<Child>,
    ctl: UnixStream,
}

/// What the peer process runs: `msg`'s receiver, or `rr`'s server.
pub enum PeerMode<'a> {
    Msg(&'a Plan),
    Rr(&'a linerate_local::rr::Plan),
}

impl Peer {
    /// Makes both ends of `conns` channels of `t` and starts the peer
    /// process with the far ends; this process's ends come back.
    pub fn start(
        t: Transport,
        conns: usize,
        opts: &Options,
        mode: PeerMode<'_>,
    ) -> Result<(Vec<Box<dyn linerate_local::Channel>>, Peer)> {
        let (ctl, ctl_far) = UnixStream::pair().context("control socket pair")?;
        let ctl_fd: OwnedFd = ctl.try_clone().context("control socket")?.into();
        let (near, far) = link::create(t, conns, opts, &ctl_fd)?;
        let ctl_far: OwnedFd = ctl_far.into();
        let child = spawn_peer(t, mode, opts, &far, &ctl_far)?;
        // Our copies of the far ends close here: the child holds them now,
        // so its exit shows as a hang-up on every channel.
        drop(far);
        drop(ctl_far);
        Ok((
            near,
            Peer {
                child: Mutex::new(child),
                ctl,
            },
        ))
    }

    /// Ends the peer process (a channel failed; others may wait on it).
    pub fn kill(&self) {
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
        }
    }

    /// The peer's totals line (after `ok`), once it exited cleanly. When
    /// this side failed (`local`), the peer's own words win over a
    /// hang-up seen here.
    pub fn finish<T>(&self, local: Result<T, linerate_local::LocalError>) -> Result<(T, String)> {
        let line = peer_line(&self.ctl);
        let status = self.child.lock().map_err(|_| anyhow!("child lock"))?.wait();
        match (local, line) {
            (Ok(v), Ok(line)) => {
                let status = status.context("waiting for the peer process")?;
                if !status.success() {
                    bail!("the peer process exited with {status}");
                }
                Ok((v, line))
            }
            (Err(_), Err(e)) if !e.to_string().contains("closed") => Err(e),
            (Err(e), _) => Err(anyhow!(e)),
            (Ok(_), Err(e)) => Err(e),
        }
    }
}

/// One transport × concurrency: both processes, every size and trial.
fn run_cell(
    t: Transport,
    conns: usize,
    plan: &Plan,
    opts: &Options,
) -> Result<(SendRun, Vec<RxTotals>)> {
    let (near, peer) = Peer::start(t, conns, opts, PeerMode::Msg(plan))?;
    let sent = core::run_sender(near, plan, &|| peer.kill(), &crate::outcome::INTERRUPTED);
    let (run, line) = peer.finish(sent)?;
    Ok((run, parse_totals(&line)?))
}

fn spawn_peer(
    t: Transport,
    mode: PeerMode<'_>,
    opts: &Options,
    far: &[OwnedFd],
    ctl: &OwnedFd,
) -> Result<Child> {
    for fd in far.iter().chain([ctl]) {
        link::inheritable(fd)?;
    }
    let fds: Vec<String> = far.iter().map(|f| f.as_raw_fd().to_string()).collect();
    let exe = std::env::current_exe().context("finding this program to start the peer")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__msg-peer")
        .args(["--transport", t.name()])
        .args(["--fds", &fds.join(",")])
        .args(["--ctl", &ctl.as_raw_fd().to_string()])
        .args(["--slot", &opts.slot_size.to_string()])
        .args(["--ack-slot", &opts.ack_slot.to_string()])
        .args(["--region", &opts.region.to_string()])
        .args(["--spin-ns", &opts.spin.as_nanos().to_string()]);
    match mode {
        PeerMode::Msg(plan) => cmd.args(["--plan", &plan.to_arg()]),
        PeerMode::Rr(plan) => cmd.args(["--rr-phases", &plan.phases_arg()]),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .context("starting the peer process")
}

/// The peer's line: `ok …`, or `error …`; what follows `ok`.
fn peer_line(ctl: &UnixStream) -> Result<String> {
    ctl.set_read_timeout(Some(RESULT_WAIT))?;
    let mut line = String::new();
    BufReader::new(ctl)
        .read_line(&mut line)
        .context("reading the peer process's totals")?;
    let line = line.trim();
    if line.is_empty() {
        bail!("the peer process closed its control socket without totals");
    }
    if let Some(e) = line.strip_prefix("error ") {
        bail!("peer process: {e}");
    }
    match line.strip_prefix("ok") {
        Some(rest) => Ok(rest.trim().to_owned()),
        None => bail!("peer process: unexpected {line:?}"),
    }
}

/// Whitespace-separated `a:b:c…` records of unsigned numbers.
pub fn parse_records(line: &str, fields: usize) -> Result<Vec<Vec<u64>>> {
    line.split_whitespace()
        .map(|t| {
            let v: Vec<u64> = t.split(':').filter_map(|x| x.parse().ok()).collect();
            if v.len() == fields {
                Ok(v)
            } else {
                Err(anyhow!("peer process: bad totals {t:?}"))
            }
        })
        .collect()
}

fn parse_totals(line: &str) -> Result<Vec<RxTotals>> {
    Ok(parse_records(line, 4)?
        .into_iter()
        .map(|v| RxTotals {
            messages: v[0],
            bytes: v[1],
            corrupt: v[2],
            cpu_ns: v[3],
        })
        .collect())
}

fn cells_of(t: Transport, conc: u32, plan: &Plan, run: &SendRun, rx: &[RxTotals]) -> Vec<MsgCell> {
    let mut cells = Vec::new();
    for (i, &size) in plan.sizes.iter().enumerate() {
        let trials = (0..plan.trials as usize)
            .map(|k| {
                let mut hist = Histogram::new();
                let (mut messages, mut bytes, mut cpu_ns) = (0, 0, 0);
                for ch in &run.channels {
                    let o = &ch[i][k];
                    hist.merge(&o.hist);
                    messages += o.messages;
                    bytes += o.bytes;
                    cpu_ns += o.cpu_ns;
                }
                TrialInput {
                    wall_ns: run.wall_ns[i][k],
                    messages,
                    bytes,
                    hist,
                    sender_cpu_ns: cpu_ns,
                }
            })
            .collect();
        let sent_msgs = plan.per_size(i) * u64::from(conc);
        let r = rx.get(i).copied().unwrap_or_default();
        cells.push(build_cell(&CellInput {
            transport: t.name().into(),
            concurrency: conc,
            size: size as u64,
            batch: run.batch[i].0,
            calibration_ns: run.batch[i].1,
            corrupt: plan.verify.then_some(r.corrupt),
            trials,
            sent: MsgCounts {
                messages: sent_msgs,
                bytes: sent_msgs * size as u64,
            },
            received: MsgCounts {
                messages: r.messages,
                bytes: r.bytes,
            },
            receiver_cpu_ns: r.cpu_ns,
        }));
    }
    cells
}

pub(crate) fn peer_msg(
    chans: Vec<Box<dyn linerate_local::Channel>>,
    plan: &Plan,
) -> Result<String> {
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = chans
            .into_iter()
            .map(|mut ch| s.spawn(move || core::receive(&mut *ch, plan)))
            .collect();
        hs.into_iter().map(|h| h.join()).collect()
    });
    let mut total = vec![RxTotals::default(); plan.sizes.len()];
    for r in results {
        let per = r
            .map_err(|_| anyhow!("a receiving thread panicked"))?
            .context("receiving")?;
        for (t, p) in total.iter_mut().zip(per) {
            t.messages += p.messages;
            t.bytes += p.bytes;
            t.corrupt += p.corrupt;
            t.cpu_ns += p.cpu_ns;
        }
    }
    let t: Vec<String> = total
        .iter()
        .map(|t| format!("{}:{}:{}:{}", t.messages, t.bytes, t.corrupt, t.cpu_ns))
        .collect();
    Ok(t.join(" "))
}
