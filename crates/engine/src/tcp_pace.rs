//! Pacing a sending TCP stream to a bit rate (`tcp --rate`, and a server's
//! `--max-rate` on its own senders): the kernel's `SO_MAX_PACING_RATE`.
//!
//! Why the kernel and not a sleep in the send loop: TCP paces its segments
//! itself (internal pacing since Linux 4.13, or the `fq` qdisc), so the
//! rate holds on the wire whatever the engine (syscall, batch, io_uring,
//! zero copy), with no clock read or sleep per write and no burst of a
//! whole buffer after each sleep. The send loops are untouched: the socket
//! buffer fills and `write` blocks, as on a slow path.
//!
//! The kernel's rate counts the bytes of each segment with its TCP header,
//! so the payload rate stays just below the one asked for, except that
//! the kernel sends a connection's first 10 segments unpaced: 14 KiB on
//! an Ethernet path, but 640 KiB on loopback (64 KiB segments), which
//! shows in short loopback tests. `TCP_NOTSENT_LOWAT` keeps the unsent
//! queue short, so the sender's count and end match what left.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

use crate::EngineError;

/// Sets `sock`'s pacing rate to `bits_per_second` of payload (rounded down
/// to whole bytes per second, at least 1) and reads it back: a kernel that
/// does not take the value is an error, never an unpaced stream.
pub fn set(sock: &TcpStream, bits_per_second: u64) -> Result<(), EngineError> {
    let bytes = (bits_per_second / 8).max(1);
    // Values that fit a u32 go as one (every kernel takes those); `!0u32`
    // means "unlimited" to the kernel, so it is never sent as a rate.
    let set = match u32::try_from(bytes) {
        Ok(b) if b < u32::MAX => setsockopt(sock, &b),
        _ => setsockopt(sock, &bytes),
    };
    set.map_err(|e| EngineError::io("SO_MAX_PACING_RATE", e))?;
    // Without this the sender fills its (autotuned, megabytes) socket
    // buffer at once: at a slow pace that is seconds of data, which the
    // sender counts as sent at the start and the receiver drains after
    // the sender's end. Writes now wait while more than ~100 ms of the
    // pace (64 KiB at least) is queued unsent.
    let lowat = u32::try_from((bytes / 10).max(LOWAT_MIN)).unwrap_or(u32::MAX);
    setsockopt_at(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, &lowat)
        .map_err(|e| EngineError::io("TCP_NOTSENT_LOWAT", e))?;
    match get(sock) {
        Some(got) if got == bytes => Ok(()),
        got => Err(EngineError::io(
            "SO_MAX_PACING_RATE",
            std::io::Error::other(format!(
                "asked for {bytes} bytes/s, the kernel holds {}: it cannot pace this stream to {bits_per_second} bit/s",
                got.map_or("nothing".to_owned(), |g| g.to_string())
            )),
        )),
    }
}

/// The socket's pacing rate, bytes per second (`None`: unreadable).
pub fn get(sock: &TcpStream) -> Option<u64> {
    let mut v = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `v` is valid for `len` bytes and outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    match (rc, len) {
        (0, 8) => Some(v),
        // An older kernel answers with a u32 in the first (native-endian)
        // bytes.
        (0, 4) => Some(u64::from(u32::from_ne_bytes(
            v.to_ne_bytes()[..4].try_into().ok()?,
        ))),
        _ => None,
    }
}

/// Least unsent backlog a paced sender keeps queued, bytes.
const LOWAT_MIN: u64 = 64 * 1024;

fn setsockopt<T>(sock: &TcpStream, v: &T) -> std::io::Result<()> {
    setsockopt_at(sock, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, v)
}

fn setsockopt_at<T>(
    sock: &TcpStream,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> std::io::Result<()> {
    // SAFETY: `v` points to a live value of exactly the length passed.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    use crate::test_pair::tcp_pair as pair;

    #[test]
    fn the_rate_is_set_and_read_back_in_bytes_per_second() {
        let (a, _b) = pair();
        set(&a, 100_000_000).expect("pacing");
        assert_eq!(get(&a), Some(12_500_000));
        // Above what a u32 of bytes/s holds (34 Gbit/s).
        set(&a, 400_000_000_000).expect("64-bit pacing rate");
        assert_eq!(get(&a), Some(50_000_000_000));
    }

    #[test]
    fn a_paced_stream_arrives_at_about_its_rate() {
        let (tx, mut rx) = pair();
        // 40 Mbit/s for 0.5 s after the socket buffers fill: the reader
        // sees the paced rate, within scheduling slack.
        set(&tx, 40_000_000).expect("pacing");
        let writer = std::thread::spawn(move || {
            let buf = vec![0u8; 64 * 1024];
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(1500) {
                if (&tx).write_all(&buf).is_err() {
                    break;
                }
            }
        });
        let mut buf = vec![0u8; 1 << 20];
        // Skip the first 0.5 s (buffers), then count 0.8 s.
        let t0 = Instant::now();
        let mut counted = 0u64;
        let mut window: Option<Instant> = None;
        while t0.elapsed() < Duration::from_millis(1300) {
            let n = rx.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            if t0.elapsed() >= Duration::from_millis(500) {
                window.get_or_insert_with(Instant::now);
                counted += n as u64;
            }
        }
        let secs = window.map_or(0.0, |w| w.elapsed().as_secs_f64());
        let bps = counted as f64 * 8.0 / secs;
        assert!(
            (20e6..=44e6).contains(&bps),
            "paced at 40 Mbit/s, read {bps:.0} bit/s"
        );
        drop(rx);
        writer.join().expect("writer");
    }
}
