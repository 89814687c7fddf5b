//! What one side checks about what its peer sent, before acting on it or
//! printing it: an Accept must run the test that was asked for (the server
//! may only shrink the socket window, as negotiation does), and a side's
//! Results must be physically possible. A peer that fails either is
//! refused with a message naming the field, never obeyed or reported.

use crate::measure::SideResults;
use crate::spec::TestSpec;

/// Fastest rate believed for one side's total, bit/s (100 Tbit/s: far
/// beyond any host's memory bandwidth today, so no real result is lost).
pub const MAX_PLAUSIBLE_BPS: f64 = 1e14;
/// Most CPUs a host may report.
pub const MAX_PLAUSIBLE_CPUS: u64 = 65_536;

/// Checks the server's Accept against the client's proposal.
pub fn check_accept(asked: &TestSpec, got: &TestSpec) -> Result<(), String> {
    let mut expected = asked.clone();
    // Negotiation may clamp the window (never raise it) and, with
    // --max-rate / --max-total-rate, the pace of the server's own senders.
    match (asked.tcp.window, got.tcp.window) {
        (Some(a), Some(g)) if g <= a => expected.tcp.window = Some(g),
        _ => {}
    }
    let reverse = asked.direction == crate::spec::Direction::Reverse;
    if let (Some(e), Some(g)) = (expected.udp.as_mut(), got.udp.as_ref()) {
        if reverse && rate_not_above(got, asked) {
            e.pace = g.pace;
        }
    }
    // The same for the kernel pacing rate of the server's TCP senders.
    if let (true, Some(g)) = (reverse, got.tcp.rate) {
        if asked.tcp.rate.is_none_or(|a| g <= a) {
            expected.tcp.rate = Some(g);
        }
    }
    if &expected == got {
        return Ok(());
    }
    Err(format!(
        "the server's Accept changes the test: {} (asked {}, got {})",
        first_difference(&expected, got),
        short_json(&expected),
        short_json(got)
    ))
}

/// True when `got`'s UDP pace is paced and not faster than `asked`'s.
fn rate_not_above(got: &TestSpec, asked: &TestSpec) -> bool {
    let bps = |s: &TestSpec| -> Option<u128> {
        let m = s.udp.as_ref()?.millipps(s.len)?;
        Some(u128::from(m) * u128::from(s.len) * 8)
    };
    match (bps(got), bps(asked)) {
        (Some(g), Some(a)) => g <= a,
        (Some(_), None) => true,
        _ => false,
    }
}

fn first_difference(a: &TestSpec, b: &TestSpec) -> &'static str {
    if a.kind != b.kind {
        "kind"
    } else if a.protocol != b.protocol {
        "protocol"
    } else if a.direction != b.direction {
        "direction"
    } else if a.streams != b.streams {
        "streams"
    } else if a.limit != b.limit {
        "limit"
    } else if a.len != b.len {
        "len"
    } else if a.omit_ms != b.omit_ms {
        "omit"
    } else if a.interval_ms != b.interval_ms {
        "interval"
    } else if a.tcp != b.tcp {
        "tcp options"
    } else if a.rr != b.rr {
        "request/response parameters"
    } else {
        "udp parameters"
    }
}

fn short_json(s: &TestSpec) -> String {
    let j = serde_json::to_string(s).unwrap_or_default();
    if j.chars().count() > 300 {
        j.chars().take(300).chain(std::iter::once('…')).collect()
    } else {
        j
    }
}

/// Checks that a peer's Results for `spec` could have been measured: each
/// stream is in the plan at most once, rates and CPU use are possible.
pub fn check_results(spec: &TestSpec, r: &SideResults) -> Result<(), String> {
    let planned = spec.connection_count().max(spec.per_direction() as usize) as u64;
    if r.streams.len() as u64 > planned {
        return Err(format!(
            "{} streams reported for a test of {planned}",
            r.streams.len()
        ));
    }
    let mut total_bits = 0f64;
    let mut longest_ns = 0u64;
    for s in &r.streams {
        if s.id == 0 || u64::from(s.id) > planned {
            return Err(format!("stream id {} is not in the test plan", s.id));
        }
        if s.bytes > 0 && s.elapsed_ns == 0 {
            return Err(format!("stream {}: {} bytes in no time", s.id, s.bytes));
        }
        let bits = s.bytes as f64 * 8.0;
        if s.elapsed_ns > 0 && bits / (s.elapsed_ns as f64 / 1e9) > MAX_PLAUSIBLE_BPS {
            return Err(format!(
                "stream {}: {:.3e} bit/s is not a possible rate",
                s.id,
                bits / (s.elapsed_ns as f64 / 1e9)
            ));
        }
        check_datagrams(spec, s)?;
        total_bits += bits;
        longest_ns = longest_ns.max(s.elapsed_ns);
    }
    if longest_ns > 0 && total_bits / (longest_ns as f64 / 1e9) > MAX_PLAUSIBLE_BPS {
        return Err(format!(
            "{:.3e} bit/s in all is not a possible rate",
            total_bits / (longest_ns as f64 / 1e9)
        ));
    }
    check_cpu(r)
}

/// A stream's datagram counts (sent, issued, the highest number seen) must
/// fit its time: each datagram carries at least one byte of `spec.len`, so
/// more than [`MAX_PLAUSIBLE_BPS`] worth of them is not a possible count
/// (an iperf3 client's `packets` of 9·10¹⁸ in 2 s, issue 28).
fn check_datagrams(spec: &TestSpec, s: &crate::measure::StreamMeasurement) -> Result<(), String> {
    let counts = [
        s.udp_send.as_ref().map(|u| u.issued.max(u.datagrams)),
        s.udp_recv
            .as_ref()
            .map(|u| u.next_expected.max(u.datagrams).max(u.lost.unwrap_or(0))),
    ];
    let most = counts.into_iter().flatten().max().unwrap_or(0);
    if most == 0 {
        return Ok(());
    }
    let secs = s.elapsed_ns as f64 / 1e9;
    let bits = most as f64 * f64::from(spec.len.max(1)) * 8.0;
    if secs == 0.0 || bits / secs > MAX_PLAUSIBLE_BPS {
        return Err(format!(
            "stream {}: {most} datagrams in {secs:.3} s is not a possible count",
            s.id
        ));
    }
    Ok(())
}

/// Slack for CPU accounting granularity (clock ticks), ns.
const SLACK: u128 = 100_000_000;
/// An interval's CPU slack, ns: on a loaded host the side that cut the
/// interval can be descheduled between reading its threads' CPU and
/// reading the clock, so a 1 ms last interval was seen holding 0.1 s of
/// CPU from before it (a README example was refused under load). A second
/// still refuses what no host could do.
const INTERVAL_SLACK: u128 = 1_000_000_000;

fn check_cpu(r: &SideResults) -> Result<(), String> {
    let cpu = &r.cpu;
    let cpus = cpu
        .host
        .as_ref()
        .map_or(MAX_PLAUSIBLE_CPUS, |h| u64::from(h.cpus));
    if cpus == 0 || cpus > MAX_PLAUSIBLE_CPUS {
        return Err(format!("{cpus} CPUs is not a possible host"));
    }
    let used = u128::from(cpu.user_ns) + u128::from(cpu.system_ns);
    let allowed = u128::from(cpu.wall_ns) * u128::from(cpus) + SLACK;
    if used > allowed {
        return Err(format!(
            "{:.3} s of CPU time in {:.3} s on {cpus} CPUs is not possible",
            used as f64 / 1e9,
            cpu.wall_ns as f64 / 1e9
        ));
    }
    // The busiest thread is one thread: at most one core over the wall time.
    if cpu
        .busiest_thread_ns
        .is_some_and(|b| u128::from(b) > u128::from(cpu.wall_ns) + SLACK)
    {
        return Err("the busiest thread used more than one core".into());
    }
    for i in &r.intervals {
        let Some(c) = &i.cpu else { continue };
        let used = u128::from(c.user_ns) + u128::from(c.system_ns);
        if used > u128::from(c.wall_ns) * u128::from(cpus) + INTERVAL_SLACK
            || u128::from(c.busiest_thread_ns) > u128::from(c.wall_ns) + INTERVAL_SLACK
        {
            return Err(format!(
                "interval at {:.3} s: {:.3} s of CPU time in {:.3} s, beyond what {cpus} CPUs have",
                i.start_ns as f64 / 1e9,
                used as f64 / 1e9,
                c.wall_ns as f64 / 1e9
            ));
        }
    }
    if let Some(h) = &cpu.host {
        if h.busy_ns > h.total_ns {
            return Err(format!(
                "host CPU busy {} ns of {} ns is more than 100%",
                h.busy_ns, h.total_ns
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{CpuMeasurement, HostCpu, IntervalMeasurement, StreamMeasurement};
    use crate::spec::Limit;

    #[test]
    fn issue_10_accept_must_run_the_test_asked_for() {
        let asked = TestSpec {
            tcp: crate::spec::TcpOptions {
                window: Some(1 << 20),
                ..Default::default()
            },
            ..TestSpec::default()
        };
        assert!(check_accept(&asked, &asked).is_ok());
        let mut clamped = asked.clone();
        clamped.tcp.window = Some(1 << 16);
        assert!(check_accept(&asked, &clamped).is_ok(), "a smaller window");
        for (what, bad) in [
            (
                "interval",
                TestSpec {
                    interval_ms: 0,
                    ..asked.clone()
                },
            ),
            (
                "streams",
                TestSpec {
                    streams: 3000,
                    ..asked.clone()
                },
            ),
            (
                "limit",
                TestSpec {
                    limit: Limit::TimeMs(u64::MAX),
                    ..asked.clone()
                },
            ),
            (
                "len",
                TestSpec {
                    len: 1,
                    ..asked.clone()
                },
            ),
        ] {
            let e = check_accept(&asked, &bad).expect_err(what);
            assert!(e.contains(what), "{what}: {e}");
        }
        let mut bigger = asked.clone();
        bigger.tcp.window = Some(1 << 30);
        assert!(check_accept(&asked, &bigger).is_err());
    }

    fn results(bytes: u64, elapsed_ns: u64) -> SideResults {
        SideResults {
            streams: vec![StreamMeasurement {
                id: 1,
                bytes,
                elapsed_ns,
                ..Default::default()
            }],
            cpu: CpuMeasurement {
                user_ns: 1_000_000_000,
                system_ns: 0,
                wall_ns: 10_000_000_000,
                host: Some(HostCpu {
                    cpus: 2,
                    busy_ns: 1,
                    total_ns: 2,
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn issue_10_results_must_be_physically_possible() {
        let spec = TestSpec::default();
        assert!(check_results(&spec, &results(12_500_000_000, 10_000_000_000)).is_ok());
        // 16,904,093 Tbit/s
        let e = check_results(&spec, &results(u64::MAX / 2, 10_000_000_000)).expect_err("rate");
        assert!(e.contains("not a possible rate"), "{e}");
        let mut cpu = results(1000, 10_000_000_000);
        cpu.cpu.user_ns = u64::MAX;
        assert!(check_results(&spec, &cpu).expect_err("cpu").contains("CPU"));
        let mut host = results(1000, 10_000_000_000);
        host.cpu.host = Some(HostCpu {
            cpus: 2,
            busy_ns: u64::MAX,
            total_ns: 1,
        });
        assert!(check_results(&spec, &host).is_err());
        let mut ids = results(1000, 1000);
        ids.streams[0].id = 4000;
        assert!(check_results(&spec, &ids).is_err());
        assert!(check_results(&spec, &results(1000, 0)).is_err());
    }
    #[test]
    fn issue_10_accept_may_only_slow_the_servers_own_tcp_senders() {
        let asked = |direction, rate| TestSpec {
            direction,
            tcp: crate::spec::TcpOptions {
                rate,
                ..Default::default()
            },
            ..TestSpec::default()
        };
        use crate::spec::Direction::{Forward, Reverse};
        let ok = [
            (asked(Reverse, None), asked(Reverse, Some(10_000_000))),
            (asked(Reverse, Some(50)), asked(Reverse, Some(40))),
        ];
        for (a, g) in ok {
            assert!(check_accept(&a, &g).is_ok(), "{g:?}");
        }
        let bad = [
            (asked(Reverse, Some(40)), asked(Reverse, Some(50))),
            (asked(Reverse, Some(40)), asked(Reverse, None)),
            (asked(Forward, None), asked(Forward, Some(10))),
        ];
        for (a, g) in bad {
            let e = check_accept(&a, &g).expect_err("refused");
            assert!(e.contains("tcp options"), "{e}");
        }
    }

    #[test]
    fn issue_28_a_short_last_interval_read_late_is_not_refused() {
        let spec = TestSpec::default();
        let with_interval = |wall_ns: u64, used_ns: u64| {
            let mut r = results(1000, 10_000_000_000);
            r.intervals = vec![IntervalMeasurement {
                start_ns: 10_000_000_000,
                end_ns: 10_001_000_000,
                cpu: Some(crate::measure::IntervalCpu {
                    wall_ns,
                    user_ns: used_ns,
                    busiest_thread_ns: used_ns / 4,
                    ..Default::default()
                }),
                ..Default::default()
            }];
            r
        };
        // 1 ms on 2 CPUs holding 0.3 s read late: a loaded host, kept.
        assert!(check_results(&spec, &with_interval(1_000_000, 300_000_000)).is_ok());
        let e = check_results(&spec, &with_interval(1_000_000, 5_000_000_000))
            .expect_err("5 s of CPU in 1 ms");
        assert!(e.contains("beyond what 2 CPUs have"), "{e}");
    }

    #[test]
    fn issue_28_impossible_datagram_counts_are_refused() {
        let spec = TestSpec {
            protocol: crate::spec::Protocol::Udp,
            len: 1470,
            ..TestSpec::default()
        };
        let stream = |issued: u64| SideResults {
            streams: vec![StreamMeasurement {
                id: 1,
                bytes: 1470,
                elapsed_ns: 2_000_000_000,
                udp_send: Some(crate::measure::UdpSend {
                    datagrams: issued,
                    issued,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..SideResults::default()
        };
        assert!(check_results(&spec, &stream(1_000_000)).is_ok());
        let why = check_results(&spec, &stream(9_000_000_000_000_000_000)).expect_err("9e18");
        assert!(why.contains("datagrams"), "{why}");
    }
}
