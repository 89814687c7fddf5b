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
                let bytes = match self.limit {
                    // Split the total evenly; the first streams take the remainder.
                    Limit::Bytes(total) => Some(total / n + u64::from(i < total % n)),
                    Limit::TimeMs(_) => None,
                };
                plan.push(StreamPlan {
                    id: plan.len() as u32 + 1,
                    sender,
                    bytes,
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
        match self.limit {
            Limit::TimeMs(t) => Some(t.saturating_add(self.omit_ms)),
            Limit::Bytes(_) => None,
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
        _ => {}
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
