//! The zero-copy engine: `MSG_ZEROCOPY` sends for TCP and UDP, with every
//! completion read from the socket's error queue.
//!
//! A `MSG_ZEROCOPY` send lends the kernel the sender's pages until the
//! completion notification (`SO_EE_ORIGIN_ZEROCOPY`, a range of send ids)
//! arrives on the error queue, so a buffer must not change before then:
//! - TCP sends straight from the stream's buffer, which the loop hands over
//!   unchanged on every call and never writes while the stream runs; all
//!   completions are awaited before the write side is shut down.
//! - UDP datagrams change every send (sequence number, time, pattern), so
//!   each send is copied into a staging slot that is reused only once its
//!   own completion arrived: one datagram per send in `TX_SLOTS` slots,
//!   or with GSO (the `batch` engine's `auto` rule, `batch::gso_plan`) a
//!   run of up to 128 datagrams with a `UDP_SEGMENT` control message in
//!   `GSO_TX_SLOTS` slots — the way zero copy pays off on a NIC, where
//!   the kernel then hands the pages to the device instead of copying.
//!
//! Each completion says whether the kernel copied anyway
//! (`SO_EE_CODE_ZEROCOPY_COPIED`): on loopback it always does (the data is
//! copied when it reaches the receiving socket), and the report counts it.
//! Zero copy is a sender's feature: a UDP receiver is the `batch` engine's
//! (`recvmmsg` with `UDP_GRO` where the kernel has it), since the sender
//! batches with GSO and a receiver reading one datagram per call would be
//! the bottleneck, measuring itself instead of the sender (round 10's bench
//! lost a median 43% of 64-byte and 30% of 1472-byte datagrams that way);
//! a TCP receiver is the `syscall` engine's.
//!
//! `zerocopy:sendfile` ([`super::sendfile`]) is this engine's other way to
//! TCP zero copy: `sendfile(2)` from a memory file holding the stream's
//! buffer, and `splice(2)` receives, for TCP stream tests only.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::time::Duration;

use linerate_proto::measure::{Batching, EngineUse, ZeroCopyUse};

use super::batch::mmsg::{MmsgTx, GSO_MSGS_PER_CALL};
use super::batch::{gso_plan, Batch, BatchUdpRx, GsoSends};
use super::endpoint::KernelUdp;
use super::kind::EngineKind;
use super::syscall::Syscall;
use super::syscall::SyscallTcpRx;
use super::tcp_endpoint::TcpEndpoint;
use super::traits::{Engine, TcpTx, TxBatch, UdpTx, Wait};
use crate::EngineError;

/// `SO_ZEROCOPY` (include/uapi/asm-generic/socket.h).
const SO_ZEROCOPY: libc::c_int = 60;
/// `SO_EE_ORIGIN_ZEROCOPY` (include/uapi/linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED`: the kernel fell back to copying.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// Datagrams per send batch without GSO (one `send` each).
const UDP_TX_BATCH: usize = 16;
/// UDP staging slots: how far the sender may run ahead of completions.
const TX_SLOTS: usize = 256;
/// GSO sends per batch: as many runs as the batch engine's `sendmmsg`
/// carries ([`GSO_MSGS_PER_CALL`]).
const GSO_TX_BATCH: usize = GSO_MSGS_PER_CALL;
/// Staging slots with GSO: each holds a run of up to 64 KiB, so fewer
/// (2 MiB in all) still let the sender run 8 batches ahead.
const GSO_TX_SLOTS: usize = 32;
/// TCP sends in flight before the sender reads completions (each holds
/// socket option memory; past `net.core.optmem_max` sends fail `ENOBUFS`).
const TCP_REAP_AT: u64 = 64;
/// The same for UDP: a completion that the kernel cannot merge with the
/// one before (e.g. IP-fragmented datagrams on a veth path) holds its own
/// socket option memory, and without reading them the sender met `ENOBUFS`
/// on nearly every send (192 datagrams sent against 1.1 M refusals in 2 s
/// at 8972 B on veth MTU 1500; 2026-11-24).
const UDP_REAP_AT: u64 = 64;
/// Longest wait for completions at a time (the loops' poll period).
const WAIT: Duration = crate::stream::POLL;

/// The zero-copy engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZeroCopy;

/// Whether `MSG_ZEROCOPY` works here, probed once per process: on UDP by
/// the shared capability probe ([`crate::caps`]), on TCP here.
pub fn check() -> Result<(), EngineError> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            crate::caps::caps()
                .msg_zerocopy
                .clone()
                .map_err(|m| m.to_string())?;
            let tcp = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .map_err(|e| format!("no TCP socket: {e}"))?;
            enable(&tcp).map_err(|e| {
                format!("the kernel refused SO_ZEROCOPY on a TCP socket ({e}; Linux 4.14+)")
            })
        })
        .clone()
        .map_err(|reason| EngineError::EngineUnavailable {
            engine: EngineKind::ZeroCopy { sendfile: false },
            reason,
        })
}

/// Turns `SO_ZEROCOPY` on (without it `MSG_ZEROCOPY` is ignored).
fn enable(sock: &impl AsRawFd) -> io::Result<()> {
    crate::socket::set_int(sock, libc::SOL_SOCKET, SO_ZEROCOPY, 1)
}

/// The sending socket's descriptor, kept so that the UDP sender can await
/// its last completions when dropped: the stream loop that makes the
/// sender borrows the socket for longer than the sender lives.
#[derive(Debug, Clone, Copy)]
struct Fd(libc::c_int);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> libc::c_int {
        self.0
    }
}

impl Engine for ZeroCopy {
    type UdpEndpoint = KernelUdp;
    type UdpTx = ZcUdpTx;
    type UdpRx = BatchUdpRx;
    type TcpTx = ZcTcpTx;
    type TcpRx = SyscallTcpRx;

    fn udp_endpoint(self, sock: UdpSocket) -> Result<KernelUdp, EngineError> {
        Ok(KernelUdp::new(sock))
    }
    fn udp_tx(self, ep: &KernelUdp, len: usize) -> Result<ZcUdpTx, EngineError> {
        let sock = ep.socket();
        check()?;
        enable(sock).map_err(|e| EngineError::io("SO_ZEROCOPY", e))?;
        let len = len.max(1);
        let mut notes = Vec::new();
        let segs = gso_plan(sock, len).unwrap_or_else(|why| {
            notes.push(format!("GSO off: {why}"));
            1
        });
        let (slots, reqs) = if segs > 1 {
            (GSO_TX_SLOTS, GSO_TX_BATCH)
        } else {
            (TX_SLOTS, UDP_TX_BATCH)
        };
        let slot = segs * len;
        Ok(ZcUdpTx {
            fd: Fd(sock.as_raw_fd()),
            staging: vec![0; slot * slots],
            slot,
            inflight: vec![None; slots],
            next_id: 0,
            zc: Completions::default(),
            gso: GsoSends::new(segs),
            reqs,
            tx: MmsgTx::new(1).with_flags(libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL),
            used: Batching {
                // Sends per engine call (one message per `sendmmsg` each), so
                // "datagrams per call" reads as it does for the other engines.
                messages_per_call: reqs as u32,
                gso_segments: (segs > 1).then_some(segs as u32),
                notes,
                ..Batching::default()
            },
        })
    }
    fn udp_rx(self, ep: &KernelUdp, len: usize) -> Result<BatchUdpRx, EngineError> {
        Batch::AUTO.udp_rx(ep, len)
    }
    fn udp_rx_attach(self, sock: &UdpSocket) {
        Batch::AUTO.udp_rx_attach(sock);
    }
    fn tcp_tx<S: TcpEndpoint>(self, sock: &S) -> Result<ZcTcpTx, EngineError> {
        check()?;
        enable(sock).map_err(|e| EngineError::io("SO_ZEROCOPY", e))?;
        Ok(ZcTcpTx {
            next_id: 0,
            zc: Completions::default(),
        })
    }
    fn tcp_rx<S: TcpEndpoint>(
        self,
        sock: &S,
        skip_copy: bool,
    ) -> Result<SyscallTcpRx, EngineError> {
        Syscall.tcp_rx(sock, skip_copy)
    }
}

/// Completion counts of one socket.
#[derive(Debug, Default, Clone, Copy)]
struct Completions {
    sends: u64,
    completed: u64,
    copied: u64,
}

/// A completion notification: sends `lo..=hi` (ids mod 2^32) are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    lo: u32,
    hi: u32,
    copied: bool,
}

impl Range {
    fn len(self) -> u64 {
        u64::from(self.hi.wrapping_sub(self.lo)) + 1
    }
}

/// Reads every queued completion (without waiting); calls `each` per range.
fn read_errqueue(sock: &impl AsRawFd, mut each: impl FnMut(Range)) -> io::Result<usize> {
    let mut n = 0;
    loop {
        let mut control = [0u64; 16];
        // SAFETY: msghdr is plain data; it points only at `control`.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg's pointers refer to live buffers for the call.
        let r = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(n),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        // SAFETY: the kernel filled msg's control buffer (alive); the
        // CMSG macros stay within msg_controllen and the payload is read
        // unaligned at its type's size.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (l, t) = ((*c).cmsg_level, (*c).cmsg_type);
                if (l == libc::SOL_IP && t == libc::IP_RECVERR)
                    || (l == libc::SOL_IPV6 && t == libc::IPV6_RECVERR)
                {
                    let ee = std::ptr::read_unaligned(
                        libc::CMSG_DATA(c).cast::<libc::sock_extended_err>(),
                    );
                    if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                        each(Range {
                            lo: ee.ee_info,
                            hi: ee.ee_data,
                            copied: ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                        });
                        n += 1;
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
    }
}

/// Waits up to `t` for the error queue to have something (`POLLERR`).
fn wait_errqueue(sock: &impl AsRawFd, t: Duration) {
    let mut p = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call.
    unsafe { libc::poll(&mut p, 1, t.as_millis().min(i32::MAX as u128) as i32) };
}

fn send_flags(wait: Wait) -> libc::c_int {
    libc::MSG_ZEROCOPY
        | libc::MSG_NOSIGNAL
        | match wait {
            Wait::Block => 0,
            Wait::DontWait => libc::MSG_DONTWAIT,
        }
}

fn send(sock: &impl AsRawFd, buf: &[u8], wait: Wait) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes; with MSG_ZEROCOPY the
    // kernel keeps referencing its pages until the completion, which the
    // callers await before the buffer changes (see the module docs).
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            send_flags(wait),
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn engine_use(zc: Completions, notes: Vec<String>) -> EngineUse {
    EngineUse {
        engine: "zerocopy".into(),
        zerocopy: Some(ZeroCopyUse {
            sends: zc.sends,
            completed: zc.completed,
            copied: zc.copied,
            under_threshold: 0,
        }),
        notes,
        ..EngineUse::default()
    }
}

/// TCP sending state: send ids issued and completions counted.
#[derive(Debug)]
pub struct ZcTcpTx {
    next_id: u64,
    zc: Completions,
}

impl ZcTcpTx {
    fn reap(&mut self, sock: &impl AsRawFd) -> io::Result<()> {
        let zc = &mut self.zc;
        read_errqueue(sock, |r| {
            zc.completed += r.len();
            if r.copied {
                zc.copied += r.len();
            }
        })
        .map(drop)
    }
    fn pending(&self) -> u64 {
        self.zc.sends - self.zc.completed
    }
}

impl TcpTx for ZcTcpTx {
    fn lent(&self) -> bool {
        self.pending() > 0
    }

    fn write<S: TcpEndpoint>(&mut self, sock: &S, buf: &[u8], wait: Wait) -> io::Result<usize> {
        if self.pending() >= TCP_REAP_AT {
            self.reap(sock)?;
        }
        match send(sock, buf, wait) {
            Ok(n) => {
                self.next_id += 1;
                self.zc.sends += 1;
                Ok(n)
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                // Too many sends in flight for the socket's option memory:
                // wait for completions, then the loop offers the data again.
                wait_errqueue(sock, WAIT);
                self.reap(sock)?;
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(e) => Err(e),
        }
    }

    fn finish<S: TcpEndpoint>(&mut self, sock: &S) -> io::Result<()> {
        // Completions come as the peer acknowledges the data.
        for _ in 0..100 {
            self.reap(sock)?;
            if self.pending() == 0 {
                return Ok(());
            }
            wait_errqueue(sock, WAIT);
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{} MSG_ZEROCOPY completions did not arrive", self.pending()),
        ))
    }

    fn collect<S: TcpEndpoint>(&mut self, sock: &S) -> io::Result<()> {
        self.reap(sock)
    }
}

impl Drop for ZcTcpTx {
    fn drop(&mut self) {
        let mut notes = Vec::new();
        if self.pending() > 0 {
            notes.push(format!(
                "{} MSG_ZEROCOPY completions had not arrived when the stream ended",
                self.pending()
            ));
        }
        super::usage::record_use(engine_use(self.zc, notes));
    }
}

/// UDP sending state: the staging slots and which send id holds each.
pub struct ZcUdpTx {
    fd: Fd,
    staging: Vec<u8>,
    slot: usize,
    /// The send id (mod 2^32) whose completion slot i awaits.
    inflight: Vec<Option<u32>>,
    next_id: u64,
    zc: Completions,
    /// Datagrams per send (1: GSO off), and what the first sends taught.
    gso: GsoSends,
    /// Sends per batch.
    reqs: usize,
    /// One message per call: one send id per send.
    tx: MmsgTx,
    used: Batching,
}

impl std::fmt::Debug for ZcUdpTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZcUdpTx")
            .field("next_id", &self.next_id)
            .finish()
    }
}

impl ZcUdpTx {
    /// Send id `id` uses slot `id % slots`: ids are given only to sends
    /// that succeeded, in order, so the slot of a failed send is simply
    /// used again.
    fn slot_of(id: u64, slots: usize) -> usize {
        (id % slots as u64) as usize
    }

    fn reap(&mut self) -> io::Result<()> {
        let (zc, inflight) = (&mut self.zc, &mut self.inflight);
        let slots = inflight.len();
        read_errqueue(&self.fd, |r| {
            zc.completed += r.len();
            if r.copied {
                zc.copied += r.len();
            }
            let mut id = r.lo;
            loop {
                let s = Self::slot_of(u64::from(id), slots);
                if inflight[s] == Some(id) {
                    inflight[s] = None;
                }
                if id == r.hi {
                    break;
                }
                id = id.wrapping_add(1);
            }
        })
        .map(drop)
    }
}

impl UdpTx<KernelUdp> for ZcUdpTx {
    fn max_batch(&self) -> usize {
        self.reqs * self.gso.segs
    }

    fn send_batch(&mut self, ep: &KernelUdp, batch: TxBatch<'_>, wait: Wait) -> io::Result<usize> {
        let sock = ep.socket();
        let mut r = self.send_runs(sock, &batch, wait);
        let err = r.as_ref().err().and_then(io::Error::raw_os_error);
        if self.gso.retry_smaller(&batch, err, &mut self.used) {
            r = self.send_runs(sock, &batch, wait);
        }
        self.gso.outcome(&batch, r)
    }

    fn batching(&self) -> Option<Batching> {
        Some(self.used.clone())
    }
}

impl ZcUdpTx {
    /// Sends the batch as runs of up to `gso.segs` datagrams (one each
    /// without GSO), each from its own staging slot; returns the datagrams
    /// of the runs the kernel took, or the first run's error.
    fn send_runs(
        &mut self,
        sock: &UdpSocket,
        batch: &TxBatch<'_>,
        wait: Wait,
    ) -> io::Result<usize> {
        let segment = batch.segment();
        let per_run = self.gso.per_send(segment, self.slot);
        let slots = self.inflight.len();
        if self.zc.sends - self.zc.completed >= UDP_REAP_AT {
            self.reap()?;
        }
        let mut sent = 0;
        for run in batch.bytes().chunks(per_run * segment).take(self.reqs) {
            let s = Self::slot_of(self.next_id, slots);
            if self.inflight[s].is_some() {
                self.reap()?;
                if self.inflight[s].is_some() && wait == Wait::Block && sent == 0 {
                    wait_errqueue(sock, WAIT);
                    self.reap()?;
                }
                if self.inflight[s].is_some() {
                    // The slot's last send is still lent to the kernel.
                    return if sent > 0 {
                        Ok(sent)
                    } else {
                        Err(io::ErrorKind::WouldBlock.into())
                    };
                }
            }
            let at = s * self.slot;
            let n = run.len().min(self.slot);
            self.staging[at..at + n].copy_from_slice(&run[..n]);
            // One message: a run with its UDP_SEGMENT control message, or a
            // lone datagram; with MSG_ZEROCOPY either is one send id.
            let r = self.tx.send(
                sock,
                &self.staging[at..at + n],
                segment,
                per_run,
                wait == Wait::DontWait,
            );
            match r {
                Ok(k) => {
                    self.inflight[s] = Some(self.next_id as u32);
                    self.next_id += 1;
                    self.zc.sends += 1;
                    sent += k;
                }
                Err(e) if sent == 0 => {
                    if e.raw_os_error() == Some(libc::ENOBUFS) {
                        // Completions waiting to be read hold the memory
                        // the kernel lacked: read them before the retry.
                        self.reap()?;
                    }
                    return Err(e);
                }
                Err(_) => break,
            }
        }
        Ok(sent)
    }
}

impl Drop for ZcUdpTx {
    fn drop(&mut self) {
        // The staging slots must outlive every send that lent them: await
        // the last completions (a datagram completes once delivered or
        // dropped, so this is quick; bounded in any case).
        for _ in 0..10 {
            if self.reap().is_err() || self.zc.sends == self.zc.completed {
                break;
            }
            wait_errqueue(&self.fd, WAIT);
        }
        let mut notes = Vec::new();
        let pending = self.zc.sends - self.zc.completed;
        if pending > 0 {
            notes.push(format!(
                "{pending} MSG_ZEROCOPY completions had not arrived when the stream ended"
            ));
        }
        super::usage::record_use(engine_use(self.zc, notes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{take_use, TcpRx};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn every_tcp_send_completes_before_finish_returns() {
        if let Err(e) = check() {
            eprintln!("skipped: {e}");
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        let reader = std::thread::spawn(move || {
            let mut r = ZeroCopy.tcp_rx(&b, false).expect("rx");
            let mut buf = vec![0u8; 65536];
            let mut total = 0;
            while let Ok(n @ 1..) = r.read(&b, &mut buf, Wait::Block) {
                total += n;
            }
            total
        });
        let mut w = ZeroCopy.tcp_tx(&a).expect("tx");
        let buf = vec![5u8; 128 * 1024];
        let mut left = 16usize << 20;
        while left > 0 {
            match w.write(&a, &buf[..buf.len().min(left)], Wait::Block) {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        w.finish(&a).expect("completions");
        a.shutdown(std::net::Shutdown::Write).expect("shutdown");
        drop(w);
        assert_eq!(reader.join().expect("reader"), 16 << 20);
        let z = take_use().and_then(|u| u.zerocopy).expect("zero-copy use");
        assert!(z.sends > 0);
        assert_eq!(z.completed, z.sends);
        // Loopback copies when the data reaches the receiving socket.
        assert_eq!(z.copied, z.completed);
    }

    #[test]
    fn a_sender_whose_zero_copy_sends_are_out_has_lent_its_buffer() {
        if let Err(e) = check() {
            eprintln!("skipped: {e}");
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        // Nobody reads `b`: once its receive buffer is full, the bytes wait
        // in `a`'s send queue, in the pages of `buf`, and their completions
        // do not come (the stream loop must then never free `buf`).
        let mut w = ZeroCopy.tcp_tx(&a).expect("tx");
        let buf = vec![5u8; 128 * 1024];
        let mut wrote = 0usize;
        for _ in 0..1000 {
            match w.write(&a, &buf, Wait::DontWait) {
                Ok(n) => wrote += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        assert!(wrote > 0);
        assert!(w.lent(), "{wrote} bytes queued, none lent");
        drop(w);
        // The unread peer closes first: its reset purges `a`'s queue.
        drop(b);
        drop(a);
        let _ = take_use();
    }

    #[test]
    fn udp_slots_wait_for_their_completions() {
        if let Err(e) = check() {
            eprintln!("skipped: {e}");
            return;
        }
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        let tx = KernelUdp::new(tx);
        let mut t = ZeroCopy.udp_tx(&tx, 200).expect("tx");
        let d = [9u8; 200];
        // More sends than slots: each slot is reused only after its
        // completion, and the count still comes out whole.
        let mut sent = 0;
        while sent < 3 * TX_SLOTS {
            match t.send_batch(&tx, TxBatch::new(&d, 200), Wait::Block) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("send: {e}"),
            }
        }
        drop(t);
        let z = take_use().and_then(|u| u.zerocopy).expect("zero-copy use");
        assert_eq!(z.sends, 3 * TX_SLOTS as u64);
        assert_eq!(z.completed, z.sends);
    }

    /// With GSO a send is a run of datagrams: one send id, one staging
    /// slot and one completion per run, every datagram counted.
    #[test]
    fn issue_8_gso_runs_are_one_zero_copy_send_each() {
        if let Err(e) = check() {
            eprintln!("skipped: {e}");
            return;
        }
        if let Err(e) = &crate::caps::caps().udp_segment {
            eprintln!("skipped: no UDP GSO: {e}");
            return;
        }
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        let tx = KernelUdp::new(tx);
        let mut t = ZeroCopy.udp_tx(&tx, 200).expect("tx");
        let b = t.batching().expect("batching");
        let segs = b.gso_segments.expect("GSO on") as usize;
        assert_eq!(t.max_batch(), GSO_TX_BATCH * segs);
        let buf = vec![9u8; 200 * t.max_batch()];
        // More runs than slots: each slot is reused only after its
        // completion, and the count still comes out whole.
        let (mut sent, mut calls) = (0, 0);
        while sent < 3 * GSO_TX_SLOTS * segs && calls < 10_000 {
            calls += 1;
            match t.send_batch(&tx, TxBatch::new(&buf, 200), Wait::Block) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("send: {e}"),
            }
        }
        assert!(sent >= 3 * GSO_TX_SLOTS * segs, "{sent} in {calls} calls");
        let segs_now = t.batching().and_then(|b| b.gso_segments).expect("GSO") as usize;
        drop(t);
        let z = take_use().and_then(|u| u.zerocopy).expect("zero-copy use");
        assert_eq!(z.sends as usize, sent.div_ceil(segs_now), "{z:?}");
        assert_eq!(z.completed, z.sends);
    }
}
