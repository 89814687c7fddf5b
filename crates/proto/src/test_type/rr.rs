//! Request/response rules (rr over TCP and UDP, crr): the transactions'
//! sizes, phases and limit negotiated, what event loops run, and what a
//! test asks of the server's budgets.

use crate::limits::{Budget, ServerLimits, SpecError};
use crate::spec::{
    RrConn, RrLimit, RrSpec, StreamPlan, TestSpec, MAX_RR_BATCH, MAX_RR_CONNECTIONS, MAX_RR_RATE,
    MAX_RR_SIZES,
};
use crate::wire::Side;

/// rr over UDP: a message is a datagram; no UDP stream parameters.
pub(super) fn udp_params(
    spec: &mut TestSpec,
    _: &ServerLimits,
    _: &mut Vec<String>,
) -> Result<(), SpecError> {
    if spec.udp.is_some() {
        return Err(SpecError {
            field: "udp",
            reason: "UDP stream parameters in a request/response test".into(),
        });
    }
    Ok(())
}

/// crr opens TCP connections.
pub(super) fn crr_params(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    super::stream::tcp_only(
        spec,
        limits,
        notes,
        "crr opens TCP connections; it has no UDP form",
    )
}

pub(super) fn negotiate_tcp(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    negotiate_rr(spec, limits, false, None)
}

pub(super) fn negotiate_udp(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    negotiate_rr(spec, limits, true, None)
}

pub(super) fn negotiate_crr(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let unpaced = "crr is not paced (a connection per transaction)";
    negotiate_rr(spec, limits, false, Some(unpaced))
}

/// Why a test does not run on event loops.
pub(super) const NO_FLOWS: &str =
    "event-loop flows run TCP and UDP stream, rr (TCP and UDP) and crr tests (not msg)";

/// rr (over TCP or UDP) and crr on event loops: a phase per size (and,
/// under load, every size again beside the load's threads, as for rr
/// on threads), without busy-polling.
pub(super) fn flows(spec: &TestSpec) -> Result<(), &'static str> {
    match &spec.rr {
        Some(rr) if rr.busy_poll => Err(
            "rr and crr on event-loop flows wait in epoll; --busy-poll is per-thread flows only",
        ),
        Some(_) => Ok(()),
        None => Err(NO_FLOWS),
    }
}

/// Checks the request/response part of a spec: over UDP (`datagram`)
/// each message is one datagram; `unpaced`: why the type's transactions
/// cannot be paced (a rate is refused with it; `None`: they can).
fn negotiate_rr(
    spec: &TestSpec,
    limits: &ServerLimits,
    datagram: bool,
    unpaced: Option<&str>,
) -> Result<(), SpecError> {
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
    check_rr_rate(rr, unpaced)?;
    if rr.batch == 0 || rr.batch > MAX_RR_BATCH {
        return err(
            "batch",
            format!("{} requested, must be 1..={MAX_RR_BATCH}", rr.batch),
        );
    }
    if datagram {
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

/// rr: not bulk, but its load streams are unpaced; each connection holds
/// a buffer of the largest message.
pub(super) const BUDGET: Budget = Budget {
    stream_rate: |spec| {
        let load = spec.rr.as_ref().is_some_and(|r| r.under_load > 0);
        load.then_some(None)
    },
    clamp: None,
    io_len: largest_message,
    connections: |spec| spec.connection_count() as u64,
};

/// crr: one connection per flow at a time.
pub(super) const CRR_BUDGET: Budget = Budget {
    connections: |spec| u64::from(spec.per_direction()),
    ..BUDGET
};

/// The largest request or response (at least the spec's length).
fn largest_message(spec: &TestSpec) -> u32 {
    spec.rr.as_ref().map_or(spec.len, |rr| {
        rr.sizes
            .iter()
            .copied()
            .chain(rr.response_size)
            .max()
            .unwrap_or(spec.len)
            .max(spec.len)
    })
}

/// Allowance per request/response phase for starting and draining.
const RR_PHASE_SLACK_MS: u64 = 1000;

/// rr's data connections: a connection per flow per phase, then the load
/// streams; the client opens them all and writes first (see `rr_conn` for
/// what each one carries).
pub(super) fn plan(spec: &TestSpec) -> Vec<StreamPlan> {
    (1..=connections(spec) as u32)
        .map(|id| StreamPlan {
            id,
            sender: Side::Client,
            bytes: None,
            datagrams: None,
            load: matches!(spec.rr_conn(id), Some(RrConn::Load { .. })),
        })
        .collect()
}

/// crr's data connections opened up front: its load streams only (each
/// transaction opens its own connection as it runs), numbered as rr's.
pub(super) fn crr_plan(spec: &TestSpec) -> Vec<StreamPlan> {
    let flow_conns = (connections(spec) - crr_connections(spec)) as u32;
    plan(spec).split_off(flow_conns as usize)
}

/// crr's data connections, counted as [`crr_plan`] opens them.
pub(super) fn crr_connections(spec: &TestSpec) -> usize {
    spec.rr.as_ref().map_or(0, |rr| usize::from(rr.under_load))
}

/// rr's data connections, counted as [`plan`] opens them.
pub(super) fn connections(spec: &TestSpec) -> usize {
    spec.rr.as_ref().map_or(0, |rr| {
        rr.phases().len() * spec.per_direction() as usize + usize::from(rr.under_load)
    })
}

/// How long the phases can last at their time limit (each may also take
/// a moment to start and drain); a count has no bound known in advance.
pub(super) fn data_phase_ms(spec: &TestSpec) -> Option<u64> {
    let Some(rr) = &spec.rr else {
        return super::stream::data_phase_ms(spec);
    };
    match rr.limit {
        RrLimit::TimeMs(t) => {
            let phases = rr.phases().len() as u64;
            Some(t.saturating_add(RR_PHASE_SLACK_MS).saturating_mul(phases))
        }
        RrLimit::Count(_) => None,
    }
}

/// A paced request/response rate (`RrSpec::rate`): within
/// 1..=[`MAX_RR_RATE`] (0 would be a gap of forever, more rounds to no
/// gap), and only where flows are paced: rr on flow threads and on
/// event-loop flows, TCP or UDP (each flow's next slot on its loop's timer
/// heap), not crr's connection pool. Paced or not, a request/response
/// test holds one message per flow in flight and takes nothing of
/// `--max-rate` ([`crate::limits::test_rate`]).
fn check_rr_rate(rr: &RrSpec, unpaced: Option<&str>) -> Result<(), SpecError> {
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
    if let Some(why) = unpaced {
        return refuse(why.into());
    }
    Ok(())
}
