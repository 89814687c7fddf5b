//! The server's negotiation of a proposed [`TestSpec`]: it checks the
//! proposal against its [`ServerLimits`] and either refuses (with the field
//! and the limit in the message) or returns the spec it will run, clamped
//! where clamping keeps the test meaningful, with a note for each change.

use std::sync::Arc;

use crate::limits::{test_rate, RateBudget, RateReservation, ServerLimits, SpecError};
use crate::spec::*;

/// The spec the server will run and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub spec: TestSpec,
    pub notes: Vec<String>,
}

/// Checks a proposal against the server's limits.
pub fn negotiate(proposed: &TestSpec, limits: &ServerLimits) -> Result<Negotiated, SpecError> {
    let mut spec = proposed.clone();
    let mut notes = Vec::new();
    check_counts(&spec, limits)?;
    check_limit(&spec, limits)?;
    negotiate_protocol(&mut spec, limits, &mut notes)?;
    check_timing(&spec, limits)?;
    negotiate_tcp_options(&mut spec.tcp, limits, &mut notes)?;
    match spec.kind {
        TestKind::Stream => {}
        TestKind::Msg => negotiate_msg(&spec, limits)?,
        TestKind::Rr | TestKind::Crr => negotiate_rr(&spec, limits)?,
    }
    if spec.tcp.unix {
        negotiate_unix(&spec, limits)?;
    }
    crate::limits::check(&mut spec, limits, &mut notes)?;
    Ok(Negotiated { spec, notes })
}

/// Streams, flows and the write/datagram length within the server's
/// limits.
fn check_counts(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
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
    if let Some(f) = spec.flows {
        negotiate_flows(spec, f, limits)?;
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
    Ok(())
}

/// A stream test's time, byte or datagram limit (request/response tests
/// carry their own, checked in [`negotiate_rr`]).
fn check_limit(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    let limit = match spec.kind {
        TestKind::Stream => Some(spec.limit),
        TestKind::Rr | TestKind::Crr | TestKind::Msg => None,
    };
    match limit {
        None => {}
        Some(Limit::TimeMs(0)) => return err("time", "must be greater than zero".into()),
        Some(Limit::TimeMs(t)) if t > limits.max_time_ms => {
            return err(
                "time",
                format!(
                    "{} s requested, this server allows at most {} s",
                    t / 1000,
                    limits.max_time_ms / 1000
                ),
            )
        }
        Some(Limit::Bytes(0)) => return err("bytes", "must be greater than zero".into()),
        Some(Limit::Datagrams(0)) => return err("count", "must be greater than zero".into()),
        Some(_) => {}
    }
    Ok(())
}

/// The protocol's parameters fit the test kind (UDP stream parameters
/// with a UDP stream test only), and a UDP stream's are negotiated.
fn negotiate_protocol(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    match (spec.kind, spec.protocol, &mut spec.udp) {
        (_, Protocol::Tcp, None) => {
            if matches!(spec.limit, Limit::Datagrams(_)) {
                return err("count", "a datagram count applies to UDP tests only".into());
            }
        }
        (_, Protocol::Tcp, Some(_)) => {
            return err("udp", "UDP parameters in a TCP test".into());
        }
        (TestKind::Crr, Protocol::Udp, _) => {
            return err(
                "protocol",
                "crr opens TCP connections; it has no UDP form".into(),
            );
        }
        (TestKind::Rr, Protocol::Udp, Some(_)) => {
            return err(
                "udp",
                "UDP stream parameters in a request/response test".into(),
            );
        }
        (TestKind::Rr, Protocol::Udp, None) => {}
        (TestKind::Msg, Protocol::Udp, _) => {
            return err("protocol", "messages go over TCP".into());
        }
        (TestKind::Stream, Protocol::Udp, None) => {
            return err("udp", "missing UDP parameters".into())
        }
        (TestKind::Stream, Protocol::Udp, Some(udp)) => {
            negotiate_udp(spec.len, &spec.limit, udp, limits, notes)?;
        }
    }
    Ok(())
}

/// The omitted start and the interval within the server's limits.
fn check_timing(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
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
    Ok(())
}

/// TCP socket options: the window clamped to the server's, the pacing
/// rate, MSS and congestion algorithm checked.
fn negotiate_tcp_options(
    tcp: &mut TcpOptions,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    if let Some(w) = tcp.window {
        if w > limits.max_window {
            notes.push(format!(
                "window clamped from {w} to {} bytes by the server",
                limits.max_window
            ));
            tcp.window = Some(limits.max_window);
        }
    }
    if let Some(r) = tcp.rate.filter(|&r| r < crate::limits::MIN_TCP_RATE_BPS) {
        return err(
            "rate",
            format!(
                "{r} bit/s is below {} bit/s, the least a TCP stream can be paced at \
                 (the kernel paces whole bytes per second)",
                crate::limits::MIN_TCP_RATE_BPS
            ),
        );
    }
    if let Some(mss) = tcp.mss {
        if !(88..=65535).contains(&mss) {
            return err("mss", format!("{mss} is outside 88..=65535"));
        }
    }
    if let Some(cc) = &tcp.congestion {
        let valid = !cc.is_empty()
            && cc.len() < 16
            && cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return err("congestion", format!("{cc:?} is not an algorithm name"));
        }
    }
    Ok(())
}

/// Kind `msg`: the plan within the server's limits; messages go client to
/// server on TCP, one connection per concurrent transfer.
fn negotiate_msg(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |reason: String| {
        Err(SpecError {
            field: "msg",
            reason,
        })
    };
    let Some(m) = &spec.msg else {
        return err("a msg test without its parameters".into());
    };
    if spec.protocol != Protocol::Tcp || spec.direction != Direction::Forward {
        return err("messages go from client to server over TCP".into());
    }
    if m.sizes.is_empty() || m.sizes.len() != m.messages.len() || m.sizes.len() > 64 {
        return err("1 to 64 sizes, each with its message count".into());
    }
    if let Some(s) = m.sizes.iter().find(|&&s| s == 0 || s > MAX_MSG_SIZE) {
        return err(format!(
            "a {s}-byte message: sizes must be 1 to {MAX_MSG_SIZE} bytes"
        ));
    }
    if m.trials == 0 || m.trials > MAX_MSG_TRIALS {
        return err(format!(
            "{} trials: 1 to {MAX_MSG_TRIALS} allowed",
            m.trials
        ));
    }
    if let Some(n) = m.messages.iter().find(|&&n| n == 0 || n > MAX_MSG_MESSAGES) {
        return err(format!(
            "{n} messages per trial: 1 to {MAX_MSG_MESSAGES} allowed"
        ));
    }
    // Each receiving connection holds one message.
    let largest = u64::from(m.sizes.iter().copied().max().unwrap_or(0));
    let memory = largest * u64::from(spec.streams.max(1));
    if memory > limits.max_test_memory {
        return err(format!(
            "{} connections × {largest}-byte messages need {memory} bytes of receive buffers; \
             this server allows {} per test (--max-test-memory)",
            spec.streams, limits.max_test_memory
        ));
    }
    Ok(())
}

/// `--flows N --threads T`: what event loops run (TCP and UDP streams, TCP
/// rr),
/// and no more flows than the server's `--max-flows`, refused before any
/// data connection opens.
fn negotiate_flows(spec: &TestSpec, f: Flows, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    if f.count == 0 || f.threads == 0 {
        return err("flows", "flows and threads must be at least 1".into());
    }
    if f.count > limits.max_flows {
        return err(
            "flows",
            format!(
                "{} flows requested, this server allows at most {} (--max-flows)",
                f.count, limits.max_flows
            ),
        );
    }
    let needed = spec.connection_count() as u64 + crate::limits::SPARE_FDS;
    if let Some(max) = limits.max_fds.filter(|&m| m < needed) {
        return err(
            "flows",
            format!(
                "{} flows need {needed} file descriptors on the server, its hard limit \
                 (RLIMIT_NOFILE) is {max}",
                f.count
            ),
        );
    }
    match (spec.kind, spec.protocol, &spec.rr) {
        (TestKind::Stream, Protocol::Tcp | Protocol::Udp, _) => {}
        (TestKind::Rr, Protocol::Tcp, Some(rr)) => {
            if rr.phases().len() != 1 || rr.busy_poll {
                return err(
                    "flows",
                    "rr on event-loop flows runs one size, without --under-load or --busy-poll, \
                     for now"
                        .into(),
                );
            }
        }
        _ => {
            return err(
                "flows",
                "event-loop flows run TCP and UDP stream and TCP rr tests for now (not UDP rr, crr or msg)"
                    .into(),
            )
        }
    }
    if spec.busy_poll {
        return err(
            "flows",
            "event-loop flows wait in epoll; --busy-poll is per-thread streams only".into(),
        );
    }
    Ok(())
}

/// `--transport unix`: a TCP stream test with no TCP socket option.
fn negotiate_unix(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |reason: &str| {
        Err(SpecError {
            field: "transport",
            reason: format!("unix: {reason}"),
        })
    };
    if spec.kind != TestKind::Stream || spec.protocol != Protocol::Tcp {
        return err("Unix stream sockets carry tcp stream tests only");
    }
    let t = &spec.tcp;
    if t.window.is_some() || t.congestion.is_some() || t.mss.is_some() || t.rate.is_some() {
        return err("window, congestion, mss and rate are TCP options; a Unix socket has none");
    }
    if t.skip_rx_copy || spec.busy_poll {
        return err("--skip-rx-copy and --busy-poll work on TCP and UDP sockets only");
    }
    // The server's rate limits hold TCP senders to a kernel pacing rate,
    // which a Unix socket cannot take.
    if limits.max_rate_bps.is_some() || limits.max_total_rate_bps.is_some() {
        return err(
            "this server limits test rates (--max-rate/--max-total-rate) by TCP pacing, which \
             a Unix socket cannot do",
        );
    }
    Ok(())
}

/// Checks the request/response part of a spec.
fn negotiate_rr(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    let Some(rr) = &spec.rr else {
        return err("rr", "a request/response test needs its parameters".into());
    };
    if rr.sizes.is_empty() || rr.sizes.len() > MAX_RR_SIZES {
        return err(
            "sizes",
            format!("{} sizes given, must be 1..={MAX_RR_SIZES}", rr.sizes.len()),
        );
    }
    for (field, size) in rr
        .sizes
        .iter()
        .map(|&s| ("sizes", s))
        .chain(rr.response_size.map(|s| ("response_size", s)))
    {
        if size == 0 || size > limits.max_len {
            return err(
                field,
                format!("{size} bytes requested, must be 1..={}", limits.max_len),
            );
        }
    }
    match rr.limit {
        RrLimit::TimeMs(0) => return err("time", "must be greater than zero".into()),
        RrLimit::TimeMs(t) => {
            let total = t.saturating_mul(rr.phases().len() as u64);
            if total > limits.max_time_ms {
                return err(
                    "time",
                    format!(
                        "{} s in all ({} per size × {} phases), this server allows at most {} s",
                        total / 1000,
                        t as f64 / 1000.0,
                        rr.phases().len(),
                        limits.max_time_ms / 1000
                    ),
                );
            }
        }
        RrLimit::Count(0) => return err("count", "must be greater than zero".into()),
        RrLimit::Count(_) => {}
    }
    check_rr_rate(spec, rr)?;
    if rr.batch == 0 || rr.batch > MAX_RR_BATCH {
        return err(
            "batch",
            format!("{} requested, must be 1..={MAX_RR_BATCH}", rr.batch),
        );
    }
    if spec.protocol == Protocol::Udp {
        let max = crate::datagram::MAX_LEN as u32;
        for (field, size) in rr
            .sizes
            .iter()
            .map(|&s| ("sizes", s))
            .chain(rr.response_size.map(|s| ("response_size", s)))
        {
            if size > max {
                return err(
                    field,
                    format!("{size} bytes requested; a UDP message is one datagram of at most {max} bytes"),
                );
            }
        }
        if rr.under_load > 0 {
            return err(
                "under_load",
                "load streams are TCP; they are not available with UDP request/response yet".into(),
            );
        }
    }
    if rr.under_load > 0 && spec.kind == TestKind::Crr {
        return err(
            "under_load",
            "load streams are available with request/response (rr) tests only".into(),
        );
    }
    if rr.under_load > limits.max_streams {
        return err(
            "under_load",
            format!(
                "{} load streams requested, this server allows at most {}",
                rr.under_load, limits.max_streams
            ),
        );
    }
    let conns = spec.connection_count();
    // Event-loop flows are held to --max-flows instead (negotiate_flows).
    if conns > MAX_RR_CONNECTIONS && spec.flows.is_none() {
        return err(
            "streams",
            format!(
                "{conns} data connections (sizes × load passes × flows + load streams), at most {MAX_RR_CONNECTIONS}"
            ),
        );
    }
    Ok(())
}

/// A paced request/response rate (`RrSpec::rate`): within
/// 1..=[`MAX_RR_RATE`] (0 would be a gap of forever, more rounds to no
/// gap), and only where flows are paced: thread-per-flow rr, not crr's
/// connection pool or event-loop flows. Paced or not, a request/response
/// test holds one message per flow in flight and takes nothing of
/// `--max-rate` ([`crate::limits::test_rate`]).
fn check_rr_rate(spec: &TestSpec, rr: &RrSpec) -> Result<(), SpecError> {
    let Some(rate) = rr.rate else {
        return Ok(());
    };
    let refuse = |reason: String| {
        Err(SpecError {
            field: "rate",
            reason,
        })
    };
    if rate == 0 || rate > MAX_RR_RATE {
        return refuse(format!(
            "{rate} transactions/s per flow requested, must be 1..={MAX_RR_RATE}"
        ));
    }
    if spec.kind == TestKind::Crr {
        return refuse("crr is not paced (a connection per transaction)".into());
    }
    if spec.flows.is_some() {
        return refuse("event-loop flows are not paced; use parallel flows (-P)".into());
    }
    Ok(())
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

impl RateBudget {
    /// Negotiates `proposed` against `limits` and what is left of the
    /// budget, and reserves the agreed test's rate.
    pub fn negotiate(
        self: &Arc<Self>,
        proposed: &TestSpec,
        limits: &ServerLimits,
    ) -> Result<(Negotiated, RateReservation), SpecError> {
        let mut in_use = self.in_use.lock().map_err(|_| SpecError {
            field: "total_rate",
            reason: "the server's rate budget is unavailable".into(),
        })?;
        let limits = ServerLimits {
            max_total_rate_bps: Some(self.total),
            total_rate_in_use_bps: *in_use,
            ..limits.clone()
        };
        let n = negotiate(proposed, &limits)?;
        // check_rate held the test within what is left: never unbounded.
        let bps = test_rate(&n.spec).unwrap_or(u64::MAX);
        *in_use = in_use.saturating_add(bps);
        Ok((
            n,
            RateReservation {
                budget: Arc::clone(self),
                bps,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_26_flows_are_refused_beyond_max_flows_and_the_descriptor_limit() {
        let l = ServerLimits {
            max_flows: 1000,
            max_fds: Some(5000),
            ..ServerLimits::default()
        };
        let flows = |count, direction| TestSpec {
            flows: Some(Flows { count, threads: 2 }),
            direction,
            ..TestSpec::default()
        };
        let e = negotiate(&flows(100_000, Direction::Forward), &l).expect_err("refused");
        assert_eq!(e.field, "flows");
        assert!(
            e.reason.contains("100000 flows requested") && e.reason.contains("1000"),
            "{e}"
        );
        assert!(negotiate(&flows(1000, Direction::Forward), &l).is_ok());
        // 2 × 1000 sockets fit 5000; a tighter hard limit names the need.
        let tight = ServerLimits {
            max_fds: Some(1500),
            ..l.clone()
        };
        let e = negotiate(&flows(1000, Direction::Bidir), &tight).expect_err("refused");
        assert!(e.reason.contains("2064 file descriptors"), "{e}");
        // Event loops run TCP streams only, for now.
        let rr = TestSpec {
            kind: TestKind::Rr,
            rr: Some(RrSpec::default()),
            ..flows(10, Direction::Forward)
        };
        assert_eq!(negotiate(&rr, &l).expect_err("refused").field, "flows");
        // UDP streams run on the loops too.
        let udp = TestSpec {
            protocol: Protocol::Udp,
            udp: Some(UdpSpec::default()),
            len: 1472,
            ..flows(256, Direction::Bidir)
        };
        assert!(negotiate(&udp, &l).is_ok(), "{:?}", negotiate(&udp, &l));
    }
    use crate::side::Side;

    /// Kind `msg`: the plan within the server's limits, each refusal
    /// naming what to change; no planned end (the server's --max-time
    /// bounds it).
    #[test]
    fn issue_12_msg_negotiation() {
        let l = ServerLimits::default();
        let msg = |f: fn(&mut TestSpec)| {
            let mut s = TestSpec {
                kind: TestKind::Msg,
                streams: 2,
                msg: Some(MsgSpec {
                    sizes: vec![56, 65536],
                    messages: vec![100, 10],
                    trials: 3,
                    verify: true,
                }),
                ..TestSpec::default()
            };
            f(&mut s);
            negotiate(&s, &l)
        };
        let ok = msg(|_| {}).expect("a plain msg test");
        assert_eq!(ok.spec.data_phase_ms(), None);
        assert_eq!(ok.spec.stream_plan().len(), 2);
        assert!(ok
            .spec
            .stream_plan()
            .iter()
            .all(|p| p.sender == Side::Client));
        for (f, want) in [
            (
                (|s: &mut TestSpec| s.msg = None) as fn(&mut TestSpec),
                "without its parameters",
            ),
            (
                |s| s.direction = Direction::Reverse,
                "from client to server",
            ),
            (
                |s| s.msg.as_mut().expect("msg").sizes[0] = 0,
                "sizes must be",
            ),
            (
                |s| s.msg.as_mut().expect("msg").sizes[1] = MAX_MSG_SIZE + 1,
                "sizes must be",
            ),
            (
                |s| {
                    s.msg
                        .as_mut()
                        .expect("msg")
                        .messages
                        .pop()
                        .map(drop)
                        .unwrap_or(())
                },
                "each with",
            ),
            (|s| s.msg.as_mut().expect("msg").trials = 0, "trials"),
            (
                |s| s.msg.as_mut().expect("msg").messages[0] = 0,
                "messages per trial",
            ),
            (
                |s| {
                    s.streams = 32;
                    s.msg.as_mut().expect("msg").sizes[1] = MAX_MSG_SIZE;
                },
                "--max-test-memory",
            ),
        ] {
            let e = msg(f).expect_err(want);
            assert_eq!(e.field, "msg", "{e:?}");
            assert!(e.reason.contains(want), "{want}: {e:?}");
        }
    }

    /// A TCP rate below what the kernel can pace is refused, never run as
    /// something else: the rule iperf3 clients' `-b` follows too.
    #[test]
    fn issue_28_tcp_rate_below_the_least_pace_is_refused() {
        let l = ServerLimits::default();
        let with_rate = |r| {
            let mut s = TestSpec::default();
            s.tcp.rate = Some(r);
            negotiate(&s, &l)
        };
        let e = with_rate(7).expect_err("7 bit/s");
        assert_eq!(e.field, "rate", "{e:?}");
        assert!(e.reason.contains("whole bytes per second"), "{e:?}");
        assert_eq!(with_rate(8).expect("8 bit/s").spec.tcp.rate, Some(8));
    }

    /// `--transport unix`: tcp stream tests without TCP options only; the
    /// flag survives negotiation and is named in the spec's JSON only when set.
    #[test]
    fn issue_12_unix_transport_negotiation() {
        let l = ServerLimits::default();
        let unix = |f: fn(&mut TestSpec)| {
            let mut s = TestSpec::default();
            s.tcp.unix = true;
            f(&mut s);
            negotiate(&s, &l)
        };
        assert!(unix(|_| {}).expect("plain unix stream").spec.tcp.unix);
        for f in [
            (|s: &mut TestSpec| s.tcp.window = Some(1 << 20)) as fn(&mut TestSpec),
            |s| s.tcp.rate = Some(1_000_000),
            |s| s.tcp.mss = Some(1000),
        ] {
            let e = unix(f).expect_err("refused");
            assert_eq!(e.field, "transport", "{e:?}");
        }
        let udp = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        assert!(negotiate_unix(&udp, &l).is_err());
        let capped = ServerLimits {
            max_rate_bps: Some(1_000_000_000),
            ..ServerLimits::default()
        };
        let s = TestSpec {
            tcp: TcpOptions {
                unix: true,
                ..TcpOptions::default()
            },
            ..TestSpec::default()
        };
        let e = negotiate(&s, &capped).expect_err("no pacing on a Unix socket");
        assert!(e.reason.contains("--max-rate"), "{e:?}");
        let plain = serde_json::to_string(&TestSpec::default()).expect("json");
        assert!(!plain.contains("unix"), "{plain}");
    }

    /// Issue 27: a paced request/response rate is checked as other rates
    /// are: a zero or one past the pacing's resolution is refused, and so
    /// is one where nothing would pace it (crr).
    #[test]
    fn issue_27_an_rr_rate_is_checked_in_negotiation() {
        let l = ServerLimits::default();
        let rr = |kind, rate| TestSpec {
            kind,
            protocol: Protocol::Udp,
            rr: Some(RrSpec {
                rate,
                ..RrSpec::default()
            }),
            ..TestSpec::default()
        };
        for rate in [Some(1), Some(1000), Some(MAX_RR_RATE), None] {
            let n = negotiate(&rr(TestKind::Rr, rate), &l).expect("accepted");
            assert_eq!(n.spec.rr.expect("rr").rate, rate);
        }
        for (kind, rate, needle) in [
            (TestKind::Rr, 0, "must be 1..="),
            (TestKind::Rr, MAX_RR_RATE + 1, "must be 1..="),
            (TestKind::Crr, 100, "crr is not paced"),
        ] {
            let mut s = rr(kind, Some(rate));
            s.protocol = Protocol::Tcp;
            let e = negotiate(&s, &l).expect_err("refused");
            assert_eq!(e.field, "rate", "{e:?}");
            assert!(e.reason.contains(needle), "{e}");
        }
    }
}
