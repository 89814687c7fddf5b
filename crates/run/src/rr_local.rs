//! `linerate rr --transport unix|unix-dgram|shm`: request/response between
//! two processes on this host over a local transport. The client starts
//! the serving process itself (no server, no control protocol), runs the
//! flows, and builds the same request/response report as every rr test
//! from both processes' measurements. What varies by test type comes from
//! the rr entry of the test-type table, as for a network rr: the run
//! parameters (`TestSpec::rr_plan`), the report's builder and the check
//! that both sides agree.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{fail, Context as _, Result, RunError};
use linerate_engine::cpu;
use linerate_local::link::Options;
use linerate_local::rr::{self as lrr, FlowOut, Limit};
use linerate_local::wait::{Spin, DEFAULT_SPIN};
use linerate_local::{sock, Channel, Transport};
use linerate_proto::measure::{CpuMeasurement, RrFlowMeasurement, RrMeasurement, SideResults};
use linerate_proto::rr_core::{RrPlan, SpinMode};
use linerate_proto::spec::{RrLimit, TestSpec};
use linerate_proto::wire::Side;
use linerate_report::build;
use linerate_report::model::{OneWay, Report, RrPhaseRecord, TestInfo};
use linerate_report::render::Sink;

use crate::about::software;
use crate::config::RrConfig;
use crate::local_peer::{parse_records, Peer, PeerMode};

/// Spin budget of `--busy-poll` on shared memory (as rr's socket spinning).
const BUSY_SPIN: Duration = Duration::from_micros(50);

/// Runs the test and hands its report to `sink`.
pub fn run(cfg: &RrConfig, t: Transport, sink: &mut dyn Sink) -> Result<Report, RunError> {
    let spec = &cfg.client.spec;
    let plan = spec
        .rr_plan()
        .ok_or_else(|| RunError::Spec("not an rr test".to_string()))?;
    let flow_count = plan.flows as usize;
    let layout = Layout::of(t, &plan, &cfg.client.cpus)?;
    let start_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let cpus = &cfg.client.cpus;
    let (near, peer) = Peer::start(
        t,
        flow_count,
        &layout.opts,
        PeerMode::Rr(&layout.plan, cpus),
    )
    .with_context(|| format!("--transport {t}"))?;
    let info = test_info(t, spec, start_unix_ms);
    sink.start(&info).map_err(RunError::from)?;
    // Each phase's record as its last flow ends it, as network rr does;
    // a failed write ends nothing here but fails the test afterwards.
    let mut written = Ok(());
    let mut on_phase = |p: usize, outs: Vec<FlowOut>| {
        if let Some(rec) = local_phase_record(spec, p, outs) {
            if written.is_ok() {
                written = sink.rr_phase(&rec);
            }
        }
    };
    let clock = CpuClock::start();
    let flows = lrr::run_client(
        near,
        &layout.plan,
        &|f| pin(cpus, f, 0),
        &|| peer.kill(),
        &crate::outcome::INTERRUPTED,
        &mut on_phase,
    );
    let cpu = clock.stop();
    let (flows, line) = peer
        .finish(flows)
        .with_context(|| format!("--transport {t}"))?;
    written.context("writing output")?;
    let host = cpu.host.clone();
    let client = SideResults {
        engine: t.name().into(),
        cpu,
        rr: Some(RrMeasurement {
            spin: layout.spun,
            busy_poll: busy_note(t, plan.busy_poll),
            ..measurement(&flows)
        }),
        ..SideResults::default()
    };
    let server = server_results(t, &line, host, layout.spun, busy_note(t, plan.busy_poll))?;
    let notes = notes(
        t,
        layout.slot,
        &layout.opts.spin,
        plan.busy_poll,
        flow_count,
        cpus,
    );
    finish(info, spec, (&client, &server), notes, sink)
}

/// The report from both processes' results, built by the test's entry in
/// the test-type table as a network rr's is, handed to `sink`, then
/// checked by the entry: both processes counted the same transactions and
/// bytes in every phase, or the figures are wrong.
fn finish(
    info: TestInfo,
    spec: &TestSpec,
    (client, server): (&SideResults, &SideResults),
    notes: Vec<String>,
    sink: &mut dyn Sink,
) -> Result<Report, RunError> {
    let entry = crate::test_type::of(spec);
    let mut report = (entry.build)(info, spec, client, server, notes);
    for p in report.rr.iter_mut().flat_map(|r| r.phases.iter_mut()) {
        no_one_way(&mut p.client_to_server);
        no_one_way(&mut p.server_to_client);
    }
    sink.finish(&report).map_err(RunError::from)?;
    (entry.check)(spec, &report)?;
    Ok(report)
}

/// How the local link and its flows are set up for this test: the slot
/// size, the spinning, the phases and their limit.
struct Layout {
    /// Ring slot (shared memory) and ack slot size: the largest message
    /// both ways, with room for its header.
    slot: u32,
    opts: Options,
    /// Which ends spin, as the report says it: shared memory always,
    /// sockets with --busy-poll.
    spun: Option<SpinMode>,
    plan: lrr::Plan,
}

impl Layout {
    fn of(t: Transport, rr: &RrPlan, cpus: &[usize]) -> Result<Layout, RunError> {
        let flows = rr.flows as usize;
        let phases: Vec<(usize, usize)> = rr
            .phases
            .iter()
            .map(|p| (p.request as usize, p.response as usize))
            .collect();
        let largest = phases.iter().map(|p| p.0.max(p.1)).max().unwrap_or(1);
        check_dgram_size(t, largest)?;
        // Direct slots fit the largest message both ways.
        let slot = (largest + 8).next_multiple_of(8).max(64) as u32;
        let spin = Spin {
            budget: if rr.busy_poll {
                BUSY_SPIN
            } else {
                DEFAULT_SPIN
            },
            mode: spin_mode(flows, cpus),
        };
        let spun = (t == Transport::ShmDirect || rr.busy_poll).then_some(spin.mode);
        let opts = Options {
            slot_size: slot,
            ack_slot: slot,
            region: 0,
            spin,
            busy_poll: rr.busy_poll,
        };
        let plan = lrr::Plan {
            phases,
            limit: match rr.limit {
                RrLimit::TimeMs(ms) => Limit::Time(Duration::from_millis(ms)),
                RrLimit::Count(n) => Limit::Count(n),
            },
            batch: rr.batch,
        };
        Ok(Layout {
            slot,
            opts,
            spun,
            plan,
        })
    }
}

/// One phase's record from its flows' results, as it ends.
fn local_phase_record(spec: &TestSpec, p: usize, outs: Vec<FlowOut>) -> Option<RrPhaseRecord> {
    let flows = measurement(&outs.into_iter().map(|o| vec![o]).collect::<Vec<_>>()).flows;
    let flows = flows
        .into_iter()
        .map(|f| RrFlowMeasurement {
            phase: p as u32,
            ..f
        })
        .collect();
    let mut rec = build::phase_record(spec, p as u32, flows, None)?;
    no_one_way(&mut rec.client_to_server);
    no_one_way(&mut rec.server_to_client);
    Some(rec)
}

/// This process's CPU time, the host's, and the wall clock, from when the
/// client's flows start to when they end.
struct CpuClock {
    cpu0: cpu::CpuTime,
    host0: Option<cpu::HostSnapshot>,
    wall0: Instant,
}

impl CpuClock {
    fn start() -> CpuClock {
        CpuClock {
            cpu0: cpu::process(),
            host0: cpu::host(),
            wall0: Instant::now(),
        }
    }

    fn stop(self) -> CpuMeasurement {
        let wall_ns = self.wall0.elapsed().as_nanos() as u64;
        let used = cpu::process().saturating_sub(self.cpu0);
        let host = match (self.host0, cpu::host()) {
            (Some(a), Some(b)) => Some(cpu::host_delta(a, b, used.user + used.system)),
            _ => None,
        };
        CpuMeasurement {
            scope: "process".into(),
            user_ns: used.user.as_nanos() as u64,
            system_ns: used.system.as_nanos() as u64,
            wall_ns,
            host,
            ..CpuMeasurement::default()
        }
    }
}

/// What the report says about the two ends of a local test.
fn test_info(t: Transport, spec: &TestSpec, start_unix_ms: u64) -> TestInfo {
    TestInfo {
        server: format!("local {t} (a child process)"),
        embedded_server: false,
        client_software: software(),
        server_software: software(),
        client_engine: t.name().into(),
        server_engine: t.name().into(),
        // The serving process inherits this one's environment.
        client_ld_preload: crate::about::ld_preload(),
        server_ld_preload: crate::about::ld_preload(),
        start_unix_ms,
        protocol: t.name().into(),
        ..TestInfo::from_spec(spec, Side::Client)
    }
}

/// Refuses a message longer than the largest Unix datagram the kernel
/// takes, before anything starts.
fn check_dgram_size(t: Transport, largest: usize) -> Result<(), RunError> {
    if t == Transport::UnixDgram {
        let limit = sock::dgram_limit(&[largest]).map_err(RunError::from)?;
        if limit < largest {
            return Err(RunError::Spec(format!(
                "--transport unix-dgram: a {largest}-byte message is longer than the largest \
                 Unix datagram this kernel took (EMSGSIZE)"
            )));
        }
    }
    Ok(())
}

/// The report's notes on how the local test ran: the transport, the
/// shared-memory slots and spinning, --busy-poll, --cpus, why there are
/// no one-way figures.
fn notes(
    t: Transport,
    slot: u32,
    spin: &Spin,
    busy_poll: bool,
    streams: usize,
    cpus: &[usize],
) -> Vec<String> {
    let mut notes = vec![format!(
        "transport {t}: both ends on this host; linerate started the serving process itself \
         (a child process; no server)"
    )];
    if matches!(t, Transport::ShmDirect) {
        notes.push(format!(
            "shared memory: one ring slot of {slot} bytes per message each way; waiting ends \
             spin on the ring up to {} µs ({}), then sleep on a futex doorbell (the \
             sleeps are counted per flow and phase)",
            spin.budget.as_micros(),
            if busy_poll {
                "--busy-poll"
            } else {
                "the default; --busy-poll: 50 µs"
            }
        ));
    } else if busy_poll {
        notes.push(format!(
            "--busy-poll: non-blocking sockets; a waiting end spins on the receive call up \
             to {} µs, then sleeps in poll(2) (the sleeps are counted per flow and phase)",
            spin.budget.as_micros()
        ));
    }
    if !cpus.is_empty() {
        let side = |s: usize| {
            (0..streams)
                .filter_map(|f| flow_cpu(cpus, f, s))
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        notes.push(format!(
            "--cpus: client flow threads on CPU {}, the serving process's on CPU {}",
            side(0),
            side(1)
        ));
    }
    notes.push(
        "no one-way delays: the local transports carry no timestamps (both ends share the \
         clock; the round trip is measured)"
            .into(),
    );
    notes
}

/// The one-way figures' reason, true of every local phase whatever its
/// sizes (the network rr's reasons speak of timestamp headers and clock
/// offsets, which a local transport has none of).
fn no_one_way(w: &mut OneWay) {
    w.unavailable = Some(
        "the local transports carry no timestamps (both ends share the clock; the round trip \
         is measured)"
            .into(),
    );
}

fn measurement(flows: &[Vec<FlowOut>]) -> RrMeasurement {
    let mut out = Vec::new();
    let phases = flows.first().map_or(0, Vec::len);
    for p in 0..phases {
        for (f, flow) in flows.iter().enumerate() {
            let o = &flow[p];
            out.push(RrFlowMeasurement {
                phase: p as u32,
                flow: f as u32,
                transactions: o.transactions,
                bytes_sent: o.bytes_sent,
                bytes_received: o.bytes_received,
                elapsed_ns: o.elapsed_ns,
                rtt: o.rtt.to_buckets(),
                poll_sleeps: o.waits.map(|w| w.sleeps),
                spin_yielded: o.waits.and_then(|w| w.demoted.then_some(true)),
                ..RrFlowMeasurement::default()
            });
        }
    }
    RrMeasurement {
        flows: out,
        ..RrMeasurement::default()
    }
}

/// With `--busy-poll`, what each side's "busy polling" line says in place
/// of the kernel's answer to `SO_BUSY_POLL`, which polls a network device's
/// queue: a local transport has none, so it is not asked for.
fn busy_note(t: Transport, busy_poll: bool) -> Option<String> {
    busy_poll.then(|| {
        if t == Transport::ShmDirect {
            "spinning on the ring (SO_BUSY_POLL: no socket)".into()
        } else {
            "non-blocking socket, spinning (SO_BUSY_POLL not asked: no device queue)".into()
        }
    })
}

/// How both processes' flow threads spin: without yielding when the CPUs
/// leave one for each of them (2 × flows) and, pinned with `--cpus`, the
/// list names that many distinct CPUs (client and server threads take
/// its CPUs in turn); otherwise yielding (the peer may share the CPU).
fn spin_mode(flows: usize, cpus: &[usize]) -> SpinMode {
    let pinned = (!cpus.is_empty()).then(|| {
        let mut d = cpus.to_vec();
        d.sort_unstable();
        d.dedup();
        // rr_core counts one side's CPUs against its flows.
        d.len() as u32 / 2
    });
    linerate_proto::rr_core::spin_mode(linerate_engine::cpu::online_cpus(), flows as u32, pinned)
}

/// The serving process's line: `user_ns:system_ns:wall_ns`, then a
/// `phase:flow:transactions:sent:received:elapsed_ns:counted:sleeps:demoted`
/// record per flow (the last three: whether the transport counts its
/// waits, the waits that slept, 1 when a dedicated spin turned yielding).
fn server_results(
    t: Transport,
    line: &str,
    host: Option<linerate_proto::measure::HostCpu>,
    spin: Option<SpinMode>,
    busy_poll: Option<String>,
) -> Result<SideResults> {
    let (cpu_rec, rest) = line.split_once(' ').unwrap_or((line, ""));
    let c = parse_records(cpu_rec, 3)?;
    let Some(&[user_ns, system_ns, wall_ns]) = c.first().map(Vec::as_slice) else {
        fail!(Protocol, "peer process: bad CPU record {cpu_rec:?}");
    };
    let flows = parse_records(rest, 9)?
        .into_iter()
        .map(|v| RrFlowMeasurement {
            phase: v[0] as u32,
            flow: v[1] as u32,
            transactions: v[2],
            bytes_sent: v[3],
            bytes_received: v[4],
            elapsed_ns: v[5],
            // waits counted:sleeps:demoted
            poll_sleeps: (v[6] == 1).then_some(v[7]),
            spin_yielded: (v[6] == 1 && v[8] == 1).then_some(true),
            ..RrFlowMeasurement::default()
        })
        .collect();
    Ok(SideResults {
        engine: t.name().into(),
        cpu: CpuMeasurement {
            scope: "process".into(),
            user_ns,
            system_ns,
            wall_ns,
            host,
            ..CpuMeasurement::default()
        },
        rr: Some(RrMeasurement {
            flows,
            spin,
            busy_poll,
            ..RrMeasurement::default()
        }),
        ..SideResults::default()
    })
}

/// The CPU of flow `f`'s thread on `side` (0: client, 1: serving
/// process) under `--cpus`: both processes' flow threads take the list's
/// CPUs in turn, client flow 0, its server, client flow 1, … (`--cpus 1,0`:
/// the client on CPU 1, its serving process on CPU 0). The serving process
/// is the client's child and would otherwise inherit the client's
/// affinity, `taskset` included, so the two could not be pinned apart.
fn flow_cpu(cpus: &[usize], f: usize, side: usize) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[(2 * f + side) % cpus.len()])
}

fn pin(cpus: &[usize], f: usize, side: usize) -> std::io::Result<()> {
    match flow_cpu(cpus, f, side) {
        Some(c) => cpu::pin_current_thread(c),
        None => Ok(()),
    }
}

/// The serving process: every flow on its own thread (pinned with the
/// client's `--cpus`); its totals line.
pub fn serve(
    chans: Vec<Box<dyn Channel>>,
    phases: &[(usize, usize)],
    cpus: &[usize],
) -> Result<String> {
    let cpu0 = cpu::process();
    let wall0 = Instant::now();
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = chans
            .into_iter()
            .enumerate()
            .map(|(f, mut ch)| {
                s.spawn(move || {
                    pin(cpus, f, 1).map_err(|source| linerate_local::LocalError::Io {
                        what: "pinning a serving thread (--cpus)",
                        source,
                    })?;
                    lrr::serve(&mut *ch, phases)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join()).collect()
    });
    let used = cpu::process().saturating_sub(cpu0);
    let mut recs = vec![format!(
        "{}:{}:{}",
        used.user.as_nanos(),
        used.system.as_nanos(),
        wall0.elapsed().as_nanos()
    )];
    for (f, r) in results.into_iter().enumerate() {
        let per = r
            .map_err(|_| RunError::Protocol("a serving thread panicked".to_string()))?
            .context("serving")?;
        for (p, o) in per.iter().enumerate() {
            let w = o.waits.unwrap_or_default();
            recs.push(format!(
                "{p}:{f}:{}:{}:{}:{}:{}:{}:{}",
                o.transactions,
                o.bytes_sent,
                o.bytes_received,
                o.elapsed_ns,
                u8::from(o.waits.is_some()),
                w.sleeps,
                u8::from(w.demoted)
            ));
        }
    }
    Ok(recs.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::{RrSpec, TestKind};

    fn side(transactions: u64) -> SideResults {
        SideResults {
            rr: Some(RrMeasurement {
                flows: vec![RrFlowMeasurement {
                    transactions,
                    bytes_sent: transactions,
                    bytes_received: transactions,
                    elapsed_ns: 1_000_000,
                    ..RrFlowMeasurement::default()
                }],
                ..RrMeasurement::default()
            }),
            ..SideResults::default()
        }
    }

    /// Issue 24: a local rr built its report beside the test-type table and
    /// skipped the rr entry's check that both sides agree, which every
    /// network rr passes through: a serving process that answered fewer
    /// transactions than the client completed was reported as a result.
    #[test]
    fn issue_24_local_rr_results_pass_the_rr_entrys_check() {
        let spec = TestSpec {
            kind: TestKind::Rr,
            rr: Some(RrSpec {
                sizes: vec![1],
                ..RrSpec::default()
            }),
            ..TestSpec::default()
        };
        let run = |server: u64| {
            let info = TestInfo::from_spec(&spec, Side::Client);
            finish(
                info,
                &spec,
                (&side(100), &side(server)),
                Vec::new(),
                &mut crate::run::Quiet,
            )
        };
        assert!(run(100).is_ok(), "both sides agree");
        let e = run(99).expect_err("the sides disagree").to_string();
        assert!(e.contains("the server answered 99"), "{e}");
    }
}
