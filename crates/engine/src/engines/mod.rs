//! Engines: the I/O primitives of the data path, one file per engine, behind
//! one batch-shaped trait.
//!
//! An engine does only I/O: per transport a few small functions that move a
//! batch of buffers (send these datagrams, receive into these slots, write or
//! read this buffer) in the way it knows best — one syscall per buffer
//! ([`syscall`]), `sendmmsg`/`recvmmsg` with segmentation offload, io_uring,
//! zero copy. Everything else — pacing, sequence numbers, fault injection,
//! classification, loss and jitter accounting, interval records — lives in
//! the sans-IO cores of `linerate_proto` and in the generic loops of
//! [`crate::tcp`] and [`crate::udp`], which drive a core and call the engine
//! for I/O only. A new engine is therefore a few functions, not a copy of
//! every loop.
//!
//! UDP I/O runs on the engine's own endpoint type ([`endpoint`]: the kernel
//! socket for every engine here, [`KernelUdp`]; a queue for a kernel-bypass
//! engine), which the UDP loops use for everything outside the data
//! batches, so no UDP loop names a kernel socket. TCP I/O runs on a
//! [`TcpEndpoint`] ([`tcp_endpoint`]: shutdown, readiness, blocking mode,
//! the low-water mark, `TCP_INFO`, the descriptor the kernel engines' calls
//! name), implemented by the kernel's `TcpStream`: the engines' TCP calls
//! and the TCP loops are generic over it, so no TCP loop names one either;
//! connection setup (connect, accept) does.
//!
//! Engines are chosen once, as an [`EngineKind`] in the validated config, and
//! dispatched statically (`with_engine!`) at the top of a stream's thread:
//! no indirect call per buffer or datagram.

pub mod auto;
pub mod batch;
pub mod endpoint;
mod kind;
pub(crate) mod lent;
pub mod sendfile;
pub mod syscall;
pub mod tcp_endpoint;
mod traits;
pub mod uring;
mod usage;
pub mod xdp;
pub mod zerocopy;

pub use batch::Batch;
pub use endpoint::{Interest, KernelUdp, Readiness, UdpEndpoint};
pub use sendfile::SendFile;
pub use syscall::Syscall;
pub use tcp_endpoint::TcpEndpoint;
pub use uring::Uring;
pub use xdp::{Xdp, XdpMode};
pub use zerocopy::ZeroCopy;

pub use kind::EngineKind;
pub use traits::{
    Engine, RecvMeta, RecvSlots, Segments, TcpRx, TcpTx, TxBatch, UdpRx, UdpTx, Wait, RECV_BUF,
};
pub use usage::take_use;
pub(crate) use usage::{merge_use, record_use};

use linerate_proto::spec::{Protocol, TestKind, TestSpec};
use linerate_proto::test_type::{self, Workload};

use crate::EngineError;

impl EngineKind {
    /// Every engine this build has, in the order `--engine` lists them.
    pub const ALL: &'static [EngineKind] = &[
        EngineKind::Syscall,
        EngineKind::Batch(Batch::AUTO),
        EngineKind::Uring { sqpoll: false },
        EngineKind::Uring { sqpoll: true },
        EngineKind::ZeroCopy { sendfile: false },
        EngineKind::ZeroCopy { sendfile: true },
        EngineKind::Xdp(Xdp {
            mode: None,
            zero_copy: None,
            sleep: false,
        }),
    ];

    /// The name in `--engine` and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Syscall => "syscall",
            EngineKind::Uring { sqpoll: false } => "uring",
            EngineKind::Uring { sqpoll: true } => "uring:sqpoll",
            EngineKind::ZeroCopy { sendfile: false } => "zerocopy",
            EngineKind::ZeroCopy { sendfile: true } => "zerocopy:sendfile",
            EngineKind::Batch(_) => "batch",
            EngineKind::Xdp(_) => "xdp",
        }
    }

    /// What the engine does, in one line (for `--help`).
    pub fn summary(self) -> &'static str {
        match self {
            EngineKind::Syscall => {
                "one call per buffer or datagram; works under LD_PRELOAD kernel-bypass libraries"
            }
            EngineKind::Batch(_) => {
                "sendmmsg/recvmmsg with UDP GSO/GRO; large TCP writes, optional MSG_TRUNC receive"
            }
            EngineKind::Uring { sqpoll: false } => {
                "io_uring: registered buffers, zero-copy sends of 10 KiB and more, multishot receive into a provided-buffer ring, UDP GSO/GRO"
            }
            EngineKind::Uring { sqpoll: true } => {
                "io_uring with a kernel submission-polling thread (SQPOLL)"
            }
            EngineKind::ZeroCopy { sendfile: false } => {
                "MSG_ZEROCOPY sends (UDP in GSO runs), completions tracked on the error queue (loopback copies anyway)"
            }
            EngineKind::ZeroCopy { sendfile: true } => {
                "TCP streams only: sendfile(2) from a memory file holding the send buffer, splice(2) receive into /dev/null"
            }
            EngineKind::Xdp(_) => {
                "UDP streams (-P N, --bidir) and UDP rr: AF_XDP socket on the peer's interface (a NIC or veth, not loopback), past the kernel's UDP/IP stack; needs root or CAP_NET_RAW+CAP_NET_ADMIN+CAP_BPF"
            }
        }
    }

    /// The names of [`Self::ALL`], comma-separated (for help and errors).
    pub fn names() -> String {
        Self::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks that this kernel can run the engine (a refusal says why).
    /// The plain syscall engine runs everywhere.
    pub fn check(self) -> Result<EngineKind, EngineError> {
        match self {
            EngineKind::Syscall => Ok(self),
            EngineKind::Uring { .. } => uring::caps().map(|_| self),
            EngineKind::ZeroCopy { sendfile: false } => zerocopy::check().map(|()| self),
            EngineKind::ZeroCopy { sendfile: true } => sendfile::check().map(|()| self),
            EngineKind::Xdp(x) => x.check().map(|()| self),
            EngineKind::Batch(b) => match b.unavailable() {
                None => Ok(self),
                Some(reason) => Err(EngineError::EngineUnavailable {
                    engine: self,
                    reason,
                }),
            },
        }
    }

    /// Why this engine cannot run `spec`'s test at all, whatever the
    /// kernel (`None`: it can). Only `zerocopy:sendfile` is so limited: it
    /// sends one unchanging buffer from a file, which is a TCP stream's
    /// bytes and nothing else (a UDP datagram or an rr message changes on
    /// every send). Refused by name, never replaced by another engine.
    /// `uring` with `--flows` runs the completion loop, which covers the
    /// kinds of flows [`crate::event_loop::ring::refusal`] says, where
    /// this kernel has multishot receives.
    pub fn refusal(self, spec: &TestSpec) -> Option<String> {
        if let EngineKind::Xdp(_) = self {
            return xdp_refusal(spec);
        }
        if let (EngineKind::Uring { .. }, Some(_)) = (self, spec.flows) {
            return crate::event_loop::ring::refusal(spec);
        }
        if self != (EngineKind::ZeroCopy { sendfile: true }) {
            return None;
        }
        match (Workload::of(spec), spec.protocol) {
            (Workload::TcpStream, _) => None,
            // Worded by what moves: datagrams, or changing messages.
            (_, Protocol::Udp) => Some(format!(
                "{}: TCP stream tests only (sendfile and splice move a byte stream; \
                 for UDP zero-copy sends use --engine zerocopy)",
                self.name()
            )),
            _ => Some(format!(
                "{}: TCP stream tests only (sendfile sends one unchanging buffer; \
                 request/response messages change with every send)",
                self.name()
            )),
        }
    }

    /// Why a server whose own `--engine` is this one cannot serve `spec`
    /// (`None`: it can), asked at admission: the client's
    /// [`Self::refusal`], of what the server runs on its engine. A
    /// server's rr `--flows` (TCP and UDP) run on its io_uring completion
    /// loops when its engine is `uring` (so the host's io_uring is
    /// asked); its crr `--flows` are served by its crr pools whatever its
    /// engine (the test-type table's `server_engine`), so those are not
    /// asked.
    pub fn server_refusal(self, spec: &TestSpec) -> Option<String> {
        if spec.flows.is_some() && Workload::of(spec) == Workload::RequestResponse {
            let on_ring =
                crate::event_loop::ring::uring(self).is_some() && test_type::of(spec).server_engine;
            return if on_ring { self.refusal(spec) } else { None };
        }
        self.refusal(spec)
    }
}

/// Why `xdp` cannot run `spec` (`None`: it can): UDP streams, any number
/// and both directions, and UDP request/response (the flows of one
/// interface share its AF_XDP socket on queue 0: `engines/xdp/port.rs`).
fn xdp_refusal(spec: &TestSpec) -> Option<String> {
    match (spec.protocol, spec.kind) {
        (Protocol::Udp, TestKind::Stream | TestKind::Rr) => None,
        _ => Some(
            "xdp: UDP tests only (streams and request/response; TCP has no AF_XDP \
             path in linerate)"
                .into(),
        ),
    }
}

/// Runs `$body` with `$e` bound to the engine value of `$kind` (a
/// [`EngineKind`]): the one place that maps kinds to engine types, so the
/// generic loops are monomorphised per engine and call it directly.
/// Exported for loops built outside this crate (iperf3's, and their tests).
#[macro_export]
macro_rules! with_engine {
    ($kind:expr, $e:ident => $body:expr) => {
        match $kind {
            $crate::engines::EngineKind::Syscall => {
                let $e = $crate::engines::Syscall;
                $body
            }
            $crate::engines::EngineKind::Uring { sqpoll } => {
                let $e = $crate::engines::Uring { sqpoll };
                $body
            }
            $crate::engines::EngineKind::ZeroCopy { sendfile: false } => {
                let $e = $crate::engines::ZeroCopy;
                $body
            }
            $crate::engines::EngineKind::ZeroCopy { sendfile: true } => {
                let $e = $crate::engines::SendFile;
                $body
            }
            $crate::engines::EngineKind::Batch(options) => {
                let $e = options;
                $body
            }
            $crate::engines::EngineKind::Xdp(options) => {
                let $e = options;
                $body
            }
        }
    };
}
pub use crate::with_engine;

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::spec::TestKind;

    #[test]
    fn kinds_parse_from_their_names_and_unknown_names_are_refused() {
        for k in EngineKind::ALL {
            assert_eq!(k.name().parse::<EngineKind>().expect("known"), *k);
        }
        let e = "warp".parse::<EngineKind>().expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "unknown engine \"warp\"; this build has: syscall, batch, uring, uring:sqpoll, zerocopy, zerocopy:sendfile, xdp"
        );
    }

    #[test]
    fn issue_26_uring_flows_run_streams_rr_and_crr() {
        use linerate_proto::spec::Flows;
        let uring = EngineKind::Uring { sqpoll: false };
        let flows = Some(Flows {
            count: 8,
            threads: 2,
        });
        // Where this kernel runs them, TCP and UDP stream flows, rr over
        // TCP and UDP, and crr run.
        let here = crate::event_loop::ring::unavailable();
        for (kind, protocol) in [
            (TestKind::Stream, Protocol::Tcp),
            (TestKind::Stream, Protocol::Udp),
            (TestKind::Rr, Protocol::Tcp),
            (TestKind::Rr, Protocol::Udp),
            (TestKind::Crr, Protocol::Tcp),
        ] {
            let spec = TestSpec {
                kind,
                protocol,
                flows,
                ..TestSpec::default()
            };
            assert_eq!(uring.refusal(&spec), here, "{kind:?} {protocol:?}");
        }
    }

    /// A uring server refuses stream and rr `--flows` exactly where its
    /// client would (this host's io_uring); its crr pools serve crr
    /// flows whatever its engine.
    #[test]
    fn issue_26_a_uring_server_refuses_what_its_client_would() {
        use linerate_proto::spec::Flows;
        let uring = EngineKind::Uring { sqpoll: false };
        let flows = Some(Flows {
            count: 8,
            threads: 2,
        });
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let spec = TestSpec {
                protocol,
                flows,
                ..TestSpec::default()
            };
            assert_eq!(uring.server_refusal(&spec), uring.refusal(&spec));
            assert_eq!(
                uring.server_refusal(&spec),
                crate::event_loop::ring::unavailable()
            );
        }
        // rr over TCP and UDP runs on the server's io_uring loops: the
        // host is asked.
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let rr = TestSpec {
                kind: TestKind::Rr,
                protocol,
                flows,
                ..TestSpec::default()
            };
            assert_eq!(
                uring.server_refusal(&rr),
                crate::event_loop::ring::unavailable(),
                "{protocol:?}"
            );
        }
        // crr is served by the server's crr pools whatever its engine.
        let crr = TestSpec {
            kind: TestKind::Crr,
            flows,
            ..TestSpec::default()
        };
        assert_eq!(uring.server_refusal(&crr), None);
        // The other engines' refusals are the client's.
        let sendfile = EngineKind::ZeroCopy { sendfile: true };
        let udp = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        assert_eq!(sendfile.server_refusal(&udp), sendfile.refusal(&udp));
        assert!(sendfile.server_refusal(&udp).is_some());
    }

    #[test]
    fn issue_25_xdp_runs_udp_streams_and_rr_and_refuses_the_rest_by_name() {
        use linerate_proto::spec::Direction;
        let xdp = EngineKind::Xdp(Xdp::default());
        let udp = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        assert_eq!(xdp.refusal(&udp), None);
        let reverse = TestSpec {
            direction: Direction::Reverse,
            ..udp.clone()
        };
        assert_eq!(xdp.refusal(&reverse), None);
        let tcp = TestSpec::default();
        assert!(xdp
            .refusal(&tcp)
            .is_some_and(|w| w.contains("UDP tests only")));
        let rr = TestSpec {
            kind: TestKind::Rr,
            ..udp.clone()
        };
        assert_eq!(xdp.refusal(&rr), None);
        for kind in [TestKind::Rr, TestKind::Crr] {
            let tcp = TestSpec {
                kind,
                ..TestSpec::default()
            };
            assert!(xdp
                .refusal(&tcp)
                .is_some_and(|w| w.contains("UDP tests only")));
        }
        let two = TestSpec {
            streams: 2,
            ..udp.clone()
        };
        assert_eq!(xdp.refusal(&two), None);
        let bidir = TestSpec {
            direction: Direction::Bidir,
            streams: 2,
            ..udp
        };
        assert_eq!(xdp.refusal(&bidir), None);
        // The options a report names, as flags.
        let k = EngineKind::Xdp(Xdp {
            mode: Some(XdpMode::Generic),
            zero_copy: Some(false),
            sleep: true,
        });
        assert_eq!(
            k.to_string(),
            "xdp --xdp-mode generic --xdp-copy --xdp-sleep"
        );
        assert_eq!(xdp.to_string(), "xdp");
    }

    #[test]
    fn a_batch_cuts_its_buffer_into_segments_with_a_short_last_one() {
        let buf = [0u8; 10];
        let b = TxBatch::new(&buf, 4);
        assert_eq!(b.count(), 3);
        let lens: Vec<usize> = b.datagrams().map(<[u8]>::len).collect();
        assert_eq!(lens, vec![4, 4, 2]);
    }

    #[test]
    fn a_gro_slot_splits_at_its_segment_size() {
        let mut s = RecvSlots::new(2, 100);
        let (_, m) = s.slot_mut(1);
        *m = RecvMeta {
            len: 70,
            segment: Some(32),
            ..RecvMeta::default()
        };
        let lens: Vec<usize> = s.datagrams(1).map(<[u8]>::len).collect();
        assert_eq!(lens, vec![32, 32, 6]);
        let (_, m) = s.slot_mut(0);
        m.len = 5;
        assert_eq!(s.datagrams(0).count(), 1);
        // An empty datagram is still one datagram (a corrupt one).
        s.slot_mut(0).1.len = 0;
        assert_eq!(s.datagrams(0).count(), 1);
        // A super-buffer of whole segments has no empty tail.
        s.slot_mut(1).1.len = 64;
        assert_eq!(s.datagrams(1).count(), 2);
    }
}
