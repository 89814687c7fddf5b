//! The Running state both sessions share: each side announces the end of
//! its UDP senders once (`SendDone`), sends its `Results` once when its
//! streams have ended, and the test is complete when it also has the
//! peer's. Client and server differ only in what surrounds this. With
//! both in, each TCP stream's warm-up is cut where the client cut it
//! ([`crate::tcp_warmup`]), so both ends hold the same totals, and the
//! client's live interval lines add up to them.

use super::frames::Outbox;
use crate::measure::SideResults;
use crate::wire::{Message, SendDone, SentCount, Side, MAX_RESULTS_PAYLOAD};

/// This side's and the peer's results while the data phase runs.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    local: Option<SideResults>,
    remote: Option<SideResults>,
    send_done: bool,
    /// The test has a warm-up (`-O`): only then is the server's TCP cut
    /// moved to the client's offset (a peer's `omitted_bytes` in a test
    /// without one is ignored).
    omit: bool,
}

impl Exchange {
    /// The exchange of a test with (`omit`) or without a warm-up.
    pub(crate) fn new(omit: bool) -> Self {
        Exchange {
            omit,
            ..Exchange::default()
        }
    }

    /// UDP: every local sender finished; queue `SendDone` (once).
    pub(crate) fn senders_finished(&mut self, streams: Vec<SentCount>, outbox: &mut Outbox) {
        if !self.send_done {
            self.send_done = true;
            outbox.push(&Message::SendDone(SendDone { streams }));
        }
    }

    /// This side's streams ended: queue its `Results` (once). True when
    /// they were new (the caller then waits for the peer's).
    pub(crate) fn local_finished(&mut self, results: SideResults, outbox: &mut Outbox) -> bool {
        if self.local.is_some() {
            return false;
        }
        let results = fit_for_wire(results);
        outbox.push(&Message::Results(Box::new(results.clone())));
        self.local = Some(results);
        true
    }

    /// True until this side's results are in (its streams may be running).
    pub(crate) fn streams_running(&self) -> bool {
        self.local.is_none()
    }

    pub(crate) fn has_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// The peer's results arrived (a second copy is the caller's error).
    pub(crate) fn remote_arrived(&mut self, results: SideResults) {
        self.remote = Some(results);
    }

    /// Both sides' results, once both are in: (local, remote), `me`'s
    /// and the peer's, each TCP stream's warm-up agreed in a test with one
    /// ([`crate::tcp_warmup::agree`]).
    pub(crate) fn take_both(&mut self, me: Side) -> Option<(SideResults, SideResults)> {
        if self.local.is_some() && self.remote.is_some() {
            let (mut local, mut remote) = self.local.take().zip(self.remote.take())?;
            if self.omit {
                crate::tcp_warmup::agree(me, &mut local, &mut remote);
            }
            return Some((local, remote));
        }
        None
    }
}

/// Makes results fit a Results frame: drops the interval records if they
/// would push it past the limit (the report then says so).
fn fit_for_wire(mut results: SideResults) -> SideResults {
    let len = serde_json::to_vec(&results).map_or(usize::MAX, |v| v.len());
    if len > MAX_RESULTS_PAYLOAD {
        results.intervals.clear();
        results.intervals_dropped = true;
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::IntervalMeasurement;

    fn frames(outbox: &mut Outbox) -> Vec<&'static str> {
        let bytes = outbox.take();
        let mut rest = bytes.as_slice();
        let mut names = Vec::new();
        while let Ok(Some((msg, used))) = crate::wire::decode(rest) {
            names.push(msg.name());
            rest = &rest[used..];
        }
        names
    }

    #[test]
    fn each_side_sends_send_done_and_results_once_and_completes_with_both() {
        let mut x = Exchange::default();
        let mut out = Outbox::default();
        x.senders_finished(Vec::new(), &mut out);
        x.senders_finished(Vec::new(), &mut out);
        assert!(x.streams_running());
        assert!(x.local_finished(SideResults::default(), &mut out));
        assert!(!x.local_finished(SideResults::default(), &mut out));
        assert_eq!(frames(&mut out), ["SendDone", "Results"]);
        assert!(!x.streams_running());
        assert_eq!(
            x.take_both(Side::Client),
            None,
            "the peer's results are still missing"
        );
        x.remote_arrived(SideResults::default());
        assert!(x.has_remote());
        assert!(x.take_both(Side::Client).is_some());
    }

    #[test]
    fn results_too_large_for_a_frame_drop_their_intervals_not_their_totals() {
        let big = SideResults {
            engine: "syscall".into(),
            intervals: vec![IntervalMeasurement::default(); 400_000],
            ..SideResults::default()
        };
        let fitted = fit_for_wire(big);
        assert!(fitted.intervals.is_empty() && fitted.intervals_dropped);
        assert_eq!(fitted.engine, "syscall");
        let small = fit_for_wire(SideResults::default());
        assert!(!small.intervals_dropped);
    }
}
