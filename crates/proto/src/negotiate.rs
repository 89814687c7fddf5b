//! The server's negotiation of a proposed [`TestSpec`]: it checks the
//! proposal against its [`ServerLimits`] and either refuses (with the field
//! and the limit in the message) or returns the spec it will run, clamped
//! where clamping keeps the test meaningful, with a note for each change.

use std::sync::Arc;

use crate::limits::{test_rate, RateBudget, RateReservation, ServerLimits, SpecError};
use crate::spec::*;
use crate::test_type::{self, Rules, Shape};
pub use crate::test_type::{MAX_BURST, MAX_DRAIN_MS, MAX_FAULTS};

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
    let rules = test_type::of(&spec);
    check_counts(&spec, rules, limits)?;
    check_limit(&spec, rules, limits)?;
    (rules.params)(&mut spec, limits, &mut notes)?;
    check_timing(&spec, limits)?;
    negotiate_tcp_options(&mut spec.tcp, limits, &mut notes)?;
    (rules.negotiate)(&spec, limits)?;
    if spec.tcp.unix {
        negotiate_unix(&spec, rules, limits)?;
    }
    crate::limits::check(&mut spec, &rules.budget, limits, &mut notes)?;
    Ok(Negotiated { spec, notes })
}

/// Streams, flows and the write/datagram length within the server's
/// limits.
fn check_counts(spec: &TestSpec, rules: &Rules, limits: &ServerLimits) -> Result<(), SpecError> {
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
        negotiate_flows(spec, rules, f, limits)?;
    }
    check_len(spec.len, limits)
}

/// The write/datagram length within `--max-len`.
fn check_len(len: u32, limits: &ServerLimits) -> Result<(), SpecError> {
    if len == 0 || len > limits.max_len {
        return Err(SpecError {
            field: "len",
            reason: format!("{len} bytes requested, must be 1..={}", limits.max_len),
        });
    }
    Ok(())
}

/// The limits on a test's sizes whatever its wire format, from the same
/// functions native negotiation reaches them through: the write/datagram
/// length within `--max-len`, socket windows clamped to `--max-window`
/// (noted), the buffers within `--max-test-memory`. An iperf3 client's
/// parameters, as a spec, come here (its session checks the rest in
/// iperf3's terms: streams, time, omit, rates).
pub fn check_sizes(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    check_len(spec.len, limits)?;
    crate::limits::clamp_window(&mut spec.tcp.window, limits, notes);
    if let Some(u) = spec.udp.as_mut() {
        crate::limits::clamp_window(&mut u.window, limits, notes);
    }
    // One note where a UDP spec carries its window twice.
    notes.dedup();
    crate::limits::check_memory(spec, &test_type::of(spec).budget, limits)
}

/// A stream test's time, byte or datagram limit (request/response
/// and msg tests carry their own, checked by their entry's `negotiate`).
fn check_limit(spec: &TestSpec, rules: &Rules, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    let limit = (rules.shape == Shape::Stream).then_some(spec.limit);
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
    crate::limits::clamp_window(&mut tcp.window, limits, notes);
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

/// `--flows N --threads T`: what event loops run (TCP and UDP streams, TCP
/// rr),
/// and no more flows than the server's `--max-flows`, refused before any
/// data connection opens.
fn negotiate_flows(
    spec: &TestSpec,
    rules: &Rules,
    f: Flows,
    limits: &ServerLimits,
) -> Result<(), SpecError> {
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
    if let Err(why) = (rules.flows)(spec) {
        return err("flows", why.into());
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
fn negotiate_unix(spec: &TestSpec, rules: &Rules, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |reason: &str| {
        Err(SpecError {
            field: "transport",
            reason: format!("unix: {reason}"),
        })
    };
    if !rules.unix {
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
        let bps = test_rate(&n.spec, &test_type::of(&n.spec).budget).unwrap_or(u64::MAX);
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
        // rr runs on the loops, every size a phase, and under load.
        let rr = TestSpec {
            kind: TestKind::Rr,
            rr: Some(RrSpec::default()),
            ..flows(10, Direction::Forward)
        };
        assert!(negotiate(&rr, &l).is_ok(), "{:?}", negotiate(&rr, &l));
        let loaded = TestSpec {
            rr: Some(RrSpec {
                under_load: 1,
                ..RrSpec::default()
            }),
            ..rr
        };
        assert!(
            negotiate(&loaded, &l).is_ok(),
            "{:?}",
            negotiate(&loaded, &l)
        );
        // Busy-polling is per-thread flows only.
        let spun = TestSpec {
            rr: Some(RrSpec {
                busy_poll: true,
                ..RrSpec::default()
            }),
            ..loaded
        };
        let e = negotiate(&spun, &l).expect_err("refused");
        assert!(
            e.field == "flows" && e.reason.contains("--busy-poll"),
            "{e}"
        );
        // UDP streams run on the loops too.
        let udp = TestSpec {
            protocol: Protocol::Udp,
            udp: Some(UdpSpec::default()),
            len: 1472,
            ..flows(256, Direction::Bidir)
        };
        assert!(negotiate(&udp, &l).is_ok(), "{:?}", negotiate(&udp, &l));
    }

    /// rr over UDP runs on event loops as over TCP: a phase per size, held
    /// to `--max-flows` and the descriptor limit (every phase's sockets)
    /// like any flows.
    #[test]
    fn issue_26_udp_rr_flows_are_negotiated_within_the_flow_limits() {
        let l = ServerLimits {
            max_flows: 1000,
            max_fds: Some(1050),
            ..ServerLimits::default()
        };
        let rr = |count, sizes: Vec<u32>| TestSpec {
            kind: TestKind::Rr,
            protocol: Protocol::Udp,
            flows: Some(Flows { count, threads: 2 }),
            rr: Some(RrSpec {
                sizes,
                ..RrSpec::default()
            }),
            ..TestSpec::default()
        };
        let ok = negotiate(&rr(256, vec![1]), &l);
        assert!(ok.is_ok(), "{ok:?}");
        let e = negotiate(&rr(2000, vec![1]), &l).expect_err("over --max-flows");
        assert!(e.reason.contains("2000 flows requested"), "{e}");
        let e = negotiate(&rr(1000, vec![1]), &l).expect_err("over the fd limit");
        assert!(e.reason.contains("file descriptors"), "{e}");
        let sizes = negotiate(&rr(8, vec![1, 64]), &l);
        assert!(sizes.is_ok(), "{sizes:?}");
        // 2 sizes × 500 flows are 1,000 sockets.
        let e = negotiate(&rr(500, vec![1, 64]), &l).expect_err("over the fd limit");
        assert!(e.reason.contains("1064 file descriptors"), "{e}");
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
        assert!(negotiate_unix(&udp, test_type::of(&udp), &l).is_err());
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
        // rr on event-loop flows is paced on the loops' timer heaps, over
        // TCP and over UDP.
        let mut flows = rr(TestKind::Rr, Some(200));
        flows.protocol = Protocol::Tcp;
        flows.flows = Some(Flows {
            count: 16,
            threads: 2,
        });
        if let Some(rr) = &mut flows.rr {
            rr.sizes = vec![1];
        }
        let n = negotiate(&flows, &l).expect("paced TCP flows accepted");
        assert_eq!(n.spec.rr.expect("rr").rate, Some(200));
        flows.protocol = Protocol::Udp;
        let n = negotiate(&flows, &l).expect("paced UDP flows accepted");
        assert_eq!(n.spec.rr.expect("rr").rate, Some(200));
    }
}
