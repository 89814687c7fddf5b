//! The result model. These serde types *are* the JSON schema of `--json`
//! (and of each `--json-lines` record); every renderer reads only this model.
//!
//! Conventions: byte counts are integers; rates are bit/s (SI, as f64);
//! times are seconds (f64) unless the field name says otherwise.

use linerate_host::counters::Traffic;
use linerate_proto::clock::ClockOffset;
use linerate_proto::measure::{EngineUse, KernelUdp, LoopKind, TcpInfo, UdpInterval};
use linerate_proto::rr_core::SpinMode;
use linerate_proto::spec::{
    Direction, Limit, Protocol, RrLimit, TcpOptions, TestKind, TestSpec, UdpSpec,
};
use linerate_proto::test_type::{self, Rules, Shape};
use linerate_proto::wire::Side;
use linerate_stats::histogram::Summary;
use serde::{Deserialize, Serialize};

/// Version of this schema; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 2;

/// Which way bytes flow on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    ClientToServer,
    ServerToClient,
}

impl Flow {
    pub fn from_sender(sender: Side) -> Flow {
        match sender {
            Side::Client => Flow::ClientToServer,
            Side::Server => Flow::ServerToClient,
        }
    }

    pub fn sender(self) -> Side {
        match self {
            Flow::ClientToServer => Side::Client,
            Flow::ServerToClient => Side::Server,
        }
    }

    pub fn arrow(self) -> &'static str {
        match self {
            Flow::ClientToServer => "client→server",
            Flow::ServerToClient => "server→client",
        }
    }
}

/// What was run, against what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestInfo {
    /// `stream` (throughput), `rr` (request/response) or `crr`
    /// (connect/request/response); `stream` when absent.
    #[serde(default)]
    pub kind: TestKind,
    /// Which side produced this report (the server prints one per test too).
    #[serde(default = "client_side")]
    pub reported_by: Side,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// Which way the streams send (stream tests only: request/response
    /// tests say what they ran in `rr`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub direction: Option<Direction>,
    /// Streams per sending direction (request/response: flows; `--flows`:
    /// the flows, as `flows.count`).
    pub streams: u32,
    /// `--flows N --threads T`: the flows per direction (also in
    /// `streams`) and the client's event-loop threads.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flows: Option<linerate_proto::spec::Flows>,
    /// Time (ms), byte or datagram limit (stream tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub limit: Option<Limit>,
    /// Bytes per read/write call; UDP: the datagram size (stream tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub len: Option<u32>,
    /// Omitted warm-up, seconds (stream tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub omit_s: Option<f64>,
    /// Interval length, seconds (stream tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interval_s: Option<f64>,
    /// Requested TCP options as agreed with the server.
    pub tcp: TcpOptions,
    /// UDP parameters as agreed with the server (UDP tests only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpSpec>,
    /// Stream tests with `--busy-poll`: both sides' data sockets spun
    /// (request/response tests say it in `rr.busy_poll`).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub busy_poll: bool,
    /// Congestion control the client's first data socket ended up using.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub congestion_used: Option<String>,
    /// Server address as connected (`host:port`).
    pub server: String,
    /// Client address as the server saw it (server reports only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client: Option<String>,
    /// True when the server ran inside the client's process.
    pub embedded_server: bool,
    pub client_software: String,
    pub server_software: String,
    pub client_engine: String,
    /// `--flows`: what the client's event loops waited with, `epoll` or
    /// `io_uring` (the heading's loop), as its results recorded it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_loop: Option<LoopKind>,
    /// Absent until the server's results say it (the `--json-lines` start
    /// record).
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub server_engine: String,
    /// `--flows`: what the server's event loops waited with, as its
    /// results recorded it (absent until they arrive, and from servers
    /// that never say).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_loop: Option<LoopKind>,
    /// `--server-engine`: the engine the client asked the server to use
    /// (the server agreed, or the test would not have run; absent: the
    /// server ran its own `--engine`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_engine_requested: Option<String>,
    /// `LD_PRELOAD` of the client's process, when set (a kernel-bypass
    /// library there changes what is measured; `compare --preload`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_ld_preload: Option<String>,
    /// `LD_PRELOAD` of the server's process, when set, as its results said
    /// (absent until they arrive, and from servers that never say).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_ld_preload: Option<String>,
    /// Unix time the test started, milliseconds.
    pub start_unix_ms: u64,
}

fn client_side() -> Side {
    Side::Client
}

impl TestInfo {
    /// The test-type rules of the test described (what its report shows
    /// and how it is worded). The report keeps the protocol by name.
    pub fn rules(&self) -> &'static Rules {
        let protocol = Protocol::named(&self.protocol).unwrap_or_default();
        test_type::lookup(self.kind, protocol)
    }

    /// The fields that follow from the agreed spec; who ran it, where and
    /// with what are left empty for the caller to fill in.
    pub fn from_spec(spec: &TestSpec, reported_by: Side) -> TestInfo {
        // A request/response test has no direction, write size, limit,
        // warm-up or intervals of its own (issue 13): `rr` has its figures.
        let stream = (test_type::of(spec).shape == Shape::Stream).then_some(spec);
        TestInfo {
            kind: spec.kind,
            reported_by,
            protocol: spec.protocol.name().into(),
            direction: stream.map(|s| s.direction),
            streams: spec.per_direction(),
            flows: spec.flows,
            limit: stream.map(|s| s.limit),
            len: stream.map(|s| s.len),
            omit_s: stream.map(|s| s.omit_ms as f64 / 1e3),
            interval_s: stream.map(|s| s.interval_ms as f64 / 1e3),
            tcp: spec.tcp.clone(),
            udp: spec.udp.clone(),
            busy_poll: spec.busy_poll,
            congestion_used: None,
            server: String::new(),
            client: None,
            embedded_server: false,
            client_software: String::new(),
            server_software: String::new(),
            client_engine: String::new(),
            client_loop: None,
            server_engine: String::new(),
            server_loop: None,
            server_engine_requested: None,
            client_ld_preload: None,
            server_ld_preload: None,
            start_unix_ms: 0,
        }
    }
}

/// One end of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub side: Side,
    /// Payload bytes written (sender) or read (receiver) after the omitted
    /// warm-up.
    pub bytes: u64,
    /// Moved during the omitted warm-up (not in `bytes`).
    pub omitted_bytes: u64,
    /// Seconds from the end of the warm-up to this end's last byte.
    pub seconds: f64,
    /// bytes × 8 ÷ seconds.
    pub bits_per_second: f64,
    /// read/write calls.
    pub calls: u64,
    /// TCP_INFO at the end (sender only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp: Option<TcpInfo>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// What this end's accelerated engine used (absent: syscall engine).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine_use: Option<EngineUse>,
    /// `--busy-poll`: what the kernel said to `SO_BUSY_POLL` and
    /// `SO_PREFER_BUSY_POLL` on this end's socket.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_poll: Option<String>,
    /// `--busy-poll`: waits that spun their whole budget and then slept in
    /// `poll(2)`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub poll_sleeps: Option<u64>,
}

/// Both ends of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    pub id: u32,
    pub flow: Flow,
    pub sender: Endpoint,
    pub receiver: Endpoint,
    /// UDP tests: datagram counts, pacing and loss of this stream.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpSummary>,
}

/// Gaps between consecutive sends, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GapSummary {
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Gaps that were stalls (over 10 scheduled gaps and at least 2 ms:
    /// the sender descheduled, a catch-up burst after); absent where the
    /// sender did not count them (an iperf3 peer, an older linerate).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stalls: Option<u64>,
    /// From the start to the first send, ns: a sender descheduled before
    /// it leaves no gap between sends to show the stall, only this wait
    /// (and, paced, what its pacer gave up after it). Absent where the
    /// sender did not say (an iperf3 peer).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_send_ns: Option<u64>,
}

/// A UDP stream (or the sum of a flow's streams): what was sent, how well
/// it was paced, and what arrived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// Datagram size, header included, bytes.
    pub len: u32,
    // --- sender ---
    /// Datagrams the sender's kernel accepted.
    pub sent: u64,
    /// Sequence numbers issued (the loss baseline): sent − injected
    /// duplicates + injected skips.
    pub issued: u64,
    pub send_errors: u64,
    /// Requested datagrams/s (absent: unpaced).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requested_pps: Option<f64>,
    /// Requested payload bit/s (absent: unpaced).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requested_bits_per_second: Option<f64>,
    /// Requested gap between datagrams, ns (absent: unpaced).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requested_gap_ns: Option<f64>,
    /// sent ÷ the sender's seconds.
    pub sent_pps: f64,
    pub sent_bits_per_second: f64,
    /// Achieved gaps (per stream only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gaps: Option<GapSummary>,
    /// False when the sender could not keep up with the requested rate.
    pub kept_up: bool,
    /// Datagrams due but not sent when the sender stopped.
    pub behind: u64,
    /// Datagrams of the schedule the sender skipped after stalls instead
    /// of sending them in a burst.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slipped: u64,
    // --- receiver ---
    /// Distinct sequence numbers received before the drain deadline.
    pub received: u64,
    /// issued − received.
    pub lost: u64,
    pub loss_ppm: f64,
    pub loss_percent: f64,
    pub reordered: u64,
    pub max_reorder_distance: u64,
    pub duplicates: u64,
    /// Arrived after the drain deadline.
    pub late: u64,
    /// Bad length, header or payload, or another stream's id.
    pub corrupt: u64,
    /// Arrived too far behind to be told from a duplicate (counted lost).
    pub beyond_window: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_corrupt: Option<String>,
    /// RFC 3550 jitter at the end, ns (the largest over a flow's streams).
    pub jitter_ns: f64,
    /// received ÷ the receiver's seconds.
    pub received_pps: f64,
    pub received_bits_per_second: f64,
    /// Drops at the receiving sockets (SO_RXQ_OVFL / SO_MEMINFO).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socket_drops: Option<u64>,
    /// SO_RCVBUF of the receiving socket.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rcvbuf: Option<u64>,
    /// Receive coalescing: waits of a fixed interval the receivers made
    /// after batches that emptied their sockets (absent: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub receiver_coalesce_waits: u64,
    /// False when the receiver never learnt the sender's final count (its
    /// own loss figure was then not final; `lost` here is from the sender's).
    pub receiver_had_final_count: bool,
    /// What the sender's batching engine did (per stream; absent: one
    /// datagram per call).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sender_batching: Option<BatchingSummary>,
    /// What the receiver's batching engine did (per stream).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receiver_batching: Option<BatchingSummary>,
}

/// What a batching engine (`sendmmsg`/`recvmmsg`, GSO, GRO) did on one
/// side of a UDP stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchingSummary {
    /// Most messages one `sendmmsg`/`recvmmsg` call carried.
    pub messages_per_call: u32,
    /// Datagrams per system call, as measured (datagrams ÷ calls; receive
    /// calls that timed out count).
    pub datagrams_per_call: f64,
    /// Sender: datagrams per GSO message; absent: GSO off.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gso_segments: Option<u32>,
    /// Receiver: `UDP_GRO` was on.
    pub gro: bool,
    /// Receiver: messages that held more than one datagram.
    pub gro_super_buffers: u64,
    /// Why GSO or GRO was off where the engine could have used it.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

/// The kernel's drop counters beside the counted loss, for one flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelView {
    /// Datagrams linerate counted as lost on this flow.
    pub counted_lost: u64,
    /// Receiving sockets' buffer overflows (SO_RXQ_OVFL), this flow's sockets.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socket_drops: Option<u64>,
    /// Sending side: /proc/net/snmp Udp SndbufErrors (send queue or qdisc full).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sender_sndbuf_errors: Option<u64>,
    /// Receiving side: /proc/net/snmp Udp RcvbufErrors and InErrors (whole namespace).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receiver_rcvbuf_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receiver_in_errors: Option<u64>,
    /// Sending interface tx_dropped and receiving interface rx_dropped.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sender_tx_dropped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub receiver_rx_dropped: Option<u64>,
    /// The counted loss compared with the kernel's counters, in words.
    pub explanation: String,
}

/// Totals of all streams flowing one way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSum {
    pub flow: Flow,
    pub streams: u32,
    pub sender_bytes: u64,
    pub receiver_bytes: u64,
    /// Longest sender measuring time, seconds.
    pub sender_seconds: f64,
    /// Longest receiver measuring time, seconds.
    pub receiver_seconds: f64,
    pub sender_bits_per_second: f64,
    /// The throughput figure to trust: what arrived.
    pub receiver_bits_per_second: f64,
    /// Retransmitted segments on the sending side (TCP_INFO).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    /// UDP tests: the flow's datagram totals.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpSummary>,
    /// UDP tests: the kernel's drop counters beside the counted loss.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel: Option<KernelView>,
    /// `--flows` tests: how evenly the flows of this direction shared the
    /// path (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fairness: Option<Fairness>,
}

/// An rr phase of more than one flow (a thread each with `-P N`, or
/// event loops with `--flows`), flow by flow: what each completed, and the
/// spread of the flows' own round-trip percentiles (the phase's `latency`
/// merges every transaction of every flow).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrPerFlow {
    /// The client's transactions per flow, in flow order.
    pub transactions: Vec<u64>,
    /// rr over UDP, when any flow lost requests: each flow's lost
    /// requests, in flow order (absent when none was lost).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub lost: Vec<u64>,
    /// Flows that completed no transaction.
    pub idle_flows: u32,
    /// Jain's index of the flows' transactions per second.
    pub jain_index: f64,
    /// Least, median and greatest of the flows' own p50 round trips, ns.
    /// On event loops (`coarse`) each flow's percentiles come from its
    /// coarse histogram (1 significant digit per flow): the top of a
    /// bucket 6.25% wide, so up to 6.25% above the flow's exact figure.
    pub p50_ns: Spread,
    /// Least, median and greatest of the flows' own p99 round trips, ns
    /// (as coarse as `p50_ns`).
    pub p99_ns: Spread,
    /// The flows' own percentiles are event loops' coarse ones (up to
    /// 6.25% high); absent: exact (a thread per flow).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coarse: bool,
}

/// Least, median and greatest of a figure over flows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// How evenly a direction's flows shared the path, from each flow's
/// received bit/s (`streams` holds every flow's bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    pub flows: u32,
    /// Flows that received no byte.
    pub idle_flows: u32,
    /// Jain's index: 1 when every flow got the same, 1/flows when one got
    /// everything.
    pub jain_index: f64,
    pub min_bits_per_second: f64,
    pub median_bits_per_second: f64,
    pub max_bits_per_second: f64,
}

/// CPU one side spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideCpu {
    /// `process` or `threads` (embedded server: only that side's threads).
    pub scope: String,
    pub user_s: f64,
    pub system_s: f64,
    pub wall_s: f64,
    /// (user + system) ÷ wall × 100: percent of one CPU.
    pub percent_of_cpu: f64,
    /// Whole host, all processes: busy ÷ total × 100 over the same time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host_cpus: Option<u32>,
    /// CPU microseconds per KiB this side sent or received.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub service_demand_us_per_kib: Option<f64>,
    /// The side's thread that used the most CPU over the test (`stream N
    /// sender|receiver`, `sampler`, or the thread's name) and its user +
    /// system time ÷ wall × 100: percent of one core. Near 100, that
    /// thread had a core to itself and was the limit.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busiest_thread: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busiest_thread_percent: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    pub client: SideCpu,
    pub server: SideCpu,
}

/// One stream in one interval as one side saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalStreamRecord {
    pub id: u32,
    pub flow: Flow,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// Segments the sender retransmitted in this interval: TCP_INFO's
    /// total at its end minus the total at the previous interval's end
    /// (sender only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    /// TCP_INFO at the end of the interval (sender only; its
    /// `retransmits` is the connection's total so far).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp: Option<TcpInfo>,
    /// UDP figures of the interval on this side.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpIntervalRecord>,
}

/// One UDP stream's (or flow's) interval: the counts of
/// `linerate_proto::measure::UdpInterval` plus the datagram rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpIntervalRecord {
    #[serde(flatten)]
    pub counts: UdpInterval,
    /// Datagrams per second (sent or read, by side).
    pub packets_per_second: f64,
}

/// Per-flow sum of an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSum {
    pub flow: Flow,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// Segments the flow's senders retransmitted in this interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retransmits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpIntervalRecord>,
}

/// `--json-lines` with `--flows`: one flow's figures in one interval (the
/// interval's own fields, then the flow's as in `streams[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowIntervalRecord {
    pub side: Side,
    pub start_s: f64,
    pub end_s: f64,
    pub omitted: bool,
    #[serde(flatten)]
    pub stream: IntervalStreamRecord,
}

/// One interval as measured by `side`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// The side whose clock and counters this is.
    pub side: Side,
    pub start_s: f64,
    pub end_s: f64,
    /// Inside the omitted warm-up (not in the summary).
    pub omitted: bool,
    pub streams: Vec<IntervalStreamRecord>,
    pub sums: Vec<IntervalSum>,
    /// `--iface DEV`: what the interface counted from the previous record
    /// (or the start) until this record was relayed (client only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iface: Option<Traffic>,
    /// The side's CPU during the interval (absent from a peer that does
    /// not measure it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu: Option<Box<IntervalCpuRecord>>,
}

/// One side's CPU over one interval, from its process's `/proc` counters
/// (clock ticks: about 1% of a core over 1 s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalCpuRecord {
    /// (user + system) ÷ wall × 100: percent of one core (the side's
    /// `cpu.*.scope`; above 100 with more than one busy thread).
    pub percent_of_cpu: f64,
    pub user_percent: f64,
    pub system_percent: f64,
    /// The thread that used the most CPU in the interval and its percent
    /// of one core: near 100, one core is the limit.
    pub busiest_thread: String,
    pub busiest_thread_percent: f64,
}

/// How transactions were timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum RrTiming {
    /// A clock read before each request and after each response.
    PerMessage,
    /// One clock-read pair per `batch` back-to-back transactions; each
    /// transaction is recorded as its batch's mean (the distribution is of
    /// batch means).
    Batch { batch: u32 },
}

/// One direction's one-way delay in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneWay {
    /// The distribution, ns; absent when not measured or when the clock
    /// offset's uncertainty is larger than the delay (see `unavailable`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<Summary>,
    /// Each figure is within ± this of the truth (the clock offset's bound;
    /// 0 on one host).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub uncertainty_ns: Option<u64>,
    /// Samples below zero (estimated offsets only), left out of `latency`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub negative: u64,
    /// Why there is no figure.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unavailable: Option<String>,
    /// The distribution behind `latency`, merged over flows: sparse
    /// `[value_ns, count]` buckets (absent when `latency` is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<(u64, u64)>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One phase: one request size (and response size), with or without load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrPhaseReport {
    pub request_size: u32,
    pub response_size: u32,
    /// True when the bulk load streams ran during this phase.
    pub loaded: bool,
    /// Transactions the client completed (all flows).
    pub transactions: u64,
    /// Transactions the server answered (all flows); equal to
    /// `transactions` for every completed TCP test (UDP: minus `lost`
    /// responses, at most).
    pub server_transactions: u64,
    /// UDP: requests whose response did not come within the response
    /// timeout (either datagram lost); not in `transactions` or `latency`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// UDP: responses that came after their request was counted `lost`
    /// (or came twice), dropped by the client.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late: u64,
    /// Longest flow's time from first request to last response, seconds.
    pub seconds: f64,
    /// Sum over flows of each flow's transactions ÷ its seconds
    /// (connections/s for crr).
    pub transactions_per_second: f64,
    /// Payload bytes: requests the client wrote and the server read,
    /// responses the server wrote and the client read.
    pub client_sent_bytes: u64,
    pub server_received_bytes: u64,
    pub server_sent_bytes: u64,
    pub client_received_bytes: u64,
    /// Round-trip time (crr: the whole connect-request-response-close), ns.
    pub latency: Summary,
    pub client_to_server: OneWay,
    pub server_to_client: OneWay,
    /// The round-trip histogram, merged over flows: sparse
    /// `[value_ns, count]` buckets (HdrHistogram, 3 significant digits).
    pub histogram: Vec<(u64, u64)>,
    /// Tests of more than one flow (`-P N`) or on event loops (`--flows`):
    /// each flow's transactions and how its round trips compare with the
    /// other flows' (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_flow: Option<RrPerFlow>,
    /// With busy polling, per flow (in flow order): waits that outlasted
    /// the spin budget and slept in `poll(2)`, on each side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_poll_sleeps: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_poll_sleeps: Option<Vec<u64>>,
    /// With busy polling: flows that set out to spin without yielding (a
    /// CPU each) and turned to yielding when their sleeps showed the CPU
    /// shared, on each side; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_spin_yielded: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_spin_yielded: Option<u32>,
    /// Errors of any flow in this phase, either side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// The bulk load that ran during the loaded phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub streams: u16,
    /// Bytes the client wrote and the server read.
    pub sender_bytes: u64,
    pub receiver_bytes: u64,
    /// Server's receiving time, seconds.
    pub seconds: f64,
    /// Receiver bytes × 8 ÷ seconds.
    pub bits_per_second: f64,
}

/// Results of a request/response (rr) or connect/request/response (crr) test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrReport {
    /// Parallel flows (`--flows`: the event-loop flows).
    pub flows: u32,
    pub limit: RrLimit,
    pub timing: RrTiming,
    /// Transactions per second per flow the client paced to (qualify's
    /// probes beside a load); absent: as fast as the round trips allow.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rate: Option<u32>,
    pub busy_poll: bool,
    /// With busy polling: what the kernel said to SO_BUSY_POLL on each side.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_poll_client: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_poll_server: Option<String>,
    /// What each side's engine used on the flows' sockets (absent for an
    /// engine with nothing to report).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine_use_client: Option<EngineUse>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine_use_server: Option<EngineUse>,
    /// With busy polling: how each side's flows spun (`dedicated`: without
    /// yielding, a CPU per spinning flow; `shared`: yielding, adaptive
    /// budget).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spin_client: Option<SpinMode>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spin_server: Option<SpinMode>,
    /// The clock offset used for one-way delays (rr).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub clock: Option<ClockOffset>,
    /// Phases in the order they ran: every size, then (under load) every
    /// size again.
    pub phases: Vec<RrPhaseReport>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub load: Option<LoadReport>,
    /// CPU µs per transaction on each side (all flows, whole test).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_cpu_us_per_transaction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_cpu_us_per_transaction: Option<f64>,
}

/// Everything one test produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub test: TestInfo,
    pub streams: Vec<StreamSummary>,
    pub sums: Vec<FlowSum>,
    pub cpu: CpuSummary,
    /// The client's interval records.
    pub intervals: Vec<IntervalRecord>,
    /// The server's interval records (sent to the client at the end).
    pub server_intervals: Vec<IntervalRecord>,
    /// UDP tests: each side's raw kernel counter changes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel_udp: Option<KernelSides>,
    /// Changes the server made to the request, and anything else a reader
    /// of the numbers should know.
    pub notes: Vec<String>,
    /// Request/response results (kinds `rr` and `crr`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr: Option<RrReport>,
    /// `--iface DEV`: the interface's counters over the test, compared
    /// with the payload the test moved.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iface: Option<IfaceReport>,
    /// The user stopped the test before its limit (Ctrl-C): the figures
    /// cover the time until then (absent when the test ran to its limit).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub interrupted: bool,
    /// Message tests (kind `msg`, `linerate msg HOST`): one cell per
    /// message size, as `linerate msg` reports them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub msg: Option<Vec<crate::msg::MsgCell>>,
}

/// An interface's counters over a whole test beside the test's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IfaceReport {
    /// Counter changes from the start of the data phase to the report.
    pub traffic: Traffic,
    /// Payload bytes this host sent (client → server flows, as written).
    pub payload_sent_bytes: u64,
    /// Payload bytes this host received (server → client flows, as read).
    pub payload_received_bytes: u64,
    /// The wire bytes held against the payload: tx + rx bytes, or tx bytes
    /// alone on loopback (where every packet is counted both ways).
    pub wire_bytes: u64,
    /// (wire − payload) ÷ payload × 100: headers, acknowledgements, the
    /// control connection and any other traffic on the interface.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub overhead_percent: Option<f64>,
    /// The comparison in words.
    pub explanation: String,
}

/// The kernel's UDP counters on both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSides {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client: Option<KernelUdp>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server: Option<KernelUdp>,
}

/// One line of `--json-lines`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Start(Box<TestInfo>),
    /// With `--flows`, its `streams` is empty: each flow's interval
    /// follows it as a [`Record::FlowInterval`].
    Interval(IntervalRecord),
    /// `--flows`: one flow's interval, a record of its own (a line of
    /// 10,000 flows would be megabytes), right after its interval's sums.
    FlowInterval(Box<FlowIntervalRecord>),
    /// rr/crr: one phase (message size) as it ended.
    RrPhase(Box<RrPhaseRecord>),
    Summary(Box<Report>),
}

/// rr/crr `--json-lines`: one phase's figures as the client measured them,
/// written as soon as the phase ended. The server's counts, and the
/// histograms, come in the summary's [`RrPhaseReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrPhaseRecord {
    /// The phase's index: every size in order, then (under load) again.
    pub phase: u32,
    pub request_size: u32,
    pub response_size: u32,
    pub loaded: bool,
    /// Transactions the client completed (all flows).
    pub transactions: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late: u64,
    pub seconds: f64,
    pub transactions_per_second: f64,
    /// Round-trip time, ns.
    pub latency: Summary,
    pub client_to_server: OneWay,
    pub server_to_client: OneWay,
    /// Errors of any of the client's flows in this phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// What a sweep ran: the same UDP test at every size × rate point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepInfo {
    pub protocol: String,
    pub server: String,
    pub direction: Direction,
    /// Streams per direction in each trial.
    pub streams: u16,
    /// Seconds of each trial.
    pub trial_s: f64,
    /// Datagram sizes, bytes (header included).
    pub sizes: Vec<u32>,
    /// The grid's requested rates per stream: datagrams/s, or bit/s when
    /// `rates_are_bits` is true.
    pub points: Vec<f64>,
    pub rates_are_bits: bool,
    /// Loss a zero-loss search accepts, percent (0: none).
    pub max_loss_percent: f64,
    pub client_software: String,
    pub start_unix_ms: u64,
}

/// One trial of a sweep (a whole UDP test, summed over its flows).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepTrial {
    pub len: u32,
    /// True for the trials of a zero-loss search (not part of the grid).
    pub search: bool,
    /// Requested, summed over the streams.
    pub requested_pps: f64,
    pub requested_bits_per_second: f64,
    pub sent_pps: f64,
    pub sent_bits_per_second: f64,
    pub received_pps: f64,
    pub received_bits_per_second: f64,
    pub issued: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_ppm: f64,
    pub loss_percent: f64,
    /// False when a sender could not keep up with the requested rate.
    pub kept_up: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socket_drops: Option<u64>,
    /// Set when the trial failed; its figures are then zero.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// Why its loss is the tester's own, not the path's (`qualify`: its
    /// sender stalled, or its receiving sockets overflowed, on every try):
    /// neither a pass nor the path's loss.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub inconclusive: Option<String>,
}

/// The highest rate found with loss at most the threshold, for one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZeroLoss {
    pub len: u32,
    pub max_loss_percent: f64,
    /// Requested rate (summed over streams) of the best passing trial;
    /// absent when even the lowest rate lost too much.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bits_per_second: Option<f64>,
    /// What arrived in that trial.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub received_pps: Option<f64>,
    /// Trials the search ran.
    pub trials: u32,
    /// How the search ended, in words.
    pub note: String,
}

/// Everything a sweep produced (`linerate sweep udp --json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub schema: u32,
    pub test: SweepInfo,
    pub trials: Vec<SweepTrial>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zero_loss: Vec<ZeroLoss>,
    pub notes: Vec<String>,
}
