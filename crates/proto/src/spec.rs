//! The test spec both sides agree on, and the server's negotiation of it.
//!
//! The client proposes a [`TestSpec`]; the server checks it against its
//! [`ServerLimits`] with [`negotiate`], which either refuses (with the field
//! and the limit in the message) or returns the spec it will run, clamped
//! where clamping keeps the test meaningful, with a note for each change.
//! Both sides then derive the same stream plan from the agreed spec.

use serde::{Deserialize, Serialize};

use crate::wire::Side;

/// Transport of the data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    #[default]
    Tcp,
    /// Paced datagrams with 64-bit sequence numbers ([`UdpSpec`]).
    Udp,
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
    /// UDP parameters; present exactly when `protocol` is `udp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSpec>,
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
            udp: None,
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
}

impl TestSpec {
    /// The data connections of this test, in the order the client opens them:
    /// client-sending streams first, then server-sending ones.
    pub fn stream_plan(&self) -> Vec<StreamPlan> {
        let senders: &[Side] = match self.direction {
            Direction::Forward => &[Side::Client],
            Direction::Reverse => &[Side::Server],
            Direction::Bidir => &[Side::Client, Side::Server],
        };
        let n = u64::from(self.streams.max(1));
        let mut plan = Vec::new();
        for &sender in senders {
            for i in 0..n {
                // Split a total evenly; the first streams take the remainder.
                let share = |total: u64| Some(total / n + u64::from(i < total % n));
                let (bytes, datagrams) = match self.limit {
                    Limit::Bytes(total) => (share(total), None),
                    Limit::Datagrams(total) => (None, share(total)),
                    Limit::TimeMs(_) => (None, None),
                };
                plan.push(StreamPlan {
                    id: plan.len() as u32 + 1,
                    sender,
                    bytes,
                    datagrams,
                });
            }
        }
        plan
    }

    /// Total data connections.
    pub fn connection_count(&self) -> usize {
        let per = usize::from(self.streams.max(1));
        match self.direction {
            Direction::Bidir => 2 * per,
            _ => per,
        }
    }

    /// Upper bound on how long the data phase can legitimately last, if the
    /// test is time-limited (used for the peers' safety deadlines).
    pub fn data_phase_ms(&self) -> Option<u64> {
        let drain = self.udp.as_ref().map_or(0, |u| u.drain_ms);
        match self.limit {
            Limit::TimeMs(t) => Some(t.saturating_add(self.omit_ms).saturating_add(drain)),
            Limit::Bytes(_) => None,
            // A paced count takes count × gap; an unpaced one has no bound
            // known in advance.
            Limit::Datagrams(total) => {
                let n = u64::from(self.streams.max(1));
                let per_stream = total.div_ceil(n);
                let m = self.udp.as_ref()?.millipps(self.len)?;
                let ms = u128::from(per_stream) * 1_000_000 / u128::from(m);
                Some(u64::try_from(ms).unwrap_or(u64::MAX).saturating_add(drain))
            }
        }
    }
}

/// What a server accepts. Values above a limit are refused, except the
/// socket window, which is clamped (a smaller window still gives a valid,
/// if slower, test, and the note says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    pub max_streams: u16,
    pub max_len: u32,
    pub max_time_ms: u64,
    pub max_omit_ms: u64,
    pub max_window: u32,
    pub min_interval_ms: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_streams: 128,
            max_len: 16 * 1024 * 1024,
            max_time_ms: 24 * 3600 * 1000,
            max_omit_ms: 600 * 1000,
            max_window: 1 << 30,
            min_interval_ms: 10,
        }
    }
}

/// A spec the server refuses: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: &'static str,
    pub reason: String,
}

/// The spec the server will run and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub spec: TestSpec,
    pub notes: Vec<String>,
}

/// Checks a proposal against the server's limits.
pub fn negotiate(proposed: &TestSpec, limits: &ServerLimits) -> Result<Negotiated, SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    let mut spec = proposed.clone();
    let mut notes = Vec::new();
    if spec.streams == 0 {
        return err("streams", "must be at least 1".into());
    }
    if spec.streams > limits.max_streams {
        return err(
            "streams",
            format!(
                "{} requested, this server allows at most {}",
                spec.streams, limits.max_streams
            ),
        );
    }
    if spec.len == 0 || spec.len > limits.max_len {
        return err(
            "len",
            format!(
                "{} bytes requested, must be 1..={}",
                spec.len, limits.max_len
            ),
        );
    }
    match spec.limit {
        Limit::TimeMs(0) => return err("time", "must be greater than zero".into()),
        Limit::TimeMs(t) if t > limits.max_time_ms => {
            return err(
                "time",
                format!(
                    "{} s requested, this server allows at most {} s",
                    t / 1000,
                    limits.max_time_ms / 1000
                ),
            )
        }
        Limit::Bytes(0) => return err("bytes", "must be greater than zero".into()),
        Limit::Datagrams(0) => return err("count", "must be greater than zero".into()),
        _ => {}
    }
    match (spec.protocol, &mut spec.udp) {
        (Protocol::Tcp, None) => {
            if matches!(spec.limit, Limit::Datagrams(_)) {
                return err("count", "a datagram count applies to UDP tests only".into());
            }
        }
        (Protocol::Tcp, Some(_)) => {
            return err("udp", "UDP parameters in a TCP test".into());
        }
        (Protocol::Udp, None) => return err("udp", "missing UDP parameters".into()),
        (Protocol::Udp, Some(udp)) => {
            negotiate_udp(spec.len, &spec.limit, udp, limits, &mut notes)?;
        }
    }
    if spec.omit_ms > limits.max_omit_ms {
        return err(
            "omit",
            format!(
                "{} s requested, this server allows at most {} s",
                spec.omit_ms / 1000,
                limits.max_omit_ms / 1000
            ),
        );
    }
    if spec.interval_ms < limits.min_interval_ms {
        return err(
            "interval",
            format!(
                "{} ms requested, must be at least {} ms",
                spec.interval_ms, limits.min_interval_ms
            ),
        );
    }
    if let Some(w) = spec.tcp.window {
        if w > limits.max_window {
            notes.push(format!(
                "window clamped from {w} to {} bytes by the server",
                limits.max_window
            ));
            spec.tcp.window = Some(limits.max_window);
        }
    }
    if let Some(mss) = spec.tcp.mss {
        if !(88..=65535).contains(&mss) {
            return err("mss", format!("{mss} is outside 88..=65535"));
        }
    }
    if let Some(cc) = &spec.tcp.congestion {
        let valid = !cc.is_empty()
            && cc.len() < 16
            && cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return err("congestion", format!("{cc:?} is not an algorithm name"));
        }
    }
    Ok(Negotiated { spec, notes })
}

/// Most faults a test may schedule (a test-only feature; bounded so a spec
/// stays small).
pub const MAX_FAULTS: usize = 10_000;
/// Longest drain period a server accepts.
pub const MAX_DRAIN_MS: u64 = 60_000;
/// Most datagrams per pacing tick.
pub const MAX_BURST: u32 = 65_536;

fn negotiate_udp(
    len: u32,
    limit: &Limit,
    udp: &mut UdpSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    let (min, max) = (
        crate::datagram::HEADER_LEN as u32,
        crate::datagram::MAX_LEN as u32,
    );
    if !(min..=max).contains(&len) {
        return err(
            "len",
            format!("{len} bytes requested; a UDP datagram must be {min}..={max} bytes"),
        );
    }
    if matches!(limit, Limit::Bytes(_)) {
        return err(
            "bytes",
            "UDP tests are limited by time or datagram count".into(),
        );
    }
    match udp.pace {
        Pace::Rate(0) => return err("rate", "must be greater than zero".into()),
        Pace::MilliPps(0) => return err("pps", "must be greater than zero".into()),
        Pace::MilliPps(m) if m > 1_000_000_000_000 => {
            return err("pps", format!("{} requested, at most 10^9", m / 1000))
        }
        _ => {}
    }
    if udp.burst == 0 || udp.burst > MAX_BURST {
        return err(
            "burst",
            format!("{} requested, must be 1..={MAX_BURST}", udp.burst),
        );
    }
    if udp.drain_ms > MAX_DRAIN_MS {
        return err(
            "drain",
            format!("{} ms requested, at most {MAX_DRAIN_MS} ms", udp.drain_ms),
        );
    }
    if let Some(p) = udp.priority {
        if !(-20..=19).contains(&p) {
            return err("priority", format!("nice value {p} is outside -20..=19"));
        }
    }
    if udp.faults.len() > MAX_FAULTS {
        return err(
            "faults",
            format!("{} scheduled, at most {MAX_FAULTS}", udp.faults.len()),
        );
    }
    if let Err(e) = crate::datagram::check_faults(&udp.faults) {
        return err("faults", e);
    }
    if let Some(w) = udp.window {
        if w > limits.max_window {
            notes.push(format!(
                "window clamped from {w} to {} bytes by the server",
                limits.max_window
            ));
            udp.window = Some(limits.max_window);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    proptest! {
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
