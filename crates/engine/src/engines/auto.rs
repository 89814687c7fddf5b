//! `--engine auto`, every side's default: the fastest engine this kernel
//! runs for a test, by a fixed, documented rule, with what it skipped and
//! why. A client applies it once; a server ([`Configured::Auto`]) to each
//! test it serves.
//!
//! The rule is an order of preference per kind of test; `auto` takes the
//! first engine in it that passes its capability check. The order is a
//! claim about speed, backed by the quiet-machine bench of 2026-11-23
//! (`bench/results/summary.md`; figures in docs/design/numbers.md): change
//! it only with figures.
//! - TCP stream: `syscall` first. On loopback every zero-copy send is
//!   copied anyway and `SEND_ZC`/`MSG_ZEROCOPY` add a completion per
//!   write, so neither `uring` nor `zerocopy` beat plain writes there; on a
//!   NIC path with scatter-gather they may, and a bench there decides.
//! - UDP stream: `batch` (`sendmmsg` with UDP GSO, `recvmmsg` with UDP
//!   GRO: many datagrams per system call on both sides; 50× `uring` at
//!   64 B), then `uring` (a multishot receive moves many datagrams per
//!   system call on the receiving side), then `syscall`.
//! - Request/response: `syscall` — one call per message is already the
//!   least work for one outstanding message (`batch` is within the spread).

use std::fmt;

use linerate_proto::spec::TestSpec;
/// What a test moves, as far as `auto`'s rule cares: each entry of the
/// test-type table names its own.
pub use linerate_proto::test_type::Workload;

use super::{Batch, EngineKind};

/// A side's `--engine` as configured: one engine for every test, or
/// `auto`'s rule applied to each test when its spec is known (a server
/// learns the test only from the client's Hello).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Configured {
    Fixed(EngineKind),
    Auto,
}

impl Configured {
    /// The engine for a test of workload `w`.
    pub fn for_workload(self, w: Workload) -> EngineKind {
        match self {
            Configured::Fixed(k) => k,
            Configured::Auto => choose(w).kind,
        }
    }

    /// The engine for `spec`'s test.
    pub fn for_test(self, spec: &TestSpec) -> EngineKind {
        self.for_workload(Workload::of(spec))
    }
}

impl fmt::Display for Configured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Configured::Fixed(k) => k.fmt(f),
            Configured::Auto => f.write_str("auto"),
        }
    }
}

/// The preference order per workload (see the module docs).
pub fn preference(w: Workload) -> &'static [EngineKind] {
    match w {
        Workload::TcpStream => &[EngineKind::Syscall],
        Workload::UdpStream => &[
            EngineKind::Batch(Batch::AUTO),
            EngineKind::Uring { sqpoll: false },
            EngineKind::Syscall,
        ],
        Workload::RequestResponse => &[EngineKind::Syscall],
    }
}

/// How the report's note about `auto` begins (`compare` finds it by this).
pub const NOTE_PREFIX: &str = "engine auto chose";

/// What `auto` chose, and each engine it passed over with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    pub kind: EngineKind,
    pub skipped: Vec<(EngineKind, String)>,
}

impl AutoChoice {
    /// One line for the report: the choice, the rule, what was skipped.
    pub fn note(&self, w: Workload) -> String {
        let order: Vec<&str> = preference(w).iter().map(|k| k.name()).collect();
        let mut s = format!(
            "{NOTE_PREFIX} {} (preference for this test: {})",
            self.kind,
            order.join(" > ")
        );
        for (k, why) in &self.skipped {
            s.push_str(&format!("; skipped {k}: {why}"));
        }
        s
    }
}

/// Applies the rule with `check` as the capability test (the real one is
/// [`EngineKind::check`]; tests pass their own).
pub fn choose_with(w: Workload, check: impl Fn(EngineKind) -> Result<(), String>) -> AutoChoice {
    let mut skipped = Vec::new();
    for &k in preference(w) {
        match check(k) {
            Ok(()) => return AutoChoice { kind: k, skipped },
            Err(why) => skipped.push((k, why)),
        }
    }
    // The syscall engine ends every order and runs everywhere.
    AutoChoice {
        kind: EngineKind::Syscall,
        skipped,
    }
}

/// `auto` for workload `w` on this kernel.
pub fn choose(w: Workload) -> AutoChoice {
    choose_with(w, |k| {
        k.check().map(drop).map_err(|e| match e {
            crate::EngineError::EngineUnavailable { reason, .. } => reason,
            e => e.to_string(),
        })
    })
}

/// `auto` for `spec`'s test on this kernel (its workload is its entry's
/// in the test-type table), and the report's note on the choice: every
/// side that applies the rule to a test (a client, an iperf3 client, a
/// server serving an iperf3 client) asks here.
pub fn choose_for(spec: &TestSpec) -> (EngineKind, String) {
    let w = Workload::of(spec);
    let c = choose(w);
    (c.kind, c.note(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_order_ends_with_the_engine_that_runs_everywhere() {
        for w in [
            Workload::TcpStream,
            Workload::UdpStream,
            Workload::RequestResponse,
        ] {
            assert_eq!(preference(w).last(), Some(&EngineKind::Syscall));
        }
    }

    #[test]
    fn udp_prefers_batch_then_uring_then_syscall() {
        assert_eq!(
            preference(Workload::UdpStream),
            &[
                EngineKind::Batch(Batch::AUTO),
                EngineKind::Uring { sqpoll: false },
                EngineKind::Syscall,
            ]
        );
    }

    #[test]
    fn a_refused_engine_is_skipped_with_its_reason() {
        let c = choose_with(Workload::UdpStream, |k| match k {
            EngineKind::Batch(_) => Err("no UDP GSO".into()),
            EngineKind::Uring { .. } => Err("io_uring is disabled".into()),
            _ => Ok(()),
        });
        assert_eq!(c.kind, EngineKind::Syscall);
        let note = c.note(Workload::UdpStream);
        assert!(note.contains("chose syscall"), "{note}");
        assert!(note.contains("batch > uring > syscall"), "{note}");
        assert!(note.contains("skipped batch: no UDP GSO"), "{note}");
        assert!(
            note.contains("skipped uring: io_uring is disabled"),
            "{note}"
        );
    }
}
