//! How an end of a local channel waits for the next message: spin on it
//! within a budget, then sleep (shared memory: on the ring's futex; Unix
//! sockets with `--busy-poll`: in `poll(2)`), and what the waiting came to.
//!
//! The budget is rr's ([`SpinBudget`]): spinning only shortens a wait when
//! the peer runs on another CPU. [`SpinMode::Dedicated`] (a CPU for every
//! spinning end of both processes) spins the whole budget without
//! yielding until its sleeps show the CPU shared after all;
//! [`SpinMode::Shared`] yields at every check point, so a peer on the same
//! CPU runs at once, and halves the budget after each wait that outlasts
//! it (every 64th wait spins the full budget again).

use std::time::{Duration, Instant};

use linerate_proto::rr_core::{SpinBudget, SpinMode};

/// The spin budget of a shared-memory end by default (`rr --transport
/// shm`, `msg --spin`): direct messages exist for latency, and a round trip
/// between two awake ends on two CPUs takes about a microsecond, so a
/// short spin catches the answer that a sleep would meet a wake-up later
/// (docs/design/local.md, shm section, has the measurements). It costs CPU
/// only while waiting, adapts (see [`SpinBudget`]) and is reported.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);

/// How long an end spins before it sleeps, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spin {
    /// Zero: sleep at once.
    pub budget: Duration,
    pub mode: SpinMode,
}

impl Spin {
    /// No spinning: every wait sleeps.
    pub const NONE: Spin = Spin {
        budget: Duration::ZERO,
        mode: SpinMode::Shared,
    };
}

/// What an end's waits came to (counted from its creation; callers take
/// differences for a phase).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Receives that found nothing there and waited.
    pub waits: u64,
    /// Waits that outlasted the spin budget (all of them without one) and
    /// slept: each cost a wake-up.
    pub sleeps: u64,
    /// A dedicated budget found its CPU shared and yielded (for a while at
    /// least).
    pub demoted: bool,
}

impl WaitStats {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: WaitStats) -> WaitStats {
        WaitStats {
            waits: self.waits - earlier.waits,
            sleeps: self.sleeps - earlier.sleeps,
            demoted: self.demoted,
        }
    }
}

/// One end's spinning state.
#[derive(Debug)]
pub struct Spinner {
    budget: Option<SpinBudget>,
    epoch: Instant,
    stats: WaitStats,
}

impl Spinner {
    pub fn new(spin: Spin) -> Spinner {
        Spinner {
            budget: (!spin.budget.is_zero()).then(|| SpinBudget::new(spin.mode, spin.budget)),
            epoch: Instant::now(),
            stats: WaitStats::default(),
        }
    }

    /// A wait: calls `ready` until it holds (true) or the budget is spent
    /// (false: the caller sleeps, counted as a sleep). The clock is read,
    /// and a shared CPU yielded, every `every` calls: cheap checks (a ring's
    /// index) can afford many between clock reads, system calls few.
    pub fn spin(&mut self, every: u32, mut ready: impl FnMut() -> bool) -> bool {
        self.stats.waits += 1;
        if let Some(b) = self.budget.as_mut() {
            loop {
                for _ in 0..every {
                    if ready() {
                        b.done();
                        return true;
                    }
                    std::hint::spin_loop();
                }
                let now = self.epoch.elapsed().as_nanos() as u64;
                if !b.keep_spinning(now) {
                    self.stats.demoted = b.demoted();
                    break;
                }
                if b.mode() == SpinMode::Shared {
                    std::thread::yield_now();
                }
            }
        }
        self.stats.sleeps += 1;
        false
    }

    pub fn stats(&self) -> WaitStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_budget_every_wait_sleeps() {
        let mut s = Spinner::new(Spin::NONE);
        let mut calls = 0;
        assert!(!s.spin(64, || {
            calls += 1;
            true
        }));
        assert_eq!(calls, 0);
        assert_eq!(
            s.stats(),
            WaitStats {
                waits: 1,
                sleeps: 1,
                demoted: false
            }
        );
    }

    #[test]
    fn a_wait_ends_while_spinning_or_sleeps_after_the_budget() {
        // Dedicated: no yield, so a loaded test host cannot stretch ten
        // calls past the budget.
        let mut s = Spinner::new(Spin {
            budget: Duration::from_millis(50),
            mode: SpinMode::Dedicated,
        });
        let mut n = 0;
        assert!(s.spin(4, || {
            n += 1;
            n == 10
        }));
        assert!(!s.spin(4, || false));
        let st = s.stats();
        assert_eq!((st.waits, st.sleeps), (2, 1));
        assert_eq!(
            st.since(WaitStats {
                waits: 1,
                sleeps: 0,
                demoted: false
            })
            .waits,
            1
        );
    }
}
