//! `zerocopy:sendfile`: the zero-copy engine's TCP stream variant, with
//! `sendfile(2)` for sending and `splice(2)` for receiving (issue 8).
//!
//! A TCP stream sender writes one unchanging buffer over and over
//! ([`crate::tcp`]), so its bytes can live in a file: the buffer is written
//! once into a `memfd_create` memory file (repeated to at least
//! [`FILE_MIN`] bytes, then sealed so nothing can change it), and every
//! write becomes `sendfile(sock, memfd, &offset, n)`. The kernel hands the
//! file's page-cache pages to the socket by reference: there is no copy
//! from user space and no completion to wait for (unlike `MSG_ZEROCOPY`,
//! the pages belong to the file, not to the sender's buffer, so nothing
//! has to be held back until the peer acknowledges them). The offset wraps
//! within the first copy of the buffer, so the stream is the buffer
//! repeated, as with every other engine.
//!
//! A TCP stream receiver never looks at the bytes (the rule that allows
//! `--skip-rx-copy`), so it splices them from the socket into a pipe and
//! from the pipe into `/dev/null`: the pages move by reference and no byte
//! reaches user space. Counting is the same as every receiver's: the bytes
//! each call took off the socket.
//!
//! Everything else — rr's messages, which change with every send and whose
//! framing the reader parses — goes through `write`/`read` as with the
//! syscall engine ([`Engine::tcp_tx`], [`Engine::tcp_rx`]); the CLI refuses
//! the engine for such tests ([`EngineKind::refusal`]), and for UDP, where
//! a datagram changes with every send. The report counts the calls of each
//! kind ([`CallsBytes`]) and notes any plain fallback.
//!
//! `sendfile` and `splice` take no `MSG_DONTWAIT`: they wait as the
//! socket's `O_NONBLOCK` says (and, when blocking, up to its
//! `SO_SNDTIMEO`/`SO_RCVTIMEO`). A busy-polling stream's socket is
//! non-blocking already (`wait::prepare_stream`); for any other
//! socket the first [`Wait::DontWait`] call sets `O_NONBLOCK` (once, not per
//! call), so `EAGAIN` comes back as `WouldBlock` as with the other engines.
//! A [`Wait::Block`] call on a non-blocking socket returns `WouldBlock`, as
//! `write(2)` does there. `SIGPIPE` needs no flag: the Rust runtime ignores
//! it, so a closed peer is `EPIPE`.

use std::fs::File;
use std::io::{self, Write};
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use linerate_proto::measure::{CallsBytes, EngineUse};

use super::endpoint::KernelUdp;
use super::kind::EngineKind;
use super::syscall::{SyscallTcp, SyscallTcpRx, SyscallUdpRx, SyscallUdpTx};
use super::tcp_endpoint::TcpEndpoint;
use super::traits::{Engine, TcpRx, TcpTx, Wait};
use crate::EngineError;

/// This engine's kind.
const KIND: EngineKind = EngineKind::ZeroCopy { sendfile: true };
/// Its name in reports.
const NAME: &str = "zerocopy:sendfile";
/// The memory file holds the stream's buffer repeated to at least this
/// many bytes (and at least twice): one `sendfile` then sends up to all
/// but one copy, as the batch engine's `writev` sends several buffers.
pub const FILE_MIN: usize = 1 << 20;
/// The receive pipe's capacity asked for (`F_SETPIPE_SZ`): the default
/// `fs.pipe-max-size`, which an unprivileged process may ask for. A
/// `splice` takes at most this many bytes off the socket.
pub const PIPE_SIZE: usize = 1 << 20;

/// The `zerocopy:sendfile` engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendFile;

/// Whether `memfd_create`, `sendfile` from a memory file and `splice` into
/// `/dev/null` work here (a kernel too old, or a seccomp filter, refuses
/// one), probed once per process.
pub fn check() -> Result<(), EngineError> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(probe)
        .clone()
        .map_err(|reason| EngineError::EngineUnavailable {
            engine: KIND,
            reason,
        })
}

/// Moves one page through every call the engine makes, with a pipe in
/// place of the socket.
fn probe() -> Result<(), String> {
    let page = [0x5a_u8; 4096];
    let file = memfd_with(&page, 1)
        .map_err(|e| format!("memfd_create or its seals failed ({e}; Linux 3.17+)"))?;
    let pipe = Pipe::new().map_err(|e| format!("no pipe or no /dev/null ({e})"))?;
    let n = sendfile(&pipe.w, &file, page.len())
        .map_err(|e| format!("sendfile(2) from a memory file failed ({e}; Linux 2.6.33+)"))?;
    if n == 0 {
        return Err("sendfile(2) from a memory file sent nothing".into());
    }
    pipe.drain(n)
        .map_err(|e| format!("splice(2) into /dev/null failed ({e}; Linux 2.6.17+)"))
}

/// The reason the engine refuses UDP (the CLI says it first).
fn tcp_only() -> EngineError {
    EngineError::EngineUnavailable {
        engine: KIND,
        reason: "TCP stream tests only (sendfile and splice move a byte stream; for UDP \
                 zero-copy sends use --engine zerocopy)"
            .into(),
    }
}

impl Engine for SendFile {
    // Never made: the UDP constructors refuse.
    type UdpEndpoint = KernelUdp;
    type UdpTx = SyscallUdpTx;
    type UdpRx = SyscallUdpRx;
    type TcpTx = SendFileTx;
    type TcpRx = SpliceRx;

    fn udp_endpoint(self, _sock: UdpSocket) -> Result<KernelUdp, EngineError> {
        Err(tcp_only())
    }
    fn udp_tx(self, _ep: &KernelUdp, _len: usize) -> Result<SyscallUdpTx, EngineError> {
        Err(tcp_only())
    }
    fn udp_rx(self, _ep: &KernelUdp, _len: usize) -> Result<SyscallUdpRx, EngineError> {
        Err(tcp_only())
    }
    fn tcp_tx<S: TcpEndpoint>(self, sock: &S) -> Result<SendFileTx, EngineError> {
        check()?;
        SendFileTx::new(sock, None)
    }
    fn tcp_rx<S: TcpEndpoint>(self, sock: &S, skip_copy: bool) -> Result<SpliceRx, EngineError> {
        check()?;
        SpliceRx::new(sock, skip_copy, false)
    }
    fn tcp_tx_stream<S: TcpEndpoint>(
        self,
        sock: &S,
        buf: &[u8],
    ) -> Result<SendFileTx, EngineError> {
        check()?;
        let file = StreamFile::new(buf).map_err(|e| EngineError::io("memfd_create", e))?;
        SendFileTx::new(sock, Some(file))
    }
    fn tcp_rx_stream<S: TcpEndpoint>(
        self,
        sock: &S,
        skip_copy: bool,
    ) -> Result<SpliceRx, EngineError> {
        check()?;
        SpliceRx::new(sock, skip_copy, true)
    }
}

/// A sealed memory file holding `buf` `copies` times over.
fn memfd_with(buf: &[u8], copies: usize) -> io::Result<File> {
    // SAFETY: the name is a NUL-terminated string literal; the flags are
    // valid for memfd_create.
    let fd = unsafe {
        libc::memfd_create(
            c"linerate-sendfile".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by memfd_create and nothing else owns it.
    let mut file = unsafe { File::from_raw_fd(fd) };
    {
        // Buffered: with a small --len the copies are many (1 MiB of 1-byte
        // buffers), and this runs inside the timed stream.
        let mut w = io::BufWriter::with_capacity(1 << 16, &mut file);
        for _ in 0..copies {
            w.write_all(buf)?;
        }
        w.flush()?;
    }
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on an open descriptor with an integer argument.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// `sendfile(out, file, &0, n)`: the probe's one send.
fn sendfile(out: &impl AsRawFd, file: &File, n: usize) -> io::Result<usize> {
    let mut off: libc::off_t = 0;
    // SAFETY: both descriptors are open for the call; `off` is a live
    // off_t the kernel reads and advances.
    let r = unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), &mut off, n) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Sets `O_NONBLOCK` on `sock` (what `MSG_DONTWAIT` does per call for the
/// other engines).
fn set_nonblocking(sock: &impl TcpEndpoint) -> io::Result<()> {
    sock.set_nonblocking(true)
}

/// Whether `sock` is non-blocking now (read once per I/O object).
fn is_nonblocking(sock: &impl AsRawFd) -> Result<bool, EngineError> {
    // SAFETY: fcntl F_GETFL on an open descriptor.
    let fl = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_GETFL) };
    if fl < 0 {
        return Err(EngineError::io("F_GETFL", io::Error::last_os_error()));
    }
    Ok(fl & libc::O_NONBLOCK != 0)
}

/// The stream's buffer in a memory file, and where the next send starts.
#[derive(Debug)]
struct StreamFile {
    file: File,
    /// The buffer's length: the period of the file's bytes.
    len: usize,
    /// Copies of the buffer in the file (at least 2).
    copies: usize,
    /// Where the next send starts: always below `len`.
    off: libc::off_t,
}

impl StreamFile {
    fn new(buf: &[u8]) -> io::Result<StreamFile> {
        let len = buf.len().max(1);
        let copies = FILE_MIN.div_ceil(len).max(2);
        Ok(StreamFile {
            file: memfd_with(buf, copies)?,
            len,
            copies,
            off: 0,
        })
    }
}

/// TCP sending: `sendfile` from the stream's memory file, or plain writes
/// for writers of changing bytes (`file` absent).
#[derive(Debug)]
pub struct SendFileTx {
    file: Option<StreamFile>,
    /// The socket is non-blocking (found so, or set by a `DontWait` call).
    nonblock: bool,
    used: CallsBytes,
}

impl SendFileTx {
    fn new(sock: &impl AsRawFd, file: Option<StreamFile>) -> Result<Self, EngineError> {
        Ok(SendFileTx {
            file,
            nonblock: is_nonblocking(sock)?,
            used: CallsBytes::default(),
        })
    }

    /// Sends `n` bytes of the stream from the file (at most all but one
    /// copy of the buffer, so a send from any offset below `len` stays
    /// within the file).
    #[inline]
    fn send(&mut self, sock: &impl TcpEndpoint, n: usize, wait: Wait) -> io::Result<usize> {
        if wait == Wait::DontWait && !self.nonblock {
            set_nonblocking(sock)?;
            self.nonblock = true;
        }
        let Some(f) = &mut self.file else {
            return Ok(0);
        };
        let n = n.min(f.len * (f.copies - 1));
        // SAFETY: both descriptors are open for the call; `f.off` is a
        // valid off_t that the kernel reads and advances by what it sent.
        let r = unsafe { libc::sendfile(sock.as_raw_fd(), f.file.as_raw_fd(), &mut f.off, n) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // The file's bytes repeat every `len`: wrap into the first copy.
        f.off %= f.len as libc::off_t;
        self.used.calls += 1;
        self.used.bytes += r as u64;
        Ok(r as usize)
    }
}

impl TcpTx for SendFileTx {
    fn write<S: TcpEndpoint>(&mut self, sock: &S, buf: &[u8], wait: Wait) -> io::Result<usize> {
        if self.file.is_none() {
            return SyscallTcp.write(sock, buf, wait);
        }
        self.send(sock, buf.len(), wait)
    }

    fn write_repeated<S: TcpEndpoint>(
        &mut self,
        sock: &S,
        buf: &[u8],
        times: usize,
        wait: Wait,
    ) -> io::Result<usize> {
        match &self.file {
            None => SyscallTcp.write(sock, buf, wait),
            Some(f) if buf.len() == f.len => {
                let n = f.len.saturating_mul(times.min(f.copies - 1));
                self.send(sock, n, wait)
            }
            Some(_) => self.send(sock, buf.len(), wait),
        }
    }
}

impl Drop for SendFileTx {
    fn drop(&mut self) {
        let u = match self.file {
            Some(_) => EngineUse {
                engine: NAME.into(),
                sendfile: Some(self.used),
                ..EngineUse::default()
            },
            None => EngineUse {
                engine: NAME.into(),
                notes: vec![
                    "messages written with write(2): sendfile sends one unchanging buffer".into(),
                ],
                ..EngineUse::default()
            },
        };
        super::usage::record_use(u);
    }
}

/// A pipe to splice through and `/dev/null` to drain it into.
#[derive(Debug)]
struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    devnull: File,
    /// The pipe's capacity in bytes.
    cap: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and ours.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let devnull = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        // A larger pipe takes more per splice; refused (fs.pipe-max-size
        // lowered, the user's pipe quota spent), the default size works.
        // SAFETY: fcntl on an open pipe with an integer argument.
        let set =
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE as libc::c_int) };
        let cap = if set > 0 {
            set
        } else {
            // SAFETY: as above, no argument.
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) }
        };
        if cap <= 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Pipe {
            r,
            w,
            devnull,
            cap: cap as usize,
        })
    }

    /// Splices the `n` bytes in the pipe into `/dev/null`.
    fn drain(&self, mut n: usize) -> io::Result<()> {
        while n > 0 {
            // SAFETY: both descriptors are open; a pipe and /dev/null take
            // null offsets.
            let r = unsafe {
                libc::splice(
                    self.r.as_raw_fd(),
                    std::ptr::null_mut(),
                    self.devnull.as_raw_fd(),
                    std::ptr::null_mut(),
                    n,
                    libc::SPLICE_F_MOVE,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if r == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the pipe ran dry before it was drained",
                ));
            }
            n -= r as usize;
        }
        Ok(())
    }
}

/// TCP receiving: `splice` through a pipe into `/dev/null` (a stream
/// loop's reader), or plain reads for readers of the bytes (`pipe` absent).
#[derive(Debug)]
pub struct SpliceRx {
    pipe: Option<Pipe>,
    plain: SyscallTcpRx,
    /// The socket is non-blocking (found so, or set by a `DontWait` call).
    nonblock: bool,
    used: CallsBytes,
    notes: Vec<String>,
}

impl SpliceRx {
    fn new(sock: &impl AsRawFd, skip_copy: bool, splice: bool) -> Result<Self, EngineError> {
        let pipe = if splice {
            Some(Pipe::new().map_err(|e| EngineError::io("splice pipe", e))?)
        } else {
            None
        };
        let mut notes = Vec::new();
        match &pipe {
            Some(p) if p.cap < PIPE_SIZE => notes.push(format!(
                "splice pipe of {} KiB (F_SETPIPE_SZ {} KiB refused)",
                p.cap >> 10,
                PIPE_SIZE >> 10
            )),
            Some(_) => {}
            None => notes.push("messages read with read(2): their bytes are parsed".into()),
        }
        Ok(SpliceRx {
            pipe,
            plain: SyscallTcpRx { skip_copy },
            nonblock: is_nonblocking(sock)?,
            used: CallsBytes::default(),
            notes,
        })
    }
}

impl TcpRx for SpliceRx {
    fn read<S: TcpEndpoint>(&mut self, sock: &S, buf: &mut [u8], wait: Wait) -> io::Result<usize> {
        let Some(p) = &self.pipe else {
            return self.plain.read(sock, buf, wait);
        };
        if wait == Wait::DontWait && !self.nonblock {
            set_nonblocking(sock)?;
            self.nonblock = true;
        }
        // The pipe is empty between calls (each drains what it spliced).
        let want = buf.len().min(p.cap);
        // SAFETY: both descriptors are open; a socket and a pipe take null
        // offsets. `buf` is not touched: the bytes go to the pipe.
        let n = unsafe {
            libc::splice(
                sock.as_raw_fd(),
                std::ptr::null_mut(),
                p.w.as_raw_fd(),
                std::ptr::null_mut(),
                want,
                libc::SPLICE_F_MOVE,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        p.drain(n)?;
        if n > 0 {
            self.used.calls += 1;
            self.used.bytes += n as u64;
        }
        Ok(n)
    }
}

impl Drop for SpliceRx {
    fn drop(&mut self) {
        super::usage::record_use(EngineUse {
            engine: NAME.into(),
            splice_recv: self.pipe.is_some().then_some(self.used),
            notes: std::mem::take(&mut self.notes),
            ..EngineUse::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::take_use;
    use crate::stream::{Signals, StreamCounter};
    use std::io::Read;
    use std::net::TcpStream;

    use crate::test_pair::tcp_pair as pair;

    fn runs_here() -> bool {
        match check() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("skipped: {e}");
                false
            }
        }
    }

    /// Writes exactly `limit` bytes of the stream with `tx`, as the stream
    /// loop does (whole buffers repeated, then a short last write).
    fn send_exactly(tx: &mut SendFileTx, sock: &TcpStream, buf: &[u8], limit: u64) {
        let mut left = limit;
        while left > 0 {
            let n = buf.len().min(left as usize);
            let times = (left / buf.len() as u64).max(1) as usize;
            match tx.write_repeated(sock, &buf[..n], times, Wait::Block) {
                Ok(0) => panic!("write returned 0 with {left} left"),
                Ok(k) => left -= k as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("sendfile: {e}"),
            }
        }
    }

    #[test]
    fn issue_8_sendfile_sends_exactly_n_and_splice_counts_exactly_n() {
        if !runs_here() {
            return;
        }
        let (a, b) = pair();
        let reader = std::thread::spawn(move || {
            let mut rx = SendFile.tcp_rx_stream(&b, false).expect("rx");
            let mut buf = vec![0xAA_u8; 128 << 10];
            let mut total = 0u64;
            loop {
                match rx.read(&b, &mut buf, Wait::Block) {
                    Ok(0) => break,
                    Ok(n) => total += n as u64,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("splice: {e}"),
                }
            }
            assert!(buf.iter().all(|&x| x == 0xAA), "no byte reached user space");
            drop(rx);
            (
                total,
                take_use().and_then(|u| u.splice_recv).expect("splice use"),
            )
        });
        let buf: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let limit = 7 * (1 << 20) + 12_345;
        let mut tx = SendFile.tcp_tx_stream(&a, &buf).expect("tx");
        send_exactly(&mut tx, &a, &buf, limit);
        a.shutdown(std::net::Shutdown::Write).expect("shutdown");
        drop(tx);
        let sent = take_use().and_then(|u| u.sendfile).expect("sendfile use");
        assert_eq!(sent.bytes, limit);
        assert!(
            sent.calls > 0 && sent.calls < limit / buf.len() as u64,
            "{sent:?}"
        );
        let (got, spliced) = reader.join().expect("reader");
        assert_eq!(got, limit);
        assert_eq!(spliced.bytes, limit);
        assert!(spliced.calls > 0);
    }

    /// The offset wraps within the file: the stream is the buffer repeated,
    /// byte for byte, as a plain reader sees it.
    #[test]
    fn issue_8_the_sendfile_stream_is_the_buffer_repeated() {
        if !runs_here() {
            return;
        }
        let (a, mut b) = pair();
        // An odd length, so copies and wraps fall mid-page.
        let buf: Vec<u8> = (0..4099u32).map(|i| (i % 251) as u8).collect();
        let limit = 3 * FILE_MIN as u64 + 777;
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).expect("read");
            got
        });
        let mut tx = SendFile.tcp_tx_stream(&a, &buf).expect("tx");
        // Short writes too: only part of a buffer, then whole ones.
        assert_eq!(
            tx.write(&a, &buf[..1000], Wait::Block).expect("write"),
            1000
        );
        let mut left = limit - 1000;
        while left > 0 {
            // The loop hands over the buffer from its start; the engine's
            // offset carries the stream on where the last send ended.
            let n = (buf.len() as u64).min(left) as usize;
            left -= tx.write(&a, &buf[..n], Wait::Block).expect("write") as u64;
        }
        a.shutdown(std::net::Shutdown::Write).expect("shutdown");
        drop(tx);
        let _ = take_use();
        let got = reader.join().expect("reader");
        assert_eq!(got.len() as u64, limit);
        for (i, &x) in got.iter().enumerate() {
            assert_eq!(x, buf[i % buf.len()], "byte {i}");
        }
    }

    #[test]
    fn issue_8_dont_wait_returns_would_block_when_the_peer_does_not_read() {
        if !runs_here() {
            return;
        }
        let (a, b) = pair();
        // A blocking socket, as a non-busy-polling stream's: DontWait must
        // not block all the same.
        let buf = vec![1u8; 64 << 10];
        let mut tx = SendFile.tcp_tx_stream(&a, &buf).expect("tx");
        let mut sent = 0u64;
        let mut blocked = false;
        for _ in 0..100_000 {
            match tx.write_repeated(&a, &buf, usize::MAX, Wait::DontWait) {
                Ok(n) => sent += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) => panic!("sendfile: {e}"),
            }
        }
        assert!(blocked, "no WouldBlock after {sent} bytes");
        assert!(sent > 0);
        // The receiver too: nothing queued on a's side of the pair.
        let mut rx = SendFile.tcp_rx_stream(&a, false).expect("rx");
        let mut rbuf = vec![0u8; 4096];
        let e = rx.read(&a, &mut rbuf, Wait::DontWait).expect_err("empty");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop((tx, rx, b));
        let _ = take_use();
    }

    /// The stream loops end to end, blocking and busy polling: every byte
    /// of a byte-limited stream arrives and is counted once.
    #[test]
    fn issue_8_the_stream_loops_balance_with_either_wait_policy() {
        use crate::wait::Wait as W;
        use linerate_proto::rr_core::SpinMode;
        if !runs_here() {
            return;
        }
        for wait in [W::Block, W::Spin(SpinMode::Shared)] {
            let (tx, rx) = crate::test_pair::tcp_pair_for(wait);
            let signals = std::sync::Arc::new(Signals::default());
            let s2 = std::sync::Arc::clone(&signals);
            let reader = std::thread::spawn(move || {
                let c = StreamCounter::default();
                let mut buf = vec![0u8; 64 << 10];
                let opts = crate::tcp::RecvOpts::default();
                let end = crate::tcp::recv(KIND, &rx, &mut buf, &c, &s2, wait, opts);
                end.result.expect("read to end");
                let u = take_use().expect("use");
                (c.get(), u)
            });
            let c = StreamCounter::default();
            let buf = vec![7u8; 64 << 10];
            let limit = 5_000_017;
            let end = crate::tcp::send(KIND, &tx, buf, Some(limit), &c, &signals, wait);
            end.result.expect("sent");
            let tx_use = take_use().expect("use");
            assert_eq!(c.get(), limit);
            assert_eq!(tx_use.sendfile.map(|s| s.bytes), Some(limit), "{wait:?}");
            let (got, rx_use) = reader.join().expect("reader");
            assert_eq!(got, limit, "{wait:?}");
            assert_eq!(rx_use.splice_recv.map(|s| s.bytes), Some(limit), "{wait:?}");
            assert_eq!(rx_use.engine, NAME);
        }
    }

    /// Readers and writers of changing bytes (rr's messages) get plain
    /// calls, and the bytes arrive intact.
    #[test]
    fn issue_8_message_readers_and_writers_see_their_bytes() {
        if !runs_here() {
            return;
        }
        let (a, b) = pair();
        let mut tx = SendFile.tcp_tx(&a).expect("tx");
        let mut rx = SendFile.tcp_rx(&b, false).expect("rx");
        assert_eq!(tx.write(&a, b"hello", Wait::Block).expect("write"), 5);
        let mut buf = [0u8; 5];
        assert_eq!(rx.read(&b, &mut buf, Wait::Block).expect("read"), 5);
        assert_eq!(&buf, b"hello");
        drop((tx, rx));
        let u = take_use().expect("use");
        assert!(u.sendfile.is_none() && u.splice_recv.is_none(), "{u:?}");
        assert_eq!(u.notes.len(), 2, "{u:?}");
    }

    #[test]
    fn issue_8_udp_is_refused_by_name() {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let e = SendFile.udp_endpoint(s).expect_err("TCP only");
        assert!(e.to_string().contains("TCP stream tests only"), "{e}");
        let spec = linerate_proto::spec::TestSpec {
            protocol: linerate_proto::spec::Protocol::Udp,
            ..Default::default()
        };
        let why = KIND.refusal(&spec).expect("refused");
        assert!(
            why.contains("zerocopy:sendfile") && why.contains("--engine zerocopy"),
            "{why}"
        );
        let tcp = linerate_proto::spec::TestSpec {
            protocol: linerate_proto::spec::Protocol::Tcp,
            ..Default::default()
        };
        assert_eq!(KIND.refusal(&tcp), None);
        assert_eq!(
            EngineKind::ZeroCopy { sendfile: false }.refusal(&spec),
            None
        );
    }
}
