//! What the io_uring engine's TCP and UDP objects share: the engine value
//! and its probed capabilities, one ring per socket with its bounded wait,
//! cancellation and zero-copy completion tracking.

use super::buf_ring;
use crate::engines::EngineKind;
use crate::EngineError;
use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};
use linerate_proto::measure::{EngineUse, ZeroCopyUse};
use std::io;
use std::sync::OnceLock;
use std::time::Duration;

/// Longest blocking wait for a completion: the period at which the loops
/// look at their stop and abort flags (the syscall engine's socket timeout).
pub(super) const WAIT: Duration = crate::stream::POLL;

/// Submission queue entries per ring: one UDP send batch (linked) plus the
/// multishot receive and cancellations fit with room to spare.
pub(super) const RING_ENTRIES: u32 = 128;

/// Completion queue entries: a zero-copy send posts two CQEs, and a
/// multishot receive one per datagram; 8× the submission queue keeps a
/// full buffer ring's worth of completions without overflowing (an
/// overflow is not lost, `IORING_FEAT_NODROP`, but costs a syscall).
pub(super) const CQ_ENTRIES: u32 = 1024;

/// The smallest send that goes out zero-copy (`SEND_ZC`, `SENDMSG_ZC`);
/// smaller ones copy (`SEND`, `SENDMSG`). Zero copy pins the pages and
/// posts a notification per send, which costs more than copying a small
/// buffer: the kernel's guide puts the break-even "at writes over around
/// 10 KB" (Documentation/networking/msg_zerocopy.rst). Measured here: a
/// 64-byte busy-polled `rr` over loopback ran at half the transactions/s
/// with every send zero-copy (the notification, completed from the peer's
/// ACK, took the socket lock the next receive was waiting for).
pub(super) const ZC_MIN_LEN: usize = 10 * 1024;

/// `IORING_SEND_ZC_REPORT_USAGE` (include/uapi/linux/io_uring.h): the
/// notification CQE says whether the kernel copied the data.
pub(super) const ZC_REPORT_USAGE: u16 = 8;

/// `IORING_NOTIF_USAGE_ZC_COPIED`: set in a notification's result when the
/// kernel had to copy.
pub(super) const ZC_COPIED: u32 = 1 << 31;

/// Kernel thread idle time before it sleeps, for `uring:sqpoll`: long
/// enough to span the gaps of a paced sender, short enough that an idle
/// ring does not keep a CPU spinning (on small hosts the thread competes
/// with the test's own threads).
pub(super) const SQPOLL_IDLE_MS: u32 = 10;

/// The io_uring engine and its one option.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Uring {
    /// Let a kernel thread poll the submission queue (`IORING_SETUP_SQPOLL`).
    pub sqpoll: bool,
}

/// What this kernel's io_uring offers, probed once per process.
#[derive(Debug, Clone)]
pub struct UringCaps {
    /// `IORING_OP_SEND_ZC` (Linux 6.0).
    pub send_zc: bool,
    /// `IORING_OP_SENDMSG_ZC` (Linux 6.1), for GSO sends.
    pub sendmsg_zc: bool,
    /// Multishot `RECVMSG` into a provided buffer ring (Linux 6.0); probed
    /// by registering a ring, since the opcode probe cannot tell.
    pub multishot: Result<(), String>,
}

/// Whether io_uring can run here, and what it offers: the reason when it
/// cannot (sysctl `kernel.io_uring_disabled`, a seccomp filter, no kernel
/// support), probed once per process.
pub fn caps() -> Result<&'static UringCaps, EngineError> {
    static CAPS: OnceLock<Result<UringCaps, String>> = OnceLock::new();
    CAPS.get_or_init(probe)
        .as_ref()
        .map_err(|reason| EngineError::EngineUnavailable {
            engine: EngineKind::Uring { sqpoll: false },
            reason: reason.clone(),
        })
}

pub(super) fn probe() -> Result<UringCaps, String> {
    let ring: IoUring = IoUring::new(4).map_err(|e| refusal(&e))?;
    let mut p = Probe::new();
    let probed = ring.submitter().register_probe(&mut p).is_ok();
    let send_zc = probed && p.is_supported(opcode::SendZc::CODE);
    let sendmsg_zc = probed && p.is_supported(opcode::SendMsgZc::CODE);
    let multishot = buf_ring::BufRing::new(&ring, 2, 64, 0)
        .map(|r| r.unregister(&ring))
        .map_err(|e| format!("no provided buffer rings ({e}; Linux 5.19+)"));
    Ok(UringCaps {
        send_zc,
        sendmsg_zc,
        multishot,
    })
}

/// Why `io_uring_setup` failed, in words a user can act on.
pub(super) fn refusal(e: &io::Error) -> String {
    // The sysctl as the shared capability probe read it (1 is no refusal
    // there for a member of kernel.io_uring_group, so it only explains one).
    let sysctl = match &crate::caps::caps().io_uring {
        Ok(v) => *v,
        Err(crate::caps::Missing::IoUringDisabled { value }) => Some(*value),
        Err(_) => None,
    };
    match (e.raw_os_error(), sysctl) {
        (Some(libc::EPERM), Some(2)) => {
            "io_uring is disabled by sysctl kernel.io_uring_disabled = 2".into()
        }
        (Some(libc::EPERM), Some(1)) => "io_uring is limited by sysctl \
             kernel.io_uring_disabled = 1 to members of kernel.io_uring_group, \
             and this process is not one"
            .into(),
        (Some(libc::EPERM), _) => {
            format!("io_uring_setup was refused ({e}): a seccomp filter or security policy forbids it")
        }
        (Some(libc::ENOSYS), _) => format!(
            "io_uring_setup is not available ({e}): the kernel lacks io_uring or a seccomp filter blocks it"
        ),
        _ => format!("io_uring_setup failed: {e}"),
    }
}

/// One ring and the calls the engine's I/O objects make on it (and the
/// completion-based event loops, [`crate::event_loop::ring`]).
pub(crate) struct Ring {
    pub(super) ring: IoUring,
    pub(super) sqpoll: bool,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("sqpoll", &self.sqpoll)
            .finish()
    }
}

impl Ring {
    pub(super) fn new(engine: Uring) -> Result<Ring, EngineError> {
        Ring::sized(engine, RING_ENTRIES, CQ_ENTRIES)
    }

    /// A ring of `entries` submission and `cq` completion entries.
    pub(crate) fn sized(engine: Uring, entries: u32, cq: u32) -> Result<Ring, EngineError> {
        caps()?;
        let mut b = IoUring::builder();
        b.setup_cqsize(cq);
        if engine.sqpoll {
            b.setup_sqpoll(SQPOLL_IDLE_MS);
        }
        let ring = b
            .build(entries)
            .map_err(|e| EngineError::EngineUnavailable {
                engine: EngineKind::Uring {
                    sqpoll: engine.sqpoll,
                },
                reason: if engine.sqpoll {
                    format!("a ring with SQPOLL could not be set up: {e}")
                } else {
                    refusal(&e)
                },
            })?;
        Ok(Ring {
            ring,
            sqpoll: engine.sqpoll,
        })
    }

    /// Queues `e`, submitting what is queued first when the queue is full.
    pub(crate) fn push(&mut self, e: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer and msghdr an entry points to is owned by
            // the I/O object that pushes it and outlives the request: the
            // objects wait for (or cancel and then wait for) every request
            // before they release or reuse what it points to.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    /// Queues `entries` at once: the kernel (an SQPOLL thread included)
    /// sees them together, so a linked chain is never cut at a submission
    /// boundary (the kernel would end the chain there and run the rest
    /// beside it, out of order). Submits what is queued first if the
    /// queue has no room for all of them.
    pub(crate) fn push_all(&mut self, entries: &[squeue::Entry]) -> io::Result<()> {
        loop {
            // SAFETY: as in `push`: what the entries point to outlives the
            // requests.
            if unsafe { self.ring.submission().push_multiple(entries) }.is_ok() {
                return Ok(());
            }
            if self.ring.submission().is_empty() {
                return Err(io::Error::other("a batch longer than the submission queue"));
            }
            self.ring.submit()?;
        }
    }

    /// Submits what is queued and waits up to `timeout` for `want`
    /// completions (`None`: do not wait). Timing out is not an error: the
    /// caller looks at what completed.
    pub(crate) fn submit_wait(&mut self, want: usize, timeout: Option<Duration>) -> io::Result<()> {
        let r = match timeout {
            None => self.ring.submit(),
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The next completion, if one is there.
    pub(crate) fn next(&mut self) -> Option<cqueue::Entry> {
        self.ring.completion().next()
    }

    /// A provided buffer ring of `entries` buffers of `size` bytes, group
    /// `bgid`, registered with this ring.
    pub(crate) fn buf_ring(
        &self,
        entries: u16,
        size: usize,
        bgid: u16,
    ) -> io::Result<buf_ring::BufRing> {
        buf_ring::BufRing::new(&self.ring, entries, size, bgid)
    }

    /// Unregisters `bufs` (no request may still write to them).
    pub(crate) fn drop_buf_ring(&self, bufs: buf_ring::BufRing) {
        bufs.unregister(&self.ring);
    }

    /// Asks the kernel to cancel every request in flight on this ring.
    pub(crate) fn cancel_all(&mut self) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(TAG_CANCEL);
        self.push(&e)?;
        self.submit_wait(0, None)
    }

    /// Asks the kernel to cancel the request tagged `user_data`; its final
    /// completion (done or `-ECANCELED`) still comes through [`Self::next`].
    pub(crate) fn cancel(&mut self, user_data: u64) -> io::Result<()> {
        self.queue_cancel(user_data)?;
        self.submit_wait(0, None)
    }

    /// Queues the cancel of [`Self::cancel`] without submitting it: the
    /// next submit carries it, with every other cancel queued meanwhile (a
    /// loop stopping 500 flows makes one `io_uring_enter`, not 500).
    pub(crate) fn queue_cancel(&mut self, user_data: u64) -> io::Result<()> {
        let e = opcode::AsyncCancel::new(user_data)
            .build()
            .user_data(TAG_CANCEL);
        self.push(&e)
    }
}

/// When a request still pending should be cancelled: [`WAIT`] after the
/// first wait that ended without its completion (a wait also ends on any
/// other completion, e.g. an earlier send's notification). The clock is read
/// only on this slow path.
#[derive(Debug, Default)]
pub(super) struct CancelAfter {
    pub(super) deadline: Option<std::time::Instant>,
    pub(super) cancelled: bool,
}

impl CancelAfter {
    /// True once, when the request has waited [`WAIT`] in all.
    pub(super) fn due(&mut self) -> bool {
        if self.cancelled {
            return false;
        }
        let now = std::time::Instant::now();
        let d = *self.deadline.get_or_insert(now + WAIT);
        if now >= d {
            self.cancelled = true;
        }
        self.cancelled
    }
}

/// Completions of cancel requests carry this tag and are ignored.
pub(crate) const TAG_CANCEL: u64 = u64::MAX;

/// Zero-copy send bookkeeping shared by the TCP and UDP senders.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ZcCount {
    pub(super) sends: u64,
    pub(super) completed: u64,
    pub(super) copied: u64,
    /// Sends under [`ZC_MIN_LEN`] that went out, without zero copy.
    pub(super) small: u64,
}

/// Whether a send of `len` bytes is worth zero copy.
pub(super) fn zc_worth(len: usize) -> bool {
    len >= ZC_MIN_LEN
}

impl ZcCount {
    /// Counts one notification CQE (`IORING_CQE_F_NOTIF`).
    pub(super) fn notified(&mut self, res: i32) {
        self.completed += 1;
        if (res as u32) & ZC_COPIED != 0 {
            self.copied += 1;
        }
    }
    pub(super) fn as_use(self) -> ZeroCopyUse {
        ZeroCopyUse {
            sends: self.sends,
            completed: self.completed,
            copied: self.copied,
            under_threshold: self.small,
        }
    }
}

/// The report record every uring I/O object leaves when it is dropped.
pub(super) fn engine_use(
    sqpoll: bool,
    registered: bool,
    multishot: bool,
    zc: Option<ZcCount>,
    notes: Vec<String>,
) -> EngineUse {
    EngineUse {
        engine: "uring".into(),
        registered_buffers: registered,
        sqpoll,
        multishot_recv: multishot,
        zerocopy: zc.map(ZcCount::as_use),
        notes,
        ..EngineUse::default()
    }
}

/// An io error from a negative CQE result.
pub(crate) fn cqe_err(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

/// Registers one buffer (fixed buffer index 0) with `ring`.
pub(super) fn register(ring: &IoUring, buf: &[u8]) -> io::Result<()> {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the buffer stays allocated and in place while registered: its
    // owner unregisters it (or drops the ring) before freeing or moving it.
    unsafe { ring.submitter().register_buffers(&[iov]) }
}
