//! The client's phase loop, shared by every transport: batches from the
//! phase's clock, a transaction per sequence number through the
//! transport's [`Exchange`], the tally, then the end of the phase. A leaf
//! under the transports (`tcp`, `udp`, `crr`), which implement it, and
//! the client side (`client`), which runs it.

use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::{PhaseClock, Tally};
use linerate_proto::rr_flow::{Response, Transaction};

use std::time::Duration;

use crate::clock::mono_ns;
use crate::EngineError;

use super::params::PhaseCtx;

/// How a client flow runs transactions on one transport during a phase:
/// it moves the bytes, its [`linerate_proto::rr_flow::RrClient`] core
/// writes the requests' headers and judges the responses.
pub(super) trait Exchange {
    /// One transaction: a request with `header` out, its response in.
    fn transact(&mut self, header: &RequestRepr) -> Result<Transaction, EngineError>;
    /// The phase's last transaction is done: end the phase with the peer,
    /// so both ends have counted the same transactions.
    fn end_phase(&mut self) -> Result<(), EngineError>;
}

/// A reliable transport's response, as its core judged it: the core
/// refuses a late one, and one always waits when a response is read.
pub(super) fn reliable_answer(r: Response) -> Result<Transaction, EngineError> {
    match r {
        Response::Matched(server) => Ok(Transaction::Answered(server)),
        Response::Late | Response::Stray => Err(EngineError::Protocol(
            "a response with no request waiting".into(),
        )),
    }
}

/// The longest sleep of a paced flow between two checks of its signals.
const PACE_SLEEP: Duration = Duration::from_millis(20);

/// The one client phase loop: batches from the phase's clock, a
/// transaction per sequence number, the tally, then the end of the phase.
pub(super) fn run_phase(
    x: &mut impl Exchange,
    cx: &PhaseCtx<'_>,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let plan = &cx.p.plan;
    let per_message = plan.per_message();
    let mut clock = PhaseClock::new(plan.limit, plan.batch, mono_ns()).paced(plan.gap_ns);
    loop {
        if cx.signals.aborted() {
            return Err(EngineError::Aborted);
        }
        // Stopped early (the user's Ctrl-C): end the phase with the peer as
        // if its limit were reached, so both ends count the same
        // transactions; the phases after it end at once, with none.
        if cx.signals.stopping() {
            break;
        }
        // Paced (`RrSpec::rate`): wait for the next slot in short sleeps,
        // so a stop or an abort is seen on the way.
        if let Some(wait) = clock.wait_ns(mono_ns()) {
            std::thread::sleep(Duration::from_nanos(wait).min(PACE_SLEEP));
            continue;
        }
        let Some(batch) = clock.next(mono_ns()) else {
            break;
        };
        tally.start(batch);
        for sequence in batch.sequences() {
            let header = RequestRepr {
                flow: cx.flow,
                sequence,
                sent_ns: per_message.then_some(batch.t0),
            };
            tally.record(x.transact(&header)?);
        }
        if tally.finish(mono_ns()) {
            cx.watch.tick(cx.flow);
        }
    }
    x.end_phase()
}
