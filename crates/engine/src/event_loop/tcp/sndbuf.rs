//! Send buffers of many TCP flows on the completion loop (`--engine uring
//! --flows`): each sending flow's `SO_SNDBUF` is bounded when autotuned
//! send buffers for all of a side's sending flows could pass a share of
//! the host's TCP memory pressure threshold (`net.ipv4.tcp_mem`'s middle
//! value, in pages, for every TCP socket of the host).
//!
//! Why (issue 26, measured over veth at 1,000 flows on 2 threads): the
//! io_uring sender keeps a send parked in the kernel on every flow, and
//! the kernel issues it again the moment the socket is writable (its own
//! poll, then task work on the loop thread), so each flow's receive
//! window is refilled as soon as it opens. The receivers' autotuning
//! sizes their buffers from what arrives per round trip, so they grew to
//! 4 MB (median) – 33 MB each, held 1.2 GB of queued data together, and
//! the host passed `tcp_mem`'s pressure threshold: receivers dropped what
//! they could not charge (`TCPRcvQDrop`, `PruneCalled`), senders timed
//! out (`TCPTimeouts`) and resent whole windows in slow start
//! (`TCPSlowStartRetrans`: 180-490 k segments a 4 s run). The epoll
//! loop refills a flow only when its turn comes, and stayed under the
//! threshold. Bounding the receivers' `SO_RCVBUF` instead cost the epoll
//! client 40 % of its rate (docs/design/datapath.md); a sender's buffer
//! bounds what a flow can have in flight per round trip, and with it
//! what the receiver's autotuning sees, without fixing the receiver's
//! buffer. Setting `SO_SNDBUF` turns the sender's own autotuning off, so
//! it is set only when the budget needs it, and never when the user set
//! a window (`-w`).

use std::os::fd::AsFd;

/// Part of the pressure threshold one side's sending flows may hold: the
/// receivers of the same test on the same host (veth, loopback) and the
/// host's other sockets share the same `tcp_mem`.
const SHARE: u64 = 4;
/// Smallest bound set, bytes: a few full-sized segments per flow, however
/// many flows.
pub const MIN_SNDBUF: u64 = 16 * 1024;

/// The host's TCP memory limits, as read at the test's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpMem {
    /// `tcp_mem`'s pressure threshold, pages.
    pub pressure_pages: u64,
    /// The page size, bytes.
    pub page: u64,
    /// `tcp_wmem`'s maximum: what a send buffer may autotune to, bytes.
    pub wmem_max: u64,
}

impl TcpMem {
    /// Reads `/proc/sys/net/ipv4/tcp_mem` and `tcp_wmem` (the latter is the
    /// caller's network namespace's) and the page size; `None` when they
    /// cannot be read (no bound is set then). `tcp_mem` is the host's and
    /// shows only in its first network namespace: in another one the
    /// threshold is the kernel's own default, a sixteenth of memory
    /// (`tcp_init_mem`, from `MemTotal`: a little above what the kernel
    /// computed from its free buffer pages).
    pub fn read() -> Option<TcpMem> {
        let text = |path: &str| std::fs::read_to_string(path).ok();
        // SAFETY: sysconf reads a constant of the running system.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p > 0)?;
        let pressure_pages = match text("/proc/sys/net/ipv4/tcp_mem") {
            Some(t) => nth(&t, 1)?,
            None => mem_total_kib(&text("/proc/meminfo")?)? * 1024 / page / 16,
        };
        Some(TcpMem {
            pressure_pages,
            page,
            wmem_max: nth(&text("/proc/sys/net/ipv4/tcp_wmem")?, 2)?,
        })
    }
}

/// The `i`th whitespace-separated number of `text`.
fn nth(text: &str, i: usize) -> Option<u64> {
    text.split_whitespace().nth(i)?.parse().ok()
}

/// `MemTotal` of `/proc/meminfo`'s `text`, KiB.
fn mem_total_kib(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    nth(line, 1)
}

/// The `SO_SNDBUF` to set on each of a side's `flows` sending flows
/// (`None`: leave them autotuned). The kernel doubles what is set (its
/// bookkeeping overhead), so `flows` × 2 × the bound stays within a
/// quarter of the pressure threshold (`SHARE`); no bound when
/// autotuning to `wmem_max` for every flow already stays within it.
pub fn sndbuf_bound(flows: usize, mem: TcpMem) -> Option<u32> {
    let flows = (flows as u64).max(1);
    let budget = mem.pressure_pages.saturating_mul(mem.page) / SHARE;
    let per_flow = budget / flows / 2;
    if per_flow >= mem.wmem_max {
        return None;
    }
    Some(u32::try_from(per_flow.max(MIN_SNDBUF)).unwrap_or(u32::MAX))
}

/// Sets `SO_SNDBUF` to `bytes` on `sock`; returns what the kernel holds
/// now (read back: the doubled value, or less under `net.core.wmem_max`),
/// `None` when it could not be set.
pub fn set_sndbuf(sock: &impl AsFd, bytes: u32) -> Option<u64> {
    let s = socket2::SockRef::from(sock);
    s.set_send_buffer_size(bytes as usize).ok()?;
    s.send_buffer_size().ok().map(|b| b as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host's figures when issue 26 was measured.
    const HOST: TcpMem = TcpMem {
        pressure_pages: 383_867,
        page: 4096,
        wmem_max: 4 << 20,
    };

    #[test]
    fn issue_26_many_flows_bound_their_send_buffers_below_tcp_mem_pressure() {
        let b = u64::from(sndbuf_bound(1000, HOST).expect("1,000 flows need a bound"));
        // What the kernel holds (twice the bound) for all the flows stays
        // within a quarter of the threshold, and is not needlessly small.
        let held = 1000 * 2 * b;
        let threshold = HOST.pressure_pages * HOST.page;
        assert!(held <= threshold / 4, "{held} of {threshold}");
        assert!(held >= threshold / 5, "{held} of {threshold}");
        assert_eq!(b, 196_539);
        // More flows, smaller buffers, never under the floor.
        assert!(sndbuf_bound(10_000, HOST) < sndbuf_bound(1000, HOST));
        assert!(sndbuf_bound(10_000, HOST).is_some());
        assert_eq!(sndbuf_bound(1_000_000, HOST), Some(MIN_SNDBUF as u32));
    }

    #[test]
    fn issue_26_few_flows_keep_autotuning() {
        // -P 2 or a few flows: every buffer may autotune to tcp_wmem's
        // maximum within the budget.
        assert_eq!(sndbuf_bound(2, HOST), None);
        assert_eq!(sndbuf_bound(0, HOST), None);
        assert_eq!(sndbuf_bound(40, HOST), None);
        assert!(sndbuf_bound(64, HOST).is_some());
        // A host with a low threshold bounds sooner.
        let tight = TcpMem {
            pressure_pages: 8_192,
            ..HOST
        };
        assert!(sndbuf_bound(2, tight).is_some());
    }

    #[test]
    fn issue_26_the_bound_is_what_the_socket_holds() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let held = set_sndbuf(&c, 100_000).expect("SO_SNDBUF");
        assert_eq!(held, 200_000, "the kernel doubles what is set");
        assert!(TcpMem::read().is_some_and(|m| m.pressure_pages > 0 && m.page > 0));
        assert_eq!(
            mem_total_kib("MemFree: 5 kB\nMemTotal:  24576000 kB\n"),
            Some(24_576_000)
        );
    }
}
