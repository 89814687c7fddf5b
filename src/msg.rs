//! `linerate msg`: whole messages between two processes on this host. The
//! client makes both ends of every channel, starts the receiving process
//! (this binary's hidden `__msg-peer`) with the far ends as inherited
//! descriptors, runs the sending side here, and builds the report from
//! both ends' counts. No server takes part.

use std::io::Write;

use anyhow::{anyhow, bail, Context, Result};
use linerate_local::link::Options;
use linerate_local::msg::{self as core, Plan, RxTotals, SendRun, BATCH_FACTOR};
use linerate_local::{sock, Transport};
use linerate_report::msg::{
    build_cell, skipped_cell, CellInput, MsgCell, MsgCounts, MsgReport, MsgTimer, MsgVerify,
    TrialInput,
};
use linerate_report::render::export;
use linerate_stats::histogram::Histogram;

use crate::cli::MsgConfig;
use linerate_run::error::RunError;
use linerate_run::local_peer::{parse_records, Peer, PeerMode};

/// What the report says about the two ends.
const ENDS: &str = "both ends on this host: linerate started the receiving process itself \
                    (a child process; no server)";

/// Runs `msg` and prints its report; a Ctrl-C ends it as interrupted
/// (nothing reported: the trials are not complete).
pub fn run(cfg: &MsgConfig) -> Result<(), RunError> {
    if let Some(remote) = &cfg.remote {
        let report = measure_net(cfg, remote)?;
        return output(cfg, &report).map_err(crate::caller::caller);
    }
    run_inner(cfg).map_err(interrupted_or)
}

/// The error of a local run: interrupted when the user pressed Ctrl-C
/// (whatever the channels then saw), else a failure.
pub fn interrupted_or(e: anyhow::Error) -> RunError {
    if linerate_run::outcome::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
        RunError::Interrupted { reported: false }
    } else {
        crate::caller::caller(e)
    }
}

fn run_inner(cfg: &MsgConfig) -> Result<()> {
    output(cfg, &measure(cfg)?)
}

/// Prints the report and writes the plot asked for.
fn output(cfg: &MsgConfig, report: &MsgReport) -> Result<()> {
    let mut out = std::io::stdout().lock();
    export(report, cfg.format, &mut out)?;
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
                if linerate_run::outcome::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
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
        software: linerate_run::about::software(),
        ends: ENDS.into(),
        waiting: shm_waiting(cfg),
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

/// How shared memory's ends wait, when a shm transport runs.
fn shm_waiting(cfg: &MsgConfig) -> Option<String> {
    use linerate_proto::rr_core::SpinMode;
    let shm = cfg
        .transports
        .iter()
        .any(|t| matches!(t, Transport::ShmDirect | Transport::ShmBulk));
    let spin = cfg.opts.spin;
    shm.then(|| {
        if spin.budget.is_zero() {
            "shm: a waiting end sleeps on its futex doorbell at once (--spin 0)".into()
        } else {
            format!(
                "shm: a waiting end spins on the ring up to {} µs (--spin; {}), then sleeps on \
                 its futex doorbell",
                spin.budget.as_nanos() as f64 / 1e3,
                match spin.mode {
                    SpinMode::Dedicated => {
                        "without yielding: a CPU per spinning end, until sleeps show it shared"
                    }
                    SpinMode::Shared => {
                        "yielding, the budget halved after each wait it misses: the CPUs may \
                         be shared"
                    }
                }
            )
        }
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

/// One transport × concurrency: both processes, every size and trial.
fn run_cell(
    t: Transport,
    conns: usize,
    plan: &Plan,
    opts: &Options,
) -> Result<(SendRun, Vec<RxTotals>)> {
    let (near, peer) = Peer::start(t, conns, opts, PeerMode::Msg(plan))?;
    let sent = core::run_sender(
        near,
        plan,
        &|| peer.kill(),
        &linerate_run::outcome::INTERRUPTED,
    );
    let (run, line) = peer.finish(sent)?;
    Ok((run, parse_totals(&line)?))
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

/// `linerate msg HOST`: a protocol test per concurrency, its cells
/// gathered into the msg report (the same tables, plot and JSON as the
/// local test).
pub(crate) fn measure_net(
    cfg: &crate::cli::MsgConfig,
    remote: &crate::cli::ClientConfig,
) -> Result<linerate_report::msg::MsgReport, linerate_run::error::RunError> {
    use linerate_proto::spec::MsgSpec;
    use linerate_report::msg::{MsgReport, MsgTimer, MsgVerify};
    let mut cells = Vec::new();
    for &conc in &cfg.concurrency {
        let mut c = remote.clone();
        c.spec.streams = u16::try_from(conc).unwrap_or(u16::MAX);
        c.spec.msg = Some(MsgSpec {
            sizes: cfg.sizes.iter().map(|&s| s as u32).collect(),
            messages: cfg.sizes.iter().map(|&s| cfg.messages_for(s)).collect(),
            trials: cfg.trials,
            verify: cfg.verify,
        });
        // Ctrl-C: the trials are not complete, nothing is reported (as
        // the local test).
        let interrupted = linerate_run::error::RunError::Interrupted { reported: false };
        let report = match linerate_run::run::run_trial(&c) {
            Err(linerate_run::error::RunError::Interrupted { .. }) => return Err(interrupted),
            r => r?,
        };
        if report.interrupted {
            return Err(interrupted);
        }
        cells.extend(report.msg.unwrap_or_default());
    }
    let server = match &remote.target {
        crate::cli::Target::Remote { host, port } => format!("{host}:{port}"),
        crate::cli::Target::Embedded => "an embedded server".into(),
    };
    Ok(MsgReport {
        test: "msg".into(),
        software: linerate_run::about::software(),
        waiting: None,
        ends: format!(
            "sender here, receiver the linerate server at {server} (TCP, a connection per \
             concurrent transfer)"
        ),
        timer: MsgTimer {
            granularity_ns: linerate_local::msg::clock_granularity_ns(),
            batch_factor: linerate_local::msg::BATCH_FACTOR,
        },
        verify: MsgVerify {
            enabled: cfg.verify,
            outside_timing: true,
        },
        cells,
    })
}
