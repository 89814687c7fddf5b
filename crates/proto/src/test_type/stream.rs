//! Stream tests' rules (tcp and udp): the protocol's parameters, a UDP
//! stream's pace, window and faults negotiated, and the rate and memory a
//! stream asks of the server's budgets.

use crate::limits::{Budget, Clamp, ServerLimits, SpecError, MIN_TCP_RATE_BPS};
use crate::spec::{Direction, Limit, Pace, StreamPlan, TestSpec, UdpSpec};
use crate::wire::Side;

/// A TCP test's protocol parameters: none of UDP's, and no datagram count.
pub(super) fn tcp_params(
    spec: &mut TestSpec,
    _: &ServerLimits,
    _: &mut Vec<String>,
) -> Result<(), SpecError> {
    let err = |field, reason: &str| {
        Err(SpecError {
            field,
            reason: reason.into(),
        })
    };
    if spec.udp.is_some() {
        return err("udp", "UDP parameters in a TCP test");
    }
    if matches!(spec.limit, Limit::Datagrams(_)) {
        return err("count", "a datagram count applies to UDP tests only");
    }
    Ok(())
}

/// A TCP-only test's parameters: a UDP spec is refused with `why`, the
/// rest is [`tcp_params`].
pub(super) fn tcp_only(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
    why: &str,
) -> Result<(), SpecError> {
    if spec.protocol == crate::spec::Protocol::Udp {
        return Err(SpecError {
            field: "protocol",
            reason: why.into(),
        });
    }
    tcp_params(spec, limits, notes)
}

/// A UDP stream's parameters, negotiated.
pub(super) fn udp_params(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    match &mut spec.udp {
        None => Err(SpecError {
            field: "udp",
            reason: "missing UDP parameters".into(),
        }),
        Some(udp) => negotiate_udp(spec.len, &spec.limit, udp, limits, notes),
    }
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
    crate::limits::clamp_window(&mut udp.window, limits, notes);
    Ok(())
}

/// A TCP stream: its `--rate`, paced by the kernel.
pub(super) const TCP_BUDGET: Budget = Budget {
    stream_rate: |spec| Some(spec.tcp.rate),
    clamp: Some(Clamp {
        min_bps: MIN_TCP_RATE_BPS,
        apply: |spec, bps| spec.tcp.rate = Some(bps),
    }),
    io_len: |spec| spec.len,
    connections: |spec| spec.connection_count() as u64,
};

/// A UDP stream: its pace in bits per second.
pub(super) const UDP_BUDGET: Budget = Budget {
    stream_rate: udp_rate,
    clamp: Some(Clamp {
        min_bps: 1,
        apply: |spec, bps| match spec.udp.as_mut() {
            Some(udp) => udp.pace = Pace::Rate(bps),
            None => spec.tcp.rate = Some(bps),
        },
    }),
    ..TCP_BUDGET
};

/// The payload bit rate of one UDP stream's pace (`Some(None)`: unpaced).
fn udp_rate(spec: &TestSpec) -> Option<Option<u64>> {
    let pace = spec.udp.as_ref().map_or(Pace::Unlimited, |u| u.pace);
    Some(match pace {
        Pace::Unlimited => None,
        Pace::Rate(bps) => Some(bps),
        Pace::MilliPps(m) => {
            Some(u64::try_from(u128::from(m) * u128::from(spec.len) * 8 / 1000).unwrap_or(u64::MAX))
        }
    })
}

/// A stream test's data connections, in the order the client opens them:
/// client-sending streams first, then server-sending ones, each with its
/// share of a byte or datagram count.
pub(super) fn plan(spec: &TestSpec) -> Vec<StreamPlan> {
    let senders: &[Side] = match spec.direction {
        Direction::Forward => &[Side::Client],
        Direction::Reverse => &[Side::Server],
        Direction::Bidir => &[Side::Client, Side::Server],
    };
    let n = u64::from(spec.per_direction());
    let mut plan = Vec::new();
    for &sender in senders {
        for i in 0..n {
            // Split a total evenly; the first streams take the remainder.
            let share = |total: u64| Some(total / n + u64::from(i < total % n));
            let (bytes, datagrams) = match spec.limit {
                Limit::Bytes(total) => (share(total), None),
                Limit::Datagrams(total) => (None, share(total)),
                Limit::TimeMs(_) => (None, None),
            };
            plan.push(StreamPlan {
                id: plan.len() as u32 + 1,
                sender,
                bytes,
                datagrams,
                load: false,
            });
        }
    }
    plan
}

/// A stream test's data connections: one per stream per direction.
pub(super) fn connections(spec: &TestSpec) -> usize {
    let per = spec.per_direction() as usize;
    match spec.direction {
        Direction::Bidir => 2 * per,
        _ => per,
    }
}

/// How long a stream test's data phase can last, if its limit says.
pub(super) fn data_phase_ms(spec: &TestSpec) -> Option<u64> {
    let drain = spec.udp.as_ref().map_or(0, |u| u.drain_ms);
    match spec.limit {
        Limit::TimeMs(t) => Some(t.saturating_add(spec.omit_ms).saturating_add(drain)),
        Limit::Bytes(_) => None,
        // A paced count takes count × gap; an unpaced one has no bound
        // known in advance.
        Limit::Datagrams(total) => {
            let n = u64::from(spec.per_direction());
            let per_stream = total.div_ceil(n);
            let m = spec.udp.as_ref()?.millipps(spec.len)?;
            let ms = u128::from(per_stream) * 1_000_000 / u128::from(m);
            Some(u64::try_from(ms).unwrap_or(u64::MAX).saturating_add(drain))
        }
    }
}
