//! The phase gate: moves the flows of one side from phase to phase
//! together, and tells the load streams when to send.

use std::sync::{Condvar, Mutex};

use crate::stream::Signals;

use super::params::WAKE;

#[derive(Debug, Default)]
pub(super) struct GateState {
    /// Phases with index < `open` may run.
    pub(super) open: u32,
    /// (flow, phase) pairs finished.
    pub(super) done: u32,
    /// The load streams may send.
    pub(super) load: bool,
    /// The coordinator is done: nothing more will open.
    pub(super) closed: bool,
}

/// Moves the flows of one side from phase to phase together.
#[derive(Debug, Default)]
pub(super) struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    pub(super) fn update(&self, f: impl FnOnce(&mut GateState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
        self.changed.notify_all();
    }

    /// Waits until `cond` holds (true) or the side aborts / the gate closes
    /// (false), calling `tick` every [`WAKE`].
    pub(super) fn wait_ticking(
        &self,
        signals: &Signals,
        cond: impl Fn(&GateState) -> bool,
        mut tick: impl FnMut(),
    ) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        loop {
            if cond(&s) {
                return true;
            }
            if s.closed || signals.aborted() {
                return false;
            }
            match self.changed.wait_timeout(s, WAKE) {
                Ok((g, t)) => {
                    s = g;
                    if t.timed_out() {
                        tick();
                    }
                }
                Err(_) => return false,
            }
        }
    }

    pub(super) fn wait(&self, signals: &Signals, cond: impl Fn(&GateState) -> bool) -> bool {
        self.wait_ticking(signals, cond, || {})
    }
}
