//! What one side measured during a test.
//!
//! Each side fills a [`SideResults`] from its own clocks and counters and
//! sends it to the peer at the end, so both can report both ends. These types
//! are also embedded as-is in the report model (`linerate-report`), so their
//! field docs are part of the JSON schema.

use linerate_stats::histogram::Summary;
use serde::{Deserialize, Serialize};

use crate::side::Side;

/// Whether this side wrote or read on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Sender,
    Receiver,
}

/// The longest a side waits, once a TCP sender has shut down its write
/// side, for what it sent (its FIN included) to be acknowledged before it
/// reads the stream's end [`TcpInfo`]: the retransmit count is final only
/// then (issue 26). Well inside the grace a data phase gets past its
/// planned end before a side whose streams have not ended calls it
/// stalled ([`crate::session::STALL_GRACE`], 10 s).
pub const TCP_SETTLE_CAP: std::time::Duration = std::time::Duration::from_secs(5);

/// A side's view of the TCP connection, from `getsockopt(TCP_INFO)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// Round-trip time variation, microseconds.
    pub rttvar_us: u32,
    /// Congestion window, in segments.
    pub snd_cwnd: u32,
    /// Sender MSS in use, bytes.
    pub snd_mss: u32,
    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Pacing rate in bytes/s, when the kernel paces this socket (else absent).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pacing_rate: Option<u64>,
    /// Most recent delivery rate estimate in bytes/s (absent when unknown).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_rate: Option<u64>,
    /// The peer's advertised receive window, bytes (`tcpi_snd_wnd`, Linux
    /// ≥5.4; absent on older kernels). iperf3's `snd_wnd`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub snd_wnd: Option<u32>,
    /// Reordering events the sender saw (`tcpi_reord_seen`, Linux ≥4.19;
    /// absent on older kernels). iperf3's `reorder`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reord_seen: Option<u32>,
    /// A stream's end only: its data or FIN was still unacknowledged when
    /// this was read, [`TCP_SETTLE_CAP`] after its sender's shutdown, so
    /// retransmissions after that are not in `retransmits` (absent: the
    /// count is final, or this is an interval's reading).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub unacked_at_read: bool,
}

/// Totals of one data stream on one side.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StreamMeasurement {
    /// Stream id (from 1, in the order the client opened them).
    pub id: u32,
    /// Which side sends on this stream.
    pub sender: Option<Side>,
    /// Application payload bytes written (sender) or read (receiver) after
    /// the omitted warm-up (since Start without one). Like every count
    /// here, the warm-up is left out ([`crate::interval::leave_out_warmup`]).
    pub bytes: u64,
    /// Bytes moved during the omitted warm-up (not in `bytes`).
    pub omitted_bytes: u64,
    /// From Start to the last write (sender) or end of stream (receiver), ns.
    pub elapsed_ns: u64,
    /// Write or read calls made.
    pub calls: u64,
    /// TCP_INFO at the end of the stream, when this side could read it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp: Option<TcpInfo>,
    /// Set when the stream ended with an error instead of a clean end.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// UDP sender's figures (UDP sending streams only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_send: Option<UdpSend>,
    /// UDP receiver's figures (UDP receiving streams only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp_recv: Option<UdpRecv>,
    /// What an accelerated engine used on this stream (absent: the plain
    /// syscall engine, which uses nothing beyond one call per buffer).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine_use: Option<EngineUse>,
    /// `--busy-poll`: what the kernel said to `SO_BUSY_POLL` and
    /// `SO_PREFER_BUSY_POLL` on this stream's socket.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_poll: Option<String>,
    /// `--busy-poll`: waits that spun their whole budget and then slept in
    /// `poll(2)` (each costs a wake-up).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub poll_sleeps: Option<u64>,
}

/// What an accelerated engine (`uring`, `zerocopy`) actually used on one
/// stream, as counted while it ran: a feature it asked for but the kernel
/// did not give shows as off, with the reason in `notes`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EngineUse {
    /// The engine's name (`uring`, `zerocopy`).
    pub engine: String,
    /// I/O went through buffers registered with the kernel once
    /// (io_uring fixed buffers), not pinned per call.
    #[serde(default)]
    pub registered_buffers: bool,
    /// A kernel thread polled the submission queue (`IORING_SETUP_SQPOLL`).
    #[serde(default)]
    pub sqpoll: bool,
    /// Receives came from one multishot request into a provided buffer
    /// ring (`IORING_RECV_MULTISHOT`, `IORING_REGISTER_PBUF_RING`).
    #[serde(default)]
    pub multishot_recv: bool,
    /// Zero-copy sends (`IORING_OP_SEND_ZC` or `MSG_ZEROCOPY`), when used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub zerocopy: Option<ZeroCopyUse>,
    /// `zerocopy:sendfile`: TCP writes made with `sendfile(2)` from a
    /// memory file holding the stream's buffer (page-cache pages handed to
    /// the socket, no copy from user space).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sendfile: Option<CallsBytes>,
    /// `zerocopy:sendfile`: TCP reads made with `splice(2)` from the socket
    /// into a pipe drained into `/dev/null` (no byte reaches user space).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub splice_recv: Option<CallsBytes>,
    /// `xdp`: the AF_XDP socket this stream ran on, and what its rings
    /// and the kernel counted.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xdp: Option<XdpUse>,
    /// Why a feature is off where the engine could have used it.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

/// Zero-copy send completions on one stream: no send buffer was reused
/// before the kernel's completion for it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ZeroCopyUse {
    /// Sends made with zero copy requested.
    pub sends: u64,
    /// Of those, sends whose completion notification arrived.
    pub completed: u64,
    /// Of the completed, those the kernel reported it copied anyway
    /// (`IORING_NOTIF_USAGE_ZC_COPIED`, `SO_EE_CODE_ZEROCOPY_COPIED`):
    /// loopback and devices without scatter-gather always copy.
    pub copied: u64,
    /// Sends under the engine's zero-copy threshold (`uring`: 10 KiB),
    /// made without zero copy, which costs more than it saves there.
    #[serde(default)]
    pub under_threshold: u64,
}

/// One stream's AF_XDP socket (`--engine xdp`): where it was bound, how,
/// and what its rings and the kernel's `XDP_STATISTICS` counted. Each
/// flow of an interface sends on a queue of its own while the interface
/// has one left, else shares one (`flows`): the counts marked "this
/// flow's" are the stream's own; the others, and the statistics, are its
/// queue's socket's, for all its flows together (the kernel counts a drop
/// before any flow is known).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct XdpUse {
    /// The interface the route to the peer leaves by.
    pub iface: String,
    /// The interface queue of this flow's socket (it sends on it).
    pub queue: u32,
    /// Every queue of the interface this process had an AF_XDP socket on
    /// while the flow ran (its datagrams are read from whichever they
    /// arrive on); empty in reports from before there could be several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<u32>,
    /// The queues the interface has (`ethtool -l`; 1 where it cannot be
    /// read); 0 in reports from before it was read.
    #[serde(default)]
    pub iface_queues: u32,
    /// Where the XDP program runs: `native` or `generic`.
    pub mode: String,
    /// Whether frames are copied: `copy` or `zero-copy`.
    pub copy: String,
    /// Bound with `XDP_USE_NEED_WAKEUP`.
    pub need_wakeup: bool,
    /// How the flow waited for its datagrams: `spin` (polling the rings
    /// within the spin budget: rr and stream receivers by default,
    /// `--busy-poll`) or `poll` (asleep in `poll(2)` on the socket:
    /// `--xdp-sleep`); absent where it never waited to receive (a stream
    /// sender without `--busy-poll`) or in reports from before it was
    /// said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// UMEM bytes, and bytes per frame.
    pub umem_bytes: u64,
    pub frame_size: u32,
    /// Ring sizes (descriptors).
    pub fill_ring: u32,
    pub completion_ring: u32,
    pub rx_ring: u32,
    pub tx_ring: u32,
    /// The most flows of this process that sent on this flow's socket at
    /// once while it ran (0: not reported, from before it was).
    #[serde(default)]
    pub flows: u32,
    /// This flow's send calls that found the TX ring full.
    pub tx_ring_full: u64,
    /// This flow's send calls that found no free frame (completions
    /// lagging).
    pub tx_no_frame: u64,
    /// The socket's receive calls after which the fill ring was empty (the
    /// kernel had no frame to receive into).
    pub fill_starved: u64,
    /// Redirected frames that were not one whole UDP datagram (the
    /// socket's), and datagrams of no flow that this flow's reader took
    /// off the ring (not counted as received).
    pub rx_unparsed: u64,
    pub rx_foreign: u64,
    /// The socket's delivered datagrams whose UDP checksum did not match
    /// and was not an unfinished offload's (linerate's own datagram check
    /// still catches corruption of its payload).
    pub rx_bad_checksum: u64,
    /// The socket's delivered datagrams whose UDP checksum a sender left
    /// to an offload that nothing finished (veth passes a kernel sender's
    /// `CHECKSUM_PARTIAL` on): the pseudo-header's sum only, not
    /// corruption. 0 in reports from before it was told apart.
    #[serde(default)]
    pub rx_unfinished_checksum: u64,
    /// This flow's datagrams that reached the kernel socket instead
    /// (before the flow was redirected), received from it.
    pub via_kernel: u64,
    /// The socket's syscalls made to move a ring.
    pub wakeups: u64,
    /// The socket's `XDP_STATISTICS` (absent where the kernel gave none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stats: Option<XdpStatistics>,
    /// This flow's socket drops include the socket's own (`rx_dropped` +
    /// `rx_ring_full` since the flow joined it): one flow of a shared
    /// socket takes them, so a sum over the streams counts them once; the
    /// others' socket drops are their own only (their kernel socket's and
    /// their inbox's).
    #[serde(default)]
    pub socket_drops_claimed: bool,
}

impl XdpUse {
    /// Adds what another endpoint of the same side recorded (an rr flow's
    /// next phase, another flow): on the same interface, this flow's own
    /// counts add up, the queues are joined, and of the socket counts
    /// (cumulative) the largest reading stands. Another interface's is
    /// left out: the first interface stands for the side.
    pub fn merge(&mut self, o: &XdpUse) {
        if self.iface != o.iface {
            return;
        }
        for q in &o.queues {
            if !self.queues.contains(q) {
                self.queues.push(*q);
            }
        }
        self.queues.sort_unstable();
        self.iface_queues = self.iface_queues.max(o.iface_queues);
        self.flows = self.flows.max(o.flows);
        self.tx_ring_full += o.tx_ring_full;
        self.tx_no_frame += o.tx_no_frame;
        self.rx_foreign += o.rx_foreign;
        self.via_kernel += o.via_kernel;
        self.socket_drops_claimed |= o.socket_drops_claimed;
        if self.wait.is_none() {
            self.wait.clone_from(&o.wait);
        }
        self.fill_starved = self.fill_starved.max(o.fill_starved);
        self.rx_unparsed = self.rx_unparsed.max(o.rx_unparsed);
        self.rx_bad_checksum = self.rx_bad_checksum.max(o.rx_bad_checksum);
        self.rx_unfinished_checksum = self.rx_unfinished_checksum.max(o.rx_unfinished_checksum);
        self.wakeups = self.wakeups.max(o.wakeups);
        self.stats = match (self.stats, o.stats) {
            (Some(a), Some(b)) => Some(XdpStatistics {
                rx_dropped: a.rx_dropped.max(b.rx_dropped),
                rx_invalid_descs: a.rx_invalid_descs.max(b.rx_invalid_descs),
                tx_invalid_descs: a.tx_invalid_descs.max(b.tx_invalid_descs),
                rx_ring_full: a.rx_ring_full.max(b.rx_ring_full),
                fill_ring_empty: a.fill_ring_empty.max(b.fill_ring_empty),
                tx_ring_empty: a.tx_ring_empty.max(b.tx_ring_empty),
            }),
            (a, b) => a.or(b),
        };
    }
}

/// `getsockopt(XDP_STATISTICS)` of one AF_XDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub fill_ring_empty: u64,
    pub tx_ring_empty: u64,
}

/// System calls of one kind and the bytes they moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallsBytes {
    pub calls: u64,
    pub bytes: u64,
}

/// What a UDP sender measured on one stream.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpSend {
    /// Datagrams the kernel accepted (injected duplicates included).
    pub datagrams: u64,
    /// Sequence numbers issued: `0..issued` were sent or skipped on purpose.
    /// The receiver's loss is counted against this.
    pub issued: u64,
    /// With an omitted warm-up cut by the datagrams' send stamps
    /// (linerate's): numbers `0..omitted_numbers` were issued in it (sent
    /// before the first batch stamped at or past `omit`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_numbers: u64,
    /// Send calls that failed; the datagram was retried with the same number.
    pub send_errors: u64,
    /// Requested datagrams per second (absent: unpaced).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requested_pps: Option<f64>,
    /// Requested gap between datagrams, ns (absent: unpaced).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requested_gap_ns: Option<f64>,
    /// Datagrams sent back to back per pacing tick.
    pub burst: u32,
    /// Gaps between consecutive sends as achieved, ns.
    pub gaps: Summary,
    /// How many of those gaps were stalls (longer than
    /// [`crate::pacing::stall_gap_ns`]): the sender descheduled, each
    /// followed by a catch-up burst. `None`: the sender did not count them
    /// (an iperf3 peer, an older linerate).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stalls: Option<u64>,
    /// Datagrams that were due but not sent when the sender stopped.
    pub behind: u64,
    /// False when the sender could not keep up with the schedule (it ended
    /// more than one burst or 1 ms worth of datagrams behind).
    pub kept_up: bool,
    /// Datagrams of the schedule skipped after stalls: a sender that fell
    /// behind catches up at most `pacing::MAX_CATCH_UP_NS` at once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slipped: u64,
    /// From Start to the first and to the last send, ns.
    pub first_send_ns: u64,
    pub last_send_ns: u64,
    /// What a batching engine did (absent: one datagram per call).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub batching: Option<Batching>,
}

/// What a batching engine (`sendmmsg`/`recvmmsg`, GSO, GRO) actually did on
/// one UDP stream.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Batching {
    /// Most messages one `sendmmsg`/`recvmmsg` call carries.
    pub messages_per_call: u32,
    /// Sender: datagrams per GSO message (`UDP_SEGMENT`); absent: GSO off.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gso_segments: Option<u32>,
    /// Receiver: `UDP_GRO` was on.
    #[serde(default)]
    pub gro: bool,
    /// Receiver: messages that held more than one datagram (GRO super-buffers).
    #[serde(default)]
    pub gro_super_buffers: u64,
    /// Why GSO or GRO is off where the engine could have used it.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

/// What a UDP receiver measured on one stream (see `linerate_proto::seq`
/// for the definitions).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpRecv {
    /// Valid test datagrams read (duplicates and late ones included).
    pub datagrams: u64,
    /// Distinct sequence numbers that arrived before the drain deadline.
    pub received: u64,
    pub duplicates: u64,
    /// Arrived after a higher number.
    pub reordered: u64,
    pub max_reorder_distance: u64,
    /// Arrived after the drain deadline (not subtracted from the loss).
    pub late: u64,
    /// Arrived more than the tracker's window below the highest number (not
    /// counted as received).
    pub beyond_window: u64,
    /// Failed the length, header or payload check, or carried another
    /// stream's id.
    pub corrupt: u64,
    /// The first corruption seen, in words.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_corrupt: Option<String>,
    /// One past the highest sequence number seen.
    pub next_expected: u64,
    /// With an omitted warm-up: numbers `0..omitted_numbers` belong to it
    /// (the sender's cut by the datagrams' stamps; for iperf3's streams, up
    /// to the highest seen by this end's omit timer); `issued`, `received`
    /// and `lost` count only the numbers from it on.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub omitted_numbers: u64,
    /// Numbers the sender issued after the warm-up, from its SendDone
    /// (absent if it never came).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub issued: Option<u64>,
    /// issued − received, when `issued` is known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lost: Option<u64>,
    /// RFC 3550 interarrival jitter at the end, ns.
    pub jitter_ns: f64,
    /// Datagrams the kernel dropped because this socket's receive buffer
    /// was full (SO_RXQ_OVFL); absent where the kernel does not report it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socket_drops: Option<u64>,
    /// SO_RCVBUF in effect, bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rcvbuf: Option<u64>,
    /// From Start to the first and the last valid datagram, ns.
    pub first_recv_ns: u64,
    pub last_recv_ns: u64,
    /// iperf3 tests: the same stream counted by iperf3's rules (what an
    /// iperf3 peer is told).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iperf3: Option<Iperf3Counts>,
    /// What a batching engine did (absent: one datagram per call).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub batching: Option<Batching>,
    /// Receive coalescing: the waits of a fixed interval after a batch
    /// that emptied the socket (0: none, or the receiver did not coalesce).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub coalesce_waits: u64,
}

impl UdpRecv {
    /// Sets `issued` and `lost` from the sender's whole count `issued`
    /// (numbers `0..issued`; `None`: its SendDone never came), counting
    /// only the numbers after the warm-up.
    pub fn count_loss(&mut self, issued: Option<u64>) {
        self.issued = issued.map(|i| i.saturating_sub(self.omitted_numbers));
        self.lost = self.issued.map(|i| i.saturating_sub(self.received));
    }
}

/// One UDP stream's share of one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpInterval {
    /// Datagrams sent (sender) or valid datagrams read (receiver).
    pub datagrams: u64,
    /// Receiver only: distinct numbers that arrived.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub received: Option<u64>,
    /// Receiver only: change in the numbers missing below the highest seen.
    /// Negative when reordered datagrams fill gaps of an earlier interval;
    /// the test's total loss is exact, interval losses add up to it only
    /// once the last interval includes the tail.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lost: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reordered: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duplicates: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub late: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub corrupt: Option<u64>,
    /// RFC 3550 jitter at the end of the interval, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub jitter_ns: Option<f64>,
    /// SO_RXQ_OVFL drops during the interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socket_drops: Option<u64>,
}

/// The kernel's own UDP drop counters for one side, over the test.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelUdp {
    /// Change of the `Udp:` counters of /proc/net/snmp in this side's
    /// network namespace (every UDP socket there, not only linerate's).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub snmp: Option<UdpSnmp>,
    /// The interface carrying this side's data (by its local address) and
    /// the change of its drop counters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interface: Option<InterfaceDrops>,
    /// What could not be measured, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<String>,
}

/// Deltas of /proc/net/snmp `Udp:` counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UdpSnmp {
    pub in_datagrams: u64,
    pub out_datagrams: u64,
    pub no_ports: u64,
    pub in_errors: u64,
    /// Receive-buffer overflows (all sockets).
    pub rcvbuf_errors: u64,
    /// Sends the kernel dropped for lack of buffer or queue space (this
    /// includes a full qdisc queue when the socket does not ask for errors).
    pub sndbuf_errors: u64,
    pub in_csum_errors: u64,
}

/// Drop counters of one interface.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InterfaceDrops {
    pub name: String,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    /// The interface's driver as ethtool names it (`veth`, `ixgbe`, …),
    /// when known: loopback and veth never split a GSO run into packets.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub driver: Option<String>,
}

/// One stream's share of one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IntervalStream {
    pub id: u32,
    /// Bytes moved on this side during the interval.
    pub bytes: u64,
    /// TCP_INFO sampled at the end of the interval (sending side only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp: Option<TcpInfo>,
    /// UDP figures of the interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpInterval>,
}

/// One interval of one side.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IntervalMeasurement {
    /// Interval start, ns since Start.
    pub start_ns: u64,
    /// Interval end, ns since Start.
    pub end_ns: u64,
    /// True when the interval lies in the omitted warm-up.
    pub omitted: bool,
    pub streams: Vec<IntervalStream>,
    /// This side's CPU during the interval (absent from peers that do not
    /// measure it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu: Option<IntervalCpu>,
}

/// One side's CPU over one interval, from the process's own `/proc`
/// counters (`/proc/self/stat`, `/proc/self/task/*/stat`: clock ticks,
/// usually 10 ms, so a 1 s interval is good to about 1% of a core).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IntervalCpu {
    /// Wall time between the two readings, ns.
    pub wall_ns: u64,
    /// User and kernel CPU time of the side in that time (the scope of the
    /// side's [`CpuMeasurement`]), ns.
    pub user_ns: u64,
    pub system_ns: u64,
    /// The thread that used the most CPU in the interval (`stream 1
    /// sender`, `sampler`, or the thread's name), and its user + kernel
    /// time, ns: near `wall_ns` means that thread had a core to itself
    /// and was the limit.
    pub busiest_thread: String,
    pub busiest_thread_ns: u64,
}

/// CPU time a side spent during the test, and the host's.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuMeasurement {
    /// What `user_ns`/`system_ns` cover: `process` (the whole linerate
    /// process) or `threads` (only this side's threads, when client and
    /// server share one process).
    pub scope: String,
    /// User-mode CPU time, ns.
    pub user_ns: u64,
    /// Kernel-mode CPU time, ns.
    pub system_ns: u64,
    /// Wall time the CPU figures cover, ns.
    pub wall_ns: u64,
    /// Whole-host CPU over the same wall time, from /proc/stat.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host: Option<HostCpu>,
    /// The side's thread that used the most CPU over the test, and its user
    /// + kernel time, ns (absent where not measured).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busiest_thread: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busiest_thread_ns: Option<u64>,
}

/// Whole-host CPU accounting (all processes), from /proc/stat deltas.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostCpu {
    /// Online CPUs.
    pub cpus: u32,
    /// Non-idle CPU time across all CPUs, ns.
    pub busy_ns: u64,
    /// All CPU time across all CPUs (busy + idle + iowait), ns.
    pub total_ns: u64,
}

/// A one-way delay distribution, computed by the client from the server's
/// timestamps and the clock offset (see [`crate::clock`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OneWayMeasurement {
    /// Sparse `(value_ns, count)` histogram buckets of the non-negative samples.
    pub histogram: Vec<(u64, u64)>,
    /// Samples that came out below zero (possible only when the offset is
    /// estimated: the error of the estimate exceeded the delay).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub negative: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One flow during one phase (size × load) of a request/response test.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RrFlowMeasurement {
    /// Phase index ([`crate::spec::RrSpec::phases`]).
    pub phase: u32,
    /// Flow, from 0.
    pub flow: u32,
    /// Transactions completed: responses read (client) or written (server).
    pub transactions: u64,
    /// Payload bytes this side wrote (requests or responses).
    pub bytes_sent: u64,
    /// Payload bytes this side read.
    pub bytes_received: u64,
    /// From the phase's first request (or first arrival) to its last
    /// response, ns.
    pub elapsed_ns: u64,
    /// UDP, client: requests whose response never came (within the
    /// response timeout); not in `transactions` or the histograms.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// UDP, client: responses that came after their request was counted
    /// lost (or twice), dropped ([`crate::rr_flow::Response::Late`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late: u64,
    /// Client only: round-trip histogram, sparse `(value_ns, count)` buckets.
    /// In batch mode each transaction is recorded as its batch's mean. An
    /// event-loop flow's (`--flows`) is coarse (within 6.25%:
    /// `Histogram::coarse`) to keep thousands of flows small; its loop's
    /// full-precision one is in [`Self::loop_rtt`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rtt: Vec<(u64, u64)>,
    /// Event-loop client only, on the first flow of each loop: every round
    /// trip of the loop's flows at full precision (the same buckets as
    /// `rtt`'s); a phase's percentiles merge these when present.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loop_rtt: Vec<(u64, u64)>,
    /// Client only, where timestamps and a clock offset allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_to_server: Option<OneWayMeasurement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_to_client: Option<OneWayMeasurement>,
    /// Busy poll only: waits on this flow's socket that spun their whole
    /// budget and then slept in `poll(2)` (each costs a wake-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_sleeps: Option<u64>,
    /// Busy poll only: `true` when this flow set out to spin without
    /// yielding (a CPU of its own) and its sleeps showed the CPU shared, so
    /// it yielded from then on; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_yielded: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One side's request/response measurements.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RrMeasurement {
    /// Every (phase, flow) this side ran, in phase order.
    pub flows: Vec<RrFlowMeasurement>,
    /// The bulk load streams (client: sent; server: received), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load: Vec<StreamMeasurement>,
    /// Nanoseconds the load ran on this side (from its start to its end).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub load_elapsed_ns: u64,
    /// With busy polling: what the kernel said to `SO_BUSY_POLL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll: Option<String>,
    /// What this side's engine used on the flows' sockets (registered
    /// buffers, multishot receive, zero-copy sends), merged over the flows;
    /// absent for an engine with nothing to report (syscall, batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_use: Option<EngineUse>,
    /// With busy polling: whether this side's flows spun without
    /// yielding (a CPU each) or yielded to a peer that may share theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin: Option<SpinMode>,
    /// Client: the clock offset to the server its one-way figures used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::clock::ClockOffset>,
}

/// How a side's event loops (`--flows`) waited for their flows:
/// readiness (epoll) or completions (io_uring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopKind {
    Epoll,
    IoUring,
    /// A kind a newer peer named that this version does not know: its
    /// results still parse (a closed set in the wire's `Results` would
    /// fail the whole test).
    #[serde(other)]
    Other,
}

impl LoopKind {
    /// As reports and thread labels name it (and JSON spells it).
    pub fn name(self) -> &'static str {
        match self {
            LoopKind::Epoll => "epoll",
            LoopKind::IoUring => "io_uring",
            LoopKind::Other => "other",
        }
    }
}

/// Everything one side reports at the end of a test.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SideResults {
    /// Name of the data-path engine this side used.
    pub engine: String,
    /// `--flows`: what this side's event loops waited with, as they ran
    /// (absent without flows, and from peers that never said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_loop: Option<LoopKind>,
    pub streams: Vec<StreamMeasurement>,
    pub intervals: Vec<IntervalMeasurement>,
    /// True when `intervals` was emptied because it would not fit in one
    /// Results frame (very long tests with many streams); totals are intact.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intervals_dropped: bool,
    pub cpu: CpuMeasurement,
    /// Request/response tests only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrMeasurement>,
    /// UDP tests: the kernel's drop counters on this side.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel_udp: Option<KernelUdp>,
    /// `LD_PRELOAD` of this side's process, when set: a kernel-bypass
    /// library there changes what the figures measure (absent from older
    /// peers, which never said).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ld_preload: Option<String>,
    /// Message tests (kind `msg`): this side's view of the messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<MsgMeasurement>,
}

/// A message test's measurements of one side: the sender's timing (client)
/// or the receiver's totals (server), per size in plan order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgMeasurement {
    /// Why this side's messages stopped before the plan's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<MsgSizeSent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received: Vec<MsgSizeReceived>,
}

/// The sender's figures for one size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgSizeSent {
    /// Everything sent, calibration and warm-up included.
    pub messages: u64,
    pub bytes: u64,
    /// Messages per clock pair, and the calibration's median time (ns).
    pub batch: u64,
    pub calibration_ns: u64,
    pub trials: Vec<MsgTrial>,
}

/// One trial, all connections together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgTrial {
    pub wall_ns: u64,
    pub messages: u64,
    pub bytes: u64,
    pub sender_cpu_ns: u64,
    /// Per-message times, ns: sparse HDR buckets (value, count).
    pub histogram: Vec<(u64, u64)>,
}

/// The receiver's totals for one size, all connections together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgSizeReceived {
    pub messages: u64,
    pub bytes: u64,
    pub corrupt: u64,
    pub cpu_ns: u64,
}

/// Whether a spinning flow has a CPU of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpinMode {
    /// The flow may share its CPU with its peer (or another spinner):
    /// spinning keeps the peer from answering, so the budget adapts and the
    /// spinner yields at each check point.
    Shared,
    /// Every spinning flow of both sides can have its own CPU: spin the
    /// whole budget every time, without yielding.
    Dedicated,
}

/// iperf3's counters of one receiving stream.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Iperf3Counts {
    /// Highest sequence number seen (what iperf3 reports as `packets`).
    pub max_seq: u64,
    /// iperf3's loss estimate (`errors`).
    pub lost: i64,
    pub out_of_order: u64,
    /// Seconds.
    pub jitter: f64,
    /// Bytes counted since the start (or the omit period's end).
    pub bytes: u64,
    /// Datagrams counted since the start (or the omit period's end).
    pub datagrams: u64,
    /// At the omit period's end: highest number, loss, out-of-order.
    pub omitted_packets: u64,
    pub omitted_errors: i64,
    pub omitted_out_of_order: u64,
}

#[cfg(test)]
mod tests {

    /// A loop kind this version does not know parses (review, issue 26:
    /// a newer peer's results would otherwise fail the test).
    #[test]
    fn issue_26_an_unknown_loop_kind_parses() {
        let k: LoopKind = serde_json::from_str("\"kqueue\"").expect("parses");
        assert_eq!(k, LoopKind::Other);
        let k: LoopKind = serde_json::from_str("\"io_uring\"").expect("parses");
        assert_eq!(k, LoopKind::IoUring);
    }
    #[test]
    fn issue_25_xdp_use_merges_a_sockets_readings_and_adds_each_flows_own() {
        let stats = |d| {
            Some(XdpStatistics {
                rx_dropped: d,
                ..XdpStatistics::default()
            })
        };
        let phase = |n: u64, flows| XdpUse {
            iface: "va".into(),
            flows,
            tx_ring_full: 1,
            via_kernel: n,
            wakeups: 10 * n,
            stats: stats(n),
            ..XdpUse::default()
        };
        // An rr flow's phases, one endpoint each, on one socket.
        let mut a = phase(1, 1);
        a.merge(&phase(3, 2));
        assert_eq!((a.flows, a.tx_ring_full, a.via_kernel), (2, 2, 4));
        assert_eq!((a.wakeups, a.stats), (30, stats(3)));
        // Another queue of the same interface (an rr flow on a socket of
        // its own): the queues are joined, its own counts added.
        a.queues = vec![0];
        a.merge(&XdpUse {
            queue: 1,
            queues: vec![1, 0],
            iface_queues: 2,
            ..phase(1, 1)
        });
        assert_eq!((a.queues.clone(), a.iface_queues), (vec![0, 1], 2));
        assert_eq!(a.tx_ring_full, 3);
        // Another interface's socket is not mixed in.
        let other = XdpUse {
            iface: "vb".into(),
            ..phase(9, 5)
        };
        let before = a.clone();
        a.merge(&other);
        assert_eq!(a, before);
    }

    use super::*;

    /// Reports written before `zerocopy:sendfile` lack its counts and still
    /// parse; new ones carry them only where used.
    #[test]
    fn issue_8_engine_use_without_sendfile_counts_still_parses() {
        let old = r#"{"engine":"zerocopy","zerocopy":{"sends":3,"completed":3,"copied":3}}"#;
        let u: EngineUse = serde_json::from_str(old).expect("old engine_use");
        assert_eq!(u.sendfile, None);
        assert_eq!(u.splice_recv, None);
        let v = serde_json::to_value(&u).expect("json");
        assert!(
            v.get("sendfile").is_none() && v.get("splice_recv").is_none(),
            "{v}"
        );
        let new = EngineUse {
            engine: "zerocopy:sendfile".into(),
            sendfile: Some(CallsBytes { calls: 2, bytes: 9 }),
            splice_recv: Some(CallsBytes { calls: 5, bytes: 9 }),
            ..EngineUse::default()
        };
        let back: EngineUse =
            serde_json::from_str(&serde_json::to_string(&new).expect("json")).expect("parse");
        assert_eq!(back, new);
    }
}
