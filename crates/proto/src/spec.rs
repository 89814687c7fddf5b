//! The test spec both sides agree on, and the stream plan both derive from
//! it. The client proposes a [`TestSpec`]; the server checks it with
//! [`crate::negotiate::negotiate`].

use serde::{Deserialize, Serialize};

use crate::side::Side;

/// Transport of the data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    #[default]
    Tcp,
    /// Paced datagrams with 64-bit sequence numbers ([`UdpSpec`]).
    Udp,
}

impl Protocol {
    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    /// The protocol of a [`Protocol::name`] (a report keeps it by name).
    pub fn named(name: &str) -> Option<Protocol> {
        [Protocol::Tcp, Protocol::Udp]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// Who sends: the client (netperf STREAM), the server (MAERTS) or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Forward,
    Reverse,
    Bidir,
}

/// When the senders stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Measured time after the omitted warm-up, in milliseconds.
    TimeMs(u64),
    /// Bytes each sending direction moves in total, across its streams.
    Bytes(u64),
    /// Datagrams (sequence numbers) each sending direction issues in total,
    /// across its streams (UDP only).
    Datagrams(u64),
}

impl Default for Limit {
    fn default() -> Self {
        Limit::TimeMs(10_000)
    }
}

/// TCP socket options requested for the data connections.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TcpOptions {
    /// SO_SNDBUF/SO_RCVBUF in bytes (the kernel doubles and caps it).
    pub window: Option<u32>,
    /// Congestion control algorithm name (TCP_CONGESTION).
    pub congestion: Option<String>,
    /// TCP_NODELAY on data connections.
    pub no_delay: bool,
    /// TCP_MAXSEG.
    pub mss: Option<u32>,
    /// Bits per second of payload each sending stream is paced to by the
    /// kernel (`SO_MAX_PACING_RATE`); `None`: as fast as it can. Absent from
    /// older peers' specs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u64>,
    /// Receivers on both sides consume stream data with `MSG_TRUNC`
    /// instead of copying it to user space (`--skip-rx-copy`: for receivers
    /// that need not look at the bytes). Absent from older peers' specs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_rx_copy: bool,
    /// `--transport unix`: the data connections are Unix stream sockets to
    /// the server's abstract address for the test ([`crate::wire::unix_data_name`]), so
    /// client and server must share a host and network namespace. Stream
    /// tests only; none of the TCP options apply. Absent from older peers'
    /// specs (a server that ignores it answers an Accept without it, which
    /// the client refuses as a changed spec).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unix: bool,
    /// `crr --linger0`: the client's connections carry `SO_LINGER` 0, so
    /// each ends with a reset instead of a FIN: neither host keeps it in
    /// TIME_WAIT (which holds its port pair for a minute). Client only;
    /// absent from older peers' specs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linger0: bool,
}

/// What a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Bulk throughput on streams (netperf TCP_STREAM / TCP_MAERTS).
    #[default]
    Stream,
    /// Request/response round trips on long-lived connections (TCP_RR).
    Rr,
    /// A new connection per transaction: connect, request, response,
    /// close (TCP_CRR).
    Crr,
    /// Whole messages, each acknowledged by the receiver (`linerate msg
    /// HOST`): parameters in [`TestSpec::msg`], one data connection per
    /// concurrent transfer, the client sends.
    Msg,
}

impl TestKind {
    /// The name used in reports (its serde name).
    pub fn name(self) -> &'static str {
        match self {
            TestKind::Stream => "stream",
            TestKind::Rr => "rr",
            TestKind::Crr => "crr",
            TestKind::Msg => "msg",
        }
    }
}

/// The message test's plan (kind `msg`): both ends walk it in step, so the
/// data connections need no framing (see `linerate_local::msg`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgSpec {
    /// Message sizes in bytes, in the order they run.
    pub sizes: Vec<u32>,
    /// Timed messages per trial and connection, per size.
    pub messages: Vec<u64>,
    pub trials: u32,
    /// The receiver checks every byte (after acknowledging).
    pub verify: bool,
}

/// The largest message a server takes (a receive buffer this size per
/// connection; `--max-test-memory` bounds them together).
pub const MAX_MSG_SIZE: u32 = 64 << 20;
/// Trials and timed messages per trial a server takes.
pub const MAX_MSG_TRIALS: u32 = 1000;
pub const MAX_MSG_MESSAGES: u64 = 1_000_000;

/// The message sizes of the reference tables (a TCP offload core's
/// door-to-door latency per payload size), used when no size is given.
pub const DEFAULT_RR_SIZES: [u32; 8] = [1, 32, 64, 160, 448, 960, 1216, 1456];

/// How long each size of a request/response test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RrLimit {
    /// Milliseconds per size (and per load condition).
    TimeMs(u64),
    /// Transactions per flow per size (and per load condition).
    Count(u64),
}

/// The request/response part of a spec (kinds `rr` and `crr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrSpec {
    /// Request sizes in bytes, run one after the other.
    pub sizes: Vec<u32>,
    /// Response size in bytes; `None`: the same as each request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_size: Option<u32>,
    pub limit: RrLimit,
    /// Transactions timed per clock-read pair (1: every transaction).
    pub batch: u32,
    /// Non-blocking sockets polled in a spin loop, plus SO_BUSY_POLL.
    pub busy_poll: bool,
    /// Bulk TCP streams (client → server) run during a second, loaded pass
    /// over the sizes; 0: no loaded pass.
    pub under_load: u16,
    /// Transactions per second per flow, at most (`rr --rate`; qualify's
    /// probes beside a load, so they do not perturb what they measure):
    /// 1..=[`MAX_RR_RATE`], thread-per-flow rr only. Absent: as fast as
    /// the round trips allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
}

impl Default for RrSpec {
    fn default() -> Self {
        RrSpec {
            sizes: DEFAULT_RR_SIZES.to_vec(),
            response_size: None,
            limit: RrLimit::TimeMs(1000),
            batch: 1,
            busy_poll: false,
            under_load: 0,
            rate: None,
        }
    }
}

/// How a UDP sender paces its datagrams, per stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pace {
    /// As fast as the sender can.
    Unlimited,
    /// Bits per second of UDP payload (the datagram's `len` bytes).
    Rate(u64),
    /// Datagrams per 1000 s (so 0.05 datagram/s is 50).
    MilliPps(u64),
}

/// UDP test parameters (used when `protocol` is `udp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpSpec {
    /// Pacing of each sending stream.
    pub pace: Pace,
    /// Datagrams sent back to back per pacing tick.
    pub burst: u32,
    /// Fill the payload with a pattern of the sequence number and check
    /// every byte on receipt.
    pub verify: bool,
    /// SO_SNDBUF/SO_RCVBUF for the data sockets, bytes (forced above the
    /// sysctl limits where the process may).
    pub window: Option<u32>,
    /// Nice value for the receiving threads (e.g. -20).
    pub priority: Option<i32>,
    /// How long receivers keep reading after the peer's senders finished,
    /// at least (the I/O layer may extend it to cover the path's RTT).
    pub drain_ms: u64,
    /// Test-only: faults the senders inject (skip, duplicate, swap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::datagram::Fault>,
}

/// Default drain period after the senders finish.
pub const DEFAULT_DRAIN_MS: u64 = 250;

impl Default for UdpSpec {
    fn default() -> Self {
        UdpSpec {
            pace: Pace::Rate(1_000_000),
            burst: 1,
            verify: false,
            window: None,
            priority: None,
            drain_ms: DEFAULT_DRAIN_MS,
            faults: Vec::new(),
        }
    }
}

/// One pass of a request/response test: one size, with or without load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrPhase {
    /// Position in [`RrSpec::phases`], from 0.
    pub index: u32,
    pub request: u32,
    pub response: u32,
    /// True while the bulk load streams run.
    pub loaded: bool,
}

impl RrSpec {
    /// The passes in the order they run: every size unloaded, then (with
    /// `under_load`) every size again with the load running.
    pub fn phases(&self) -> Vec<RrPhase> {
        let passes: &[bool] = if self.under_load > 0 {
            &[false, true]
        } else {
            &[false]
        };
        let mut out = Vec::new();
        for &loaded in passes {
            for &request in &self.sizes {
                out.push(RrPhase {
                    index: out.len() as u32,
                    request,
                    response: self.response_size.unwrap_or(request),
                    loaded,
                });
            }
        }
        out
    }

    /// True when every transaction is timed on its own (not in batches).
    pub fn per_message(&self) -> bool {
        self.batch <= 1
    }
}

/// What a data connection of a request/response test carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RrConn {
    /// Flow `flow` (from 0) during phase `phase`.
    Flow { phase: u32, flow: u32 },
    /// Bulk load stream `index` (from 0).
    Load { index: u32 },
}

impl UdpSpec {
    /// Datagrams per 1000 s per stream for `len`-byte datagrams (`None`:
    /// unpaced).
    pub fn millipps(&self, len: u32) -> Option<u64> {
        match self.pace {
            Pace::Unlimited => None,
            Pace::Rate(bps) => Some(crate::pacing::millipps_for_rate(bps, len)),
            Pace::MilliPps(m) => Some(m),
        }
    }
}

/// Everything both sides must agree on to run one test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Absent from older peers' specs: a stream test.
    #[serde(default)]
    pub kind: TestKind,
    pub protocol: Protocol,
    pub direction: Direction,
    /// Streams per sending direction (bidir opens twice as many connections).
    pub streams: u16,
    pub limit: Limit,
    /// Bytes per write/read call.
    pub len: u32,
    /// Warm-up not counted in the summary, in milliseconds.
    pub omit_ms: u64,
    /// Interval between interval records, in milliseconds.
    pub interval_ms: u64,
    pub tcp: TcpOptions,
    /// Request/response parameters (kinds `rr` and `crr` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrSpec>,
    /// UDP parameters; present exactly when `protocol` is `udp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSpec>,
    /// Stream tests: both sides' data sockets are non-blocking and spin on
    /// `EAGAIN` within a budget, plus `SO_BUSY_POLL` (request/response
    /// tests carry theirs in [`RrSpec::busy_poll`]). Absent from older
    /// peers' specs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy_poll: bool,
    /// Message test parameters (kind `msg` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<MsgSpec>,
    /// `--flows N --threads T`: `count` flows per sending direction (in
    /// place of `streams`) on event loops, `threads` of them on the
    /// client; the server runs them on its own thread budget. Absent from
    /// older peers' specs (a server that drops it answers an Accept without
    /// it, which the client refuses as a changed spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Flows>,
}

/// Many flows on a few event-loop threads per side (`--flows`/`--threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flows {
    /// Flows per sending direction.
    pub count: u32,
    /// The client's event-loop threads.
    pub threads: u16,
}

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            protocol: Protocol::Tcp,
            direction: Direction::Forward,
            streams: 1,
            limit: Limit::default(),
            len: 128 * 1024,
            omit_ms: 0,
            interval_ms: 1000,
            tcp: TcpOptions::default(),
            kind: TestKind::Stream,
            rr: None,
            udp: None,
            busy_poll: false,
            msg: None,
            flows: None,
        }
    }
}

/// One data connection of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPlan {
    /// Index in the plan, also the stream id shown to users (from 1).
    pub id: u32,
    pub sender: Side,
    /// Bytes this stream sends when the test is byte-limited.
    pub bytes: Option<u64>,
    /// Datagrams this stream sends when the test is datagram-limited.
    pub datagrams: Option<u64>,
    /// A bulk load stream beside request/response flows (`--under-load`):
    /// a TCP connection whatever the test's protocol (rr over UDP's flows
    /// are datagrams, its load streams are not).
    pub load: bool,
}

impl TestSpec {
    /// Streams (or flows) per sending direction: `flows.count` when the
    /// test runs on event loops, else `streams` (at least 1).
    pub fn per_direction(&self) -> u32 {
        match self.flows {
            Some(f) => f.count.max(1),
            None => u32::from(self.streams.max(1)),
        }
    }
}

/// Most request/response data connections one test may open (phases ×
/// flows + load streams), so a spec cannot ask for unbounded sockets.
pub const MAX_RR_CONNECTIONS: usize = 4096;
/// Most sizes one request/response test may list.
pub const MAX_RR_SIZES: usize = 64;
/// Largest `batch`.
pub const MAX_RR_BATCH: u32 = 1_000_000;
/// Highest paced request/response rate per flow: a transaction a
/// microsecond, the pacing gap's resolution (a faster one would round to
/// no gap at all: unpaced).
pub const MAX_RR_RATE: u32 = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::ServerLimits;
    use crate::negotiate::{negotiate, MAX_DRAIN_MS};
    use proptest::prelude::*;

    /// A kind's report name is its serde (wire) name.
    #[test]
    fn kind_names_are_their_wire_names() {
        for k in [TestKind::Stream, TestKind::Rr, TestKind::Crr, TestKind::Msg] {
            assert_eq!(serde_json::to_value(k).expect("serialises"), k.name());
        }
        for p in [Protocol::Tcp, Protocol::Udp] {
            assert_eq!(Protocol::named(p.name()), Some(p));
        }
    }

    #[test]
    fn plan_orders_client_senders_first_and_numbers_from_one() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            streams: 2,
            ..TestSpec::default()
        };
        let plan = spec.stream_plan();
        let got: Vec<_> = plan.iter().map(|p| (p.id, p.sender)).collect();
        assert_eq!(
            got,
            vec![
                (1, Side::Client),
                (2, Side::Client),
                (3, Side::Server),
                (4, Side::Server)
            ]
        );
        assert_eq!(spec.connection_count(), 4);
    }

    #[test]
    fn refusals_name_the_field() {
        let l = ServerLimits::default();
        let bad = |f: fn(&mut TestSpec)| {
            let mut s = TestSpec::default();
            f(&mut s);
            negotiate(&s, &l).expect_err("should refuse").field
        };
        assert_eq!(bad(|s| s.streams = 0), "streams");
        assert_eq!(bad(|s| s.streams = 129), "streams");
        assert_eq!(bad(|s| s.len = 0), "len");
        assert_eq!(bad(|s| s.limit = Limit::TimeMs(0)), "time");
        assert_eq!(bad(|s| s.limit = Limit::Bytes(0)), "bytes");
        assert_eq!(bad(|s| s.interval_ms = 1), "interval");
        assert_eq!(bad(|s| s.tcp.mss = Some(10)), "mss");
        assert_eq!(
            bad(|s| s.tcp.congestion = Some("../etc".into())),
            "congestion"
        );
    }

    #[test]
    fn udp_refusals_name_the_field() {
        let l = ServerLimits::default();
        let udp = |f: fn(&mut TestSpec)| {
            let mut s = TestSpec {
                protocol: Protocol::Udp,
                len: 1472,
                udp: Some(UdpSpec::default()),
                ..TestSpec::default()
            };
            f(&mut s);
            negotiate(&s, &l).map(|_| ()).map_err(|e| e.field)
        };
        fn u(s: &mut TestSpec) -> &mut UdpSpec {
            s.udp.as_mut().expect("udp")
        }
        assert_eq!(udp(|_| {}), Ok(()));
        assert_eq!(udp(|s| s.len = 27), Err("len"));
        assert_eq!(udp(|s| s.len = 65508), Err("len"));
        assert_eq!(udp(|s| s.len = 65507), Ok(()));
        assert_eq!(udp(|s| s.udp = None), Err("udp"));
        assert_eq!(udp(|s| s.limit = Limit::Bytes(10)), Err("bytes"));
        assert_eq!(udp(|s| s.limit = Limit::Datagrams(0)), Err("count"));
        assert_eq!(udp(|s| u(s).pace = Pace::Rate(0)), Err("rate"));
        assert_eq!(udp(|s| u(s).pace = Pace::MilliPps(0)), Err("pps"));
        assert_eq!(udp(|s| u(s).burst = 0), Err("burst"));
        assert_eq!(udp(|s| u(s).drain_ms = MAX_DRAIN_MS + 1), Err("drain"));
        assert_eq!(udp(|s| u(s).priority = Some(-21)), Err("priority"));
        assert_eq!(
            udp(|s| u(s).faults = crate::datagram::parse_faults("swap:1")
                .expect("ok")
                .into_iter()
                .chain(crate::datagram::parse_faults("skip:2").expect("ok"))
                .collect()),
            Err("faults")
        );
        // TCP tests take neither UDP parameters nor a datagram count.
        let mut t = TestSpec {
            limit: Limit::Datagrams(5),
            ..TestSpec::default()
        };
        assert_eq!(negotiate(&t, &l).map_err(|e| e.field).err(), Some("count"));
        t.limit = Limit::default();
        t.udp = Some(UdpSpec::default());
        assert_eq!(negotiate(&t, &l).map_err(|e| e.field).err(), Some("udp"));
    }

    #[test]
    fn datagram_limits_split_and_bound_the_data_phase() {
        let s = TestSpec {
            protocol: Protocol::Udp,
            streams: 3,
            len: 1000,
            limit: Limit::Datagrams(10),
            udp: Some(UdpSpec {
                pace: Pace::MilliPps(1_000_000),
                ..UdpSpec::default()
            }),
            ..TestSpec::default()
        };
        let got: Vec<_> = s.stream_plan().iter().map(|p| p.datagrams).collect();
        assert_eq!(got, vec![Some(4), Some(3), Some(3)]);
        // 4 datagrams at 1000/s plus the drain.
        assert_eq!(s.data_phase_ms(), Some(4 + DEFAULT_DRAIN_MS));
    }

    #[test]
    fn window_is_clamped_with_a_note() {
        let l = ServerLimits {
            max_window: 1 << 20,
            ..ServerLimits::default()
        };
        let mut s = TestSpec::default();
        s.tcp.window = Some(8 << 20);
        let n = negotiate(&s, &l).expect("accepted");
        assert_eq!(n.spec.tcp.window, Some(1 << 20));
        assert_eq!(n.notes.len(), 1);
    }

    fn rr_spec(kind: TestKind, streams: u16, rr: RrSpec) -> TestSpec {
        TestSpec {
            kind,
            streams,
            rr: Some(rr),
            ..TestSpec::default()
        }
    }

    #[test]
    fn rr_phases_run_every_size_then_again_under_load() {
        let rr = RrSpec {
            sizes: vec![1, 64],
            response_size: Some(8),
            under_load: 2,
            ..RrSpec::default()
        };
        let p: Vec<_> = rr
            .phases()
            .iter()
            .map(|p| (p.index, p.request, p.response, p.loaded))
            .collect();
        assert_eq!(
            p,
            vec![
                (0, 1, 8, false),
                (1, 64, 8, false),
                (2, 1, 8, true),
                (3, 64, 8, true)
            ]
        );
    }

    #[test]
    fn rr_connections_are_numbered_by_phase_then_flow_then_load() {
        let rr = RrSpec {
            sizes: vec![1, 64],
            under_load: 2,
            ..RrSpec::default()
        };
        let s = rr_spec(TestKind::Rr, 3, rr);
        // 4 phases × 3 flows + 2 load streams.
        assert_eq!(s.connection_count(), 14);
        let plan = s.stream_plan();
        assert_eq!(plan.len(), 14);
        assert!(plan.iter().all(|p| p.sender == Side::Client));
        // The plan marks the load streams (TCP whatever the protocol).
        let load: Vec<u32> = plan.iter().filter(|p| p.load).map(|p| p.id).collect();
        assert_eq!(load, [13, 14]);
        for phase in 0..4 {
            for flow in 0..3 {
                let id = s.rr_conn_id(phase, flow);
                assert_eq!(s.rr_conn(id), Some(RrConn::Flow { phase, flow }));
            }
        }
        assert_eq!(s.rr_conn(13), Some(RrConn::Load { index: 0 }));
        assert_eq!(s.rr_conn(14), Some(RrConn::Load { index: 1 }));
        assert_eq!(s.rr_conn(15), None);
        assert_eq!(s.rr_conn(0), None);
        // crr opens no connections up front but its load streams,
        // numbered after the (phase, flow) ids its transactions carry.
        let c = rr_spec(TestKind::Crr, 2, RrSpec::default());
        assert!(c.stream_plan().is_empty());
        assert_eq!(c.connection_count(), 0);
        let loaded = RrSpec {
            sizes: vec![1],
            under_load: 2,
            ..RrSpec::default()
        };
        let c = rr_spec(TestKind::Crr, 3, loaded);
        let ids: Vec<(u32, bool)> = c.stream_plan().iter().map(|p| (p.id, p.load)).collect();
        assert_eq!(ids, [(7, true), (8, true)]);
        assert_eq!(c.rr_conn(7), Some(RrConn::Load { index: 0 }));
        assert_eq!(c.rr_conn(6), Some(RrConn::Flow { phase: 1, flow: 2 }));
    }

    #[test]
    fn rr_data_phase_covers_every_phase() {
        let rr = RrSpec {
            sizes: vec![1, 2, 3],
            limit: RrLimit::TimeMs(2000),
            under_load: 1,
            ..RrSpec::default()
        };
        let s = rr_spec(TestKind::Rr, 1, rr.clone());
        assert_eq!(s.data_phase_ms(), Some(6 * 3000));
        let counted = rr_spec(
            TestKind::Rr,
            1,
            RrSpec {
                limit: RrLimit::Count(10),
                ..rr
            },
        );
        assert_eq!(counted.data_phase_ms(), None);
    }

    #[test]
    fn rr_refusals_name_the_field() {
        let l = ServerLimits::default();
        let bad = |kind: TestKind, f: fn(&mut RrSpec)| {
            let mut rr = RrSpec::default();
            f(&mut rr);
            negotiate(&rr_spec(kind, 1, rr), &l)
                .expect_err("should refuse")
                .field
        };
        assert_eq!(bad(TestKind::Rr, |r| r.sizes.clear()), "sizes");
        assert_eq!(bad(TestKind::Rr, |r| r.sizes = vec![0]), "sizes");
        assert_eq!(
            bad(TestKind::Rr, |r| r.response_size = Some(u32::MAX)),
            "response_size"
        );
        assert_eq!(bad(TestKind::Rr, |r| r.limit = RrLimit::TimeMs(0)), "time");
        assert_eq!(
            bad(TestKind::Rr, |r| r.limit = RrLimit::TimeMs(u64::MAX / 2)),
            "time"
        );
        assert_eq!(bad(TestKind::Rr, |r| r.limit = RrLimit::Count(0)), "count");
        assert_eq!(bad(TestKind::Rr, |r| r.batch = 0), "batch");
        assert_eq!(bad(TestKind::Crr, |r| r.under_load = 1000), "under_load");
        assert_eq!(bad(TestKind::Rr, |r| r.under_load = 1000), "under_load");
        let no_rr = TestSpec {
            kind: TestKind::Rr,
            ..TestSpec::default()
        };
        assert_eq!(negotiate(&no_rr, &l).expect_err("refused").field, "rr");
        let many = rr_spec(
            TestKind::Rr,
            128,
            RrSpec {
                sizes: vec![1; 64],
                ..RrSpec::default()
            },
        );
        assert_eq!(negotiate(&many, &l).expect_err("refused").field, "streams");
        assert!(negotiate(&rr_spec(TestKind::Rr, 4, RrSpec::default()), &l).is_ok());
        // UDP: one datagram per message, load streams (TCP) beside, no crr.
        let udp = |kind: TestKind, f: fn(&mut RrSpec)| {
            let mut rr = RrSpec::default();
            f(&mut rr);
            let mut s = rr_spec(kind, 1, rr);
            s.protocol = Protocol::Udp;
            negotiate(&s, &l).map(|_| ()).map_err(|e| e.field)
        };
        assert_eq!(udp(TestKind::Rr, |_| {}), Ok(()));
        assert_eq!(udp(TestKind::Rr, |r| r.sizes = vec![65508]), Err("sizes"));
        assert_eq!(udp(TestKind::Rr, |r| r.under_load = 1), Ok(()));
        assert_eq!(udp(TestKind::Crr, |_| {}), Err("protocol"));
        // The stream limit does not apply to request/response tests.
        let mut counted = rr_spec(TestKind::Rr, 1, RrSpec::default());
        counted.limit = Limit::TimeMs(u64::MAX);
        assert!(negotiate(&counted, &l).is_ok());
    }

    #[test]
    fn specs_without_kind_are_stream_tests() {
        let mut v = serde_json::to_value(TestSpec::default()).expect("json");
        v.as_object_mut().expect("object").remove("kind");
        let s: TestSpec = serde_json::from_value(v).expect("parses");
        assert_eq!(s.kind, TestKind::Stream);
        assert_eq!(s.rr, None);
    }

    #[test]
    fn issue_8_skip_rx_copy_and_busy_poll_travel_in_the_spec_and_old_specs_lack_them() {
        // Off: absent from the JSON, so an older peer sees the spec it knows.
        let v = serde_json::to_value(TestSpec::default()).expect("json");
        assert!(v.get("busy_poll").is_none() && v["tcp"].get("skip_rx_copy").is_none());
        let old: TestSpec = serde_json::from_value(v).expect("parses");
        assert!(!old.busy_poll && !old.tcp.skip_rx_copy);
        // On: both round-trip.
        let s = TestSpec {
            busy_poll: true,
            tcp: TcpOptions {
                skip_rx_copy: true,
                ..TcpOptions::default()
            },
            ..TestSpec::default()
        };
        let back: TestSpec =
            serde_json::from_value(serde_json::to_value(&s).expect("json")).expect("parses");
        assert!(back.busy_poll && back.tcp.skip_rx_copy);
    }

    proptest! {
        /// Every request/response connection id maps back to one place.
        #[test]
        fn rr_conn_ids_are_a_bijection(streams in 1u16..8, sizes in 1usize..6, load in 0u16..4) {
            let rr = RrSpec { sizes: vec![7; sizes], under_load: load, ..RrSpec::default() };
            let s = rr_spec(TestKind::Rr, streams, rr.clone());
            let mut seen = std::collections::HashSet::new();
            for p in s.stream_plan() {
                let c = s.rr_conn(p.id).expect("every planned id has a role");
                prop_assert!(seen.insert(c));
                if let RrConn::Flow { phase, flow } = c {
                    prop_assert_eq!(s.rr_conn_id(phase, flow), p.id);
                }
            }
            prop_assert_eq!(seen.len(), rr.phases().len() * usize::from(streams) + usize::from(load));
        }

        /// Byte-limited plans split the total exactly.
        #[test]
        fn byte_split_is_exact(total in 1u64..u64::MAX / 2, streams in 1u16..=128, bidir in any::<bool>()) {
            let spec = TestSpec {
                streams,
                limit: Limit::Bytes(total),
                direction: if bidir { Direction::Bidir } else { Direction::Forward },
                ..TestSpec::default()
            };
            let plan = spec.stream_plan();
            prop_assert_eq!(plan.len(), spec.connection_count());
            for side in [Side::Client, Side::Server] {
                let sum: u64 = plan.iter().filter(|p| p.sender == side).filter_map(|p| p.bytes).sum();
                let expected = if side == Side::Client || bidir { total } else { 0 };
                prop_assert_eq!(sum, expected);
            }
        }

        /// Whatever negotiate accepts stays within the limits.
        #[test]
        fn accepted_specs_respect_limits(streams in 0u16..300, len in 0u32..32<<20, window in proptest::option::of(any::<u32>())) {
            let l = ServerLimits::default();
            let mut s = TestSpec { streams, len, ..TestSpec::default() };
            s.tcp.window = window;
            if let Ok(n) = negotiate(&s, &l) {
                prop_assert!(n.spec.streams >= 1 && n.spec.streams <= l.max_streams);
                prop_assert!(n.spec.len >= 1 && n.spec.len <= l.max_len);
                prop_assert!(n.spec.tcp.window.unwrap_or(0) <= l.max_window);
            }
        }
    }
}
