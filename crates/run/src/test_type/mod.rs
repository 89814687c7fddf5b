//! The test-type table's I/O half: one entry per type of test — tcp
//! stream, udp stream, rr over tcp, rr over udp, crr, msg — holding what
//! the control loops do differently for it: how the client attaches its
//! data connections, how each side starts its data phase, how often the
//! control loop wakes while it runs, how the report is built, and what the
//! client checks the two sides agree on. Each entry carries its rules
//! (`linerate_proto::test_type`: negotiation hooks, rate and memory budget,
//! report shape, engine workload, how the server attaches data), so one
//! lookup gives both halves. A new type of test (an iperf3 wire mode) is a
//! new entry here and in the rules, plus its own module, not a branch in
//! every file.
//!
//! Also what both sides share: the software string and a side's runner
//! parameters.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod checks;

use crate::error::{fail, Context as _, Result, RunError};
use linerate_engine::engines::EngineKind;
use linerate_engine::rr::{self, CrrServer, CrrTarget, RrConns, RrParams};
use linerate_engine::runner::{self, CpuScope, DataSocket, RunParams, SideRun, StreamSetup};
use linerate_engine::stream::POLL;
use linerate_engine::{socket, udp};
use linerate_iperf3::streams::Iperf3Streams;
use linerate_proto::clock::ClockOffset;
use linerate_proto::measure::Role;
use linerate_proto::measure::SideResults;
use linerate_proto::spec::{Limit, Protocol, StreamPlan, TestSpec};
use linerate_proto::test_type::{self as rules, Rules, Workload};
use linerate_proto::wire::{DataHello, Side, Token};
use linerate_report::build;
use linerate_report::model::TestInfo;
use linerate_report::Report;

/// What the client knows when it attaches and starts its side.
#[derive(Debug)]
pub struct ClientSide<'a> {
    pub engine: EngineKind,
    /// The data streams' wire format (an iperf3 client's streams too).
    pub wire: Wire,
    /// The server's control address (data connections go to its port;
    /// UDP streams to the ports it sent).
    pub peer: SocketAddr,
    /// The test's token from the server's Accept (none for an iperf3
    /// server, whose streams carry its cookie).
    pub token: Option<Token>,
    pub cpus: &'a [usize],
    pub cpu_scope: CpuScope,
    pub connect_timeout: Duration,
    /// The clock offset to the server (rr).
    pub clock: Option<ClockOffset>,
    /// `--transport unix`: the server's abstract name for this test's data
    /// connections, from its Accept.
    pub unix_name: Option<String>,
}

/// What the server knows when it starts its side.
#[derive(Debug)]
pub struct ServerSide<'a> {
    pub engine: EngineKind,
    /// The data streams' wire format (an iperf3 client's streams too).
    pub wire: Wire,
    pub cpus: &'a [usize],
    pub cpu_scope: CpuScope,
    /// The crr side, created when the test was accepted (crr only).
    pub crr: Option<&'a Arc<CrrServer>>,
    /// `server --threads`: event-loop threads for `--flows` tests.
    pub flow_threads: Option<u16>,
}

/// Client: the data connections of `spec`, opened and greeted; notes for
/// the report go to `notes`.
type AttachFn = fn(
    &ClientSide<'_>,
    &TestSpec,
    udp_ports: &[u16],
    notes: &mut Vec<String>,
) -> Result<Vec<StreamSetup>>;
/// A side's data phase, started now on the attached streams.
type ClientStartFn = fn(&ClientSide<'_>, &TestSpec, Vec<StreamSetup>) -> Result<SideRun>;
type ServerStartFn = fn(&ServerSide<'_>, &TestSpec, Vec<StreamSetup>) -> Result<SideRun>;
/// Client: a completed test's two sides agree (else the figures are wrong).
type CheckFn = fn(&TestSpec, &Report) -> Result<()>;
/// The report from the descriptive fields, the agreed spec, the client's
/// and the server's results, and notes.
type BuildFn = fn(TestInfo, &TestSpec, &SideResults, &SideResults, Vec<String>) -> Report;

/// One type of test.
#[derive(Debug)]
pub struct TestType {
    /// What the layers below decide by type of test (its name included).
    pub rules: &'static Rules,
    pub attach: AttachFn,
    pub start_client: ClientStartFn,
    pub start_server: ServerStartFn,
    /// How long the control loops wait for the peer while the data phase
    /// runs: short when interval records are relayed as they happen, long
    /// when there are none (less disturbance to the flows).
    pub wake: Duration,
    pub build: BuildFn,
    pub check: CheckFn,
}

const TCP_STREAM: TestType = TestType {
    rules: &rules::TCP_STREAM,
    attach: attach_tcp,
    start_client: start_stream_client,
    start_server: start_stream_server,
    wake: Duration::from_millis(20),
    build: build::build_stream,
    check: checks::tcp_totals,
};

const UDP_STREAM: TestType = TestType {
    rules: &rules::UDP_STREAM,
    attach: attach_udp,
    start_client: start_stream_client,
    start_server: start_stream_server,
    wake: Duration::from_millis(20),
    build: build::build_stream,
    // Loss is measured, not an error; the report says what arrived.
    check: |_, _| Ok(()),
};

const RR_TCP: TestType = TestType {
    rules: &rules::RR_TCP,
    attach: attach_tcp,
    start_client: start_rr_client,
    start_server: start_rr_server,
    wake: Duration::from_millis(100),
    build: build::build_rr,
    check: |_, r| checks::rr(r, false),
};

const RR_UDP: TestType = TestType {
    rules: &rules::RR_UDP,
    attach: attach_udp,
    check: |_, r| checks::rr(r, true),
    ..RR_TCP
};

const CRR: TestType = TestType {
    rules: &rules::CRR,
    // Every transaction opens its own connection as it runs: up front only
    // the load streams (`--under-load`).
    attach: attach_tcp,
    start_client: start_crr_client,
    start_server: start_crr_server,
    wake: Duration::from_millis(100),
    build: build::build_rr,
    check: |_, r| checks::rr(r, false),
};

const MSG: TestType = TestType {
    rules: &rules::MSG,
    attach: attach_tcp,
    start_client: |c, spec, streams| {
        native_only(c.wire, spec)?;
        crate::msg_net::start_client(spec, streams)
    },
    start_server: |s, spec, streams| {
        native_only(s.wire, spec)?;
        crate::msg_net::start_server(spec, streams)
    },
    // No interval records: the control loops wait long.
    wake: Duration::from_millis(100),
    build: linerate_report::msg_net::build_msg,
    check: checks::msg,
};

/// The entry for an agreed spec: its rules' [`rules::Entry`], matched
/// exhaustively, so every entry of the rules has its entry here by
/// construction (and the kind and protocol are mapped in one place).
pub fn of(spec: &TestSpec) -> &'static TestType {
    match rules::Entry::of(spec.kind, spec.protocol) {
        rules::Entry::TcpStream => &TCP_STREAM,
        rules::Entry::UdpStream => &UDP_STREAM,
        rules::Entry::RrTcp => &RR_TCP,
        rules::Entry::RrUdp => &RR_UDP,
        rules::Entry::Crr => &CRR,
        rules::Entry::Msg => &MSG,
    }
}

impl ClientSide<'_> {
    /// The test's token, which every native data connection carries.
    fn token(&self) -> Result<Token> {
        self.token
            .ok_or_else(|| RunError::Protocol("data streams without the test's token".into()))
    }

    /// The encoded `DataHello` that attaches planned stream `p` (a TCP
    /// connection's first frame, a UDP stream's greeting).
    fn data_hello(&self, p: &StreamPlan) -> Result<Vec<u8>> {
        let mut hello = Vec::new();
        DataHello {
            token: self.token()?,
            stream: p.id,
            sender: p.sender,
        }
        .encode(&mut hello);
        Ok(hello)
    }
}

/// Whose CPU a side accounts: the process, or only its own threads when
/// it shares the process (an embedded server, or concurrent tests).
pub fn cpu_scope(shares_process: bool) -> CpuScope {
    if shares_process {
        CpuScope::Threads
    } else {
        CpuScope::Process
    }
}

/// The role of a planned stream on `side`.
fn role(sender: Side, side: Side) -> Role {
    if sender == side {
        Role::Sender
    } else {
        Role::Receiver
    }
}

/// `tcp --rate` (or the server's `--max-rate` clamp): the kernel paces a
/// stream that `side` sends on `sock`; a receiving socket is left alone.
pub fn pace_sender(
    sock: &std::net::TcpStream,
    spec: &TestSpec,
    sender: Side,
    side: Side,
) -> Result<()> {
    match spec.tcp.rate {
        Some(bps) if sender == side => Ok(linerate_engine::tcp_pace::set(sock, bps)?),
        _ => Ok(()),
    }
}

/// TCP: one connection per planned stream, greeted with its `DataHello`
/// (`--transport unix`: a Unix stream socket to the test's abstract name).
fn attach_tcp(
    c: &ClientSide<'_>,
    spec: &TestSpec,
    _: &[u16],
    notes: &mut Vec<String>,
) -> Result<Vec<StreamSetup>> {
    let mut streams = Vec::new();
    if spec.flows.is_some() {
        room_for_flows(c, spec.connection_count() as u64)?;
    }
    if spec.tcp.unix {
        notes.push(
            "transport unix: the data connections are Unix stream sockets (the server's \
             abstract address for this test; the control connection is TCP)"
                .into(),
        );
    }
    for p in spec.stream_plan() {
        streams.push(connect_tcp(c, spec, &p)?);
    }
    Ok(streams)
}

/// One planned TCP data connection, opened and greeted with its
/// `DataHello` (a TCP test's, or rr over UDP's load stream).
fn connect_tcp(c: &ClientSide<'_>, spec: &TestSpec, p: &StreamPlan) -> Result<StreamSetup> {
    let sock = if spec.tcp.unix {
        connect_unix(c, p.id)?
    } else {
        let sock = socket::connect(c.peer, &spec.tcp, c.connect_timeout)
            .with_context(|| format!("opening data connection {}", p.id))?;
        pace_sender(&sock, spec, p.sender, Side::Client)?;
        sock
    };
    (&sock)
        .write_all(&c.data_hello(p)?)
        .with_context(|| format!("greeting data connection {}", p.id))?;
    socket::set_io_timeout(&sock, POLL)?;
    Ok(StreamSetup {
        id: p.id,
        sender: p.sender,
        role: role(p.sender, Side::Client),
        bytes: p.bytes,
        datagrams: None,
        sock: DataSocket::Tcp(sock),
    })
}

/// `--flows`: room for `connections` sockets on this side (`RLIMIT_NOFILE`
/// raised, or the test refused with the number), and as many again for
/// the server when it shares this process (embedded: the CPU is counted
/// per thread for the same reason).
fn room_for_flows(c: &ClientSide<'_>, connections: u64) -> Result<()> {
    let sides = if c.cpu_scope == CpuScope::Threads {
        2
    } else {
        1
    };
    let needed = sides * connections + linerate_engine::event_loop::fds::SPARE_FDS;
    Ok(linerate_engine::event_loop::fds::ensure(needed)?)
}

/// `--transport unix`: data connection `id` to the server's abstract
/// address for this test (which exists only on the server's host, in its
/// network namespace; the server takes it only from this process's uid).
fn connect_unix(c: &ClientSide<'_>, id: u32) -> Result<std::net::TcpStream> {
    let name = c
        .unix_name
        .as_deref()
        .ok_or_else(|| RunError::Protocol("the server sent no Unix data socket name".into()))?;
    let addr = socket::unix_abstract(name)?;
    let sock = std::os::unix::net::UnixStream::connect_addr(&addr).with_context(|| {
        format!(
            "opening data connection {id} over a Unix socket (--transport unix needs the \
             server on this host, in this network namespace)"
        )
    })?;
    Ok(socket::unix_as_stream(sock))
}

/// UDP: a socket connected to each of the server's data ports, each
/// attached with the greeting handshake.
fn attach_udp(
    c: &ClientSide<'_>,
    spec: &TestSpec,
    ports: &[u16],
    notes: &mut Vec<String>,
) -> Result<Vec<StreamSetup>> {
    // rr under load: its load streams are TCP connections, the rest
    // datagrams on the ports the server sent.
    let (load, plan): (Vec<_>, Vec<_>) = spec.stream_plan().into_iter().partition(|p| p.load);
    if ports.len() != plan.len() {
        fail!(
            Protocol,
            "the server sent {} UDP ports for {} streams",
            ports.len(),
            plan.len()
        );
    }
    if spec.flows.is_some() {
        room_for_flows(c, (plan.len() + load.len()) as u64)?;
    }
    let window = spec.udp.as_ref().and_then(|u| u.window);
    let mut streams = Vec::new();
    for (p, &port) in plan.iter().zip(ports) {
        let to = SocketAddr::new(c.peer.ip(), port);
        let sock = udp::connect(to).with_context(|| format!("UDP stream {}", p.id))?;
        if let Some(w) = window {
            let note = udp::set_buffers(&sock, w)?;
            if p.id == 1 {
                notes.push(format!("client: {note}"));
            }
        }
        if role(p.sender, Side::Client) == Role::Receiver {
            // Before the greeting, so the server's first datagrams find GRO on.
            udp::prepare_recv(c.engine, &sock);
        } else {
            // Before the greeting: what the engine takes long to set up.
            udp::prepare_send(c.engine, &sock);
        }
        udp::greet(&sock, &c.data_hello(p)?)
            .with_context(|| format!("attaching UDP stream {} to {to}", p.id))?;
        if role(p.sender, Side::Client) == Role::Receiver {
            // The echo came: what arrives from now on is the test's.
            udp::greeted(c.engine, &sock);
        }
        sock.set_write_timeout(Some(POLL))
            .context("UDP write timeout")?;
        streams.push(StreamSetup {
            id: p.id,
            sender: p.sender,
            role: role(p.sender, Side::Client),
            bytes: None,
            datagrams: p.datagrams,
            sock: DataSocket::Udp(sock),
        });
    }
    for p in &load {
        streams.push(connect_tcp(c, spec, p)?);
    }
    Ok(streams)
}

/// Server: prepares a UDP socket for its stream once the client's greeting
/// connected it, before the server's Start goes out (so before the client
/// sends data): what the engine needs on before the first datagram, and
/// what takes long to set up (`xdp`'s program and AF_XDP socket, which
/// need the route to the peer: attached after Start, a receiver's kernel
/// socket overflowed meanwhile, counted as the first half second's loss).
/// Only a UDP stream's receiver wants the drop counter and arrival stamps: rr times its
/// messages itself, and with either option on every receive becomes a
/// `recvmsg` with control messages (and `SO_TIMESTAMPNS` turns on
/// timestamping of every packet the host receives): busy-polled UDP rr
/// p50 was 6.24 µs with them, 5.60 µs without (round 10). An rr socket,
/// which sends the responses, is prepared as a sender's (so every phase's
/// socket holds `xdp`'s port until its phase runs).
pub fn server_udp_socket(
    engine: EngineKind,
    spec: &TestSpec,
    plan: &linerate_proto::spec::StreamPlan,
    sock: &std::net::UdpSocket,
) {
    if role(plan.sender, Side::Server) == Role::Sender || Workload::of(spec) != Workload::UdpStream
    {
        udp::prepare_send(engine, sock);
    } else {
        udp::prepare_recv(engine, sock);
        udp::greeted(engine, sock);
    }
}

/// Server: the setup of a UDP stream whose client greeted its socket.
pub fn server_udp_stream(
    plan: &linerate_proto::spec::StreamPlan,
    sock: std::net::UdpSocket,
) -> StreamSetup {
    StreamSetup {
        id: plan.id,
        sender: plan.sender,
        role: role(plan.sender, Side::Server),
        bytes: None,
        datagrams: plan.datagrams,
        sock: DataSocket::Udp(sock),
    }
}

/// Server: the setup of an attached TCP data connection.
pub fn server_tcp_stream(
    plan: &linerate_proto::spec::StreamPlan,
    sock: std::net::TcpStream,
) -> StreamSetup {
    StreamSetup {
        id: plan.id,
        sender: plan.sender,
        role: role(plan.sender, Side::Server),
        bytes: plan.bytes,
        datagrams: None,
        sock: DataSocket::Tcp(sock),
    }
}

/// The data streams' wire format and ending: a parameter of every entry's
/// start hooks, so native and iperf3 sessions start their data phase
/// through the same entry, with the same runner parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// linerate's own datagrams; each side's senders stop at the planned end.
    #[default]
    Native,
    /// iperf3's: its datagrams ([`Iperf3Streams`], sequence numbers
    /// `counters_64bit` wide, its receive accounts restarted after the
    /// omit) and its end: its client decides it (TEST_END), so a server's
    /// TCP senders run until then (an iperf3 client must not see its
    /// streams end first); UDP senders also stop at the planned end on
    /// the server's clock, which started first, so nothing is sent after
    /// the client stopped counting. Only stream tests have this form.
    Iperf3 { counters_64bit: bool },
}

/// The entries without an iperf3 form (iperf3 carries only streams).
fn native_only(wire: Wire, spec: &TestSpec) -> Result<()> {
    match wire {
        Wire::Native => Ok(()),
        Wire::Iperf3 { .. } => fail!(
            Spec,
            "iperf3 has no {} test (it carries only streams)",
            rules::of(spec).name
        ),
    }
}

/// Runner parameters of `side` from the agreed spec: the one place they
/// are built, for native and iperf3 tests alike (reached only through the
/// stream entries' start hooks).
fn run_params(
    spec: &TestSpec,
    (cpus, cpu_scope): (&[usize], CpuScope),
    wire: Wire,
    side: Side,
) -> RunParams {
    let omit = Duration::from_millis(spec.omit_ms);
    // iperf3's `-t 0` (with neither -n nor -k) has no planned end either.
    let until_test_end = match wire {
        Wire::Native => false,
        Wire::Iperf3 { .. } => {
            spec.limit == Limit::TimeMs(0)
                || (side == Side::Server && spec.protocol == Protocol::Tcp)
        }
    };
    let spin_mode = linerate_engine::wait::side_spin_mode(spec.connection_count() as u32, cpus);
    RunParams {
        udp: spec.udp.as_ref().map(|u| runner::UdpParams {
            millipps: u.millipps(spec.len),
            burst: u.burst,
            verify: u.verify,
            faults: u.faults.clone(),
            priority: u.priority,
        }),
        len: spec.len as usize,
        time: match spec.limit {
            Limit::TimeMs(ms) if !until_test_end => Some(Duration::from_millis(ms)),
            Limit::TimeMs(_) | Limit::Bytes(_) | Limit::Datagrams(_) => None,
        },
        omit,
        interval: Duration::from_millis(spec.interval_ms),
        cpus: cpus.to_vec(),
        cpu_scope,
        skip_rx_copy: spec.tcp.skip_rx_copy,
        // Every stream of this side spins on its own thread.
        busy_poll: spec.busy_poll.then_some(spin_mode),
        spin_mode,
        loops: spec.flows.map(|f| usize::from(f.threads.max(1))),
        window: spec.tcp.window,
    }
}

/// A side's streams, started now in `wire`'s format.
fn start_streams(
    engine: EngineKind,
    wire: Wire,
    streams: Vec<StreamSetup>,
    (spec, params): (&TestSpec, RunParams),
) -> SideRun {
    let now = Instant::now();
    match wire {
        Wire::Native => runner::start(engine, streams, params, now),
        Wire::Iperf3 { counters_64bit } => {
            let format = Iperf3Streams {
                counters_64bit,
                omit: Duration::from_millis(spec.omit_ms),
            };
            runner::start_with(engine, streams, params, format, now)
        }
    }
}

fn start_stream_client(
    c: &ClientSide<'_>,
    spec: &TestSpec,
    streams: Vec<StreamSetup>,
) -> Result<SideRun> {
    let params = run_params(spec, (c.cpus, c.cpu_scope), c.wire, Side::Client);
    Ok(start_streams(c.engine, c.wire, streams, (spec, params)))
}

fn start_stream_server(
    s: &ServerSide<'_>,
    spec: &TestSpec,
    streams: Vec<StreamSetup>,
) -> Result<SideRun> {
    let mut params = run_params(spec, (s.cpus, s.cpu_scope), s.wire, Side::Server);
    if let (Some(_), Some(t)) = (params.loops, s.flow_threads) {
        // The server serves a client's flows on its own thread budget.
        params.loops = Some(usize::from(t.max(1)));
    }
    Ok(start_streams(s.engine, s.wire, streams, (spec, params)))
}

fn rr_params(
    spec: &TestSpec,
    (cpus, scope, wire): (&[usize], CpuScope, Wire),
    clock: Option<ClockOffset>,
) -> Result<RrParams> {
    native_only(wire, spec)?;
    spec.rr_plan()
        .map(|plan| RrParams::new(plan, cpus, scope, clock))
        .ok_or_else(|| RunError::Spec("request/response test without its parameters".to_string()))
}

/// rr: the flows run on the connections opened for each phase.
fn start_rr_client(
    c: &ClientSide<'_>,
    spec: &TestSpec,
    streams: Vec<StreamSetup>,
) -> Result<SideRun> {
    let params = rr_params(spec, (c.cpus, c.cpu_scope, c.wire), c.clock)?;
    let conns = RrConns::sort(&params.plan, streams)?;
    Ok(match spec.flows {
        Some(f) => rr::loops::start_client(c.engine, conns, params, usize::from(f.threads)),
        None => rr::start_client(c.engine, conns, None, params),
    })
}

fn start_rr_server(
    s: &ServerSide<'_>,
    spec: &TestSpec,
    streams: Vec<StreamSetup>,
) -> Result<SideRun> {
    let params = rr_params(spec, (s.cpus, s.cpu_scope, s.wire), None)?;
    let conns = RrConns::sort(&params.plan, streams)?;
    Ok(match spec.flows {
        // The server serves a client's flows on its own thread budget.
        Some(f) => {
            let threads = s.flow_threads.unwrap_or(f.threads);
            rr::loops::start_server(s.engine, conns, params, usize::from(threads))
        }
        None => rr::start_server(s.engine, conns, params),
    })
}

/// crr: a connection per transaction, greeted with the test's token
/// (beside the load streams, `streams`, under load).
fn start_crr_client(
    c: &ClientSide<'_>,
    spec: &TestSpec,
    streams: Vec<StreamSetup>,
) -> Result<SideRun> {
    let params = rr_params(spec, (c.cpus, c.cpu_scope, c.wire), c.clock)?;
    let load = RrConns::load_only(&params.plan, streams)?;
    let target = CrrTarget {
        addr: c.peer,
        tcp: spec.tcp.clone(),
        token: c.token()?,
    };
    Ok(match spec.flows {
        Some(f) => {
            // A connection per flow in flight.
            room_for_flows(c, u64::from(f.count))?;
            let threads = usize::from(f.threads);
            rr::loops::start_crr_client(c.engine, (target, load), params, threads)
        }
        None => rr::start_client(c.engine, load, Some(target), params),
    })
}

fn start_crr_server(
    s: &ServerSide<'_>,
    spec: &TestSpec,
    streams: Vec<StreamSetup>,
) -> Result<SideRun> {
    native_only(s.wire, spec)?;
    let crr = s
        .crr
        .ok_or_else(|| RunError::Spec("crr test without its server side".to_string()))?;
    let params = rr_params(spec, (s.cpus, s.cpu_scope, s.wire), None)?;
    Ok(crr.start(RrConns::load_only(&params.plan, streams)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::TestKind;

    /// Every kind and protocol has the entry its name says, carrying the
    /// rules the layers below look up for the same spec.
    #[test]
    fn every_spec_has_its_entry() {
        let spec = |kind, protocol| TestSpec {
            kind,
            protocol,
            ..TestSpec::default()
        };
        let all = linerate_proto::test_type::ALL;
        let names: Vec<&str> = all
            .iter()
            .map(|&(k, p)| of(&spec(k, p)).rules.name)
            .collect();
        assert_eq!(
            names,
            ["tcp stream", "udp stream", "rr", "rr (udp)", "crr", "msg"]
        );
        for (k, p) in all {
            assert_eq!(of(&spec(k, p)).rules.name, rules::of(&spec(k, p)).name);
        }
        assert_eq!(
            of(&spec(TestKind::Crr, Protocol::Tcp)).rules.attach,
            rules::Attach::PerTransaction
        );
        assert!(
            of(&spec(TestKind::Rr, Protocol::Tcp)).wake
                > of(&spec(TestKind::Stream, Protocol::Tcp)).wake,
            "rr control loops wake less often (no interval records to relay)"
        );
    }

    /// A UDP stream's receiving socket gets arrival stamps and the drop
    /// counter; rr's server sockets get neither: each option turns every
    /// receive into a `recvmsg` with control messages (`SO_TIMESTAMPNS`
    /// also stamps every packet the host receives), and the busy-polled UDP
    /// rr server lost 10% of its p50 to them against sockperf.
    #[test]
    fn issue_8_rr_udp_server_sockets_carry_no_receive_stamps() {
        let stamped = |kind| {
            let spec = TestSpec {
                kind,
                protocol: Protocol::Udp,
                ..TestSpec::default()
            };
            let plan = linerate_proto::spec::StreamPlan {
                id: 1,
                sender: Side::Client,
                bytes: None,
                datagrams: None,
                load: false,
            };
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            server_udp_socket(EngineKind::default(), &spec, &plan, &sock);
            [libc::SO_TIMESTAMPNS, libc::SO_RXQ_OVFL]
                .map(|opt| socket::get_int(&sock, libc::SOL_SOCKET, opt).expect("getsockopt") != 0)
        };
        assert_eq!(
            stamped(TestKind::Stream),
            [true, true],
            "a UDP stream's receiver"
        );
        assert_eq!(
            stamped(TestKind::Rr),
            [false, false],
            "an rr server's socket"
        );
    }
}
