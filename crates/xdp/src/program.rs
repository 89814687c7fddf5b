//! The XDP program (`bpf/redirect.c`, compiled by build.rs) loaded with
//! aya and attached to one interface through a BPF link: the link's only
//! descriptor is this process's, so the kernel detaches the program when
//! the process exits, however it exits (SIGKILL included), and when the
//! [`Program`] is dropped.

use std::fmt;
use std::io;
use std::net::SocketAddr;

use aya::maps::{HashMap, MapData, XskMap};
use aya::programs::{ProgramError, Xdp, XdpFlags};
use aya::Ebpf;

use crate::error::XdpError;
use crate::modes::AttachMode;
use crate::netlink::{self, LinkInfo};
use crate::{caps, queue::Queue};

/// The compiled program, embedded (aligned as aya's ELF parser wants it).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/redirect.o"));

/// The program's function name in `bpf/redirect.c`.
const PROGRAM: &str = "linerate_redirect";

impl AttachMode {
    fn flags(self) -> XdpFlags {
        match self {
            AttachMode::Native => XdpFlags::DRV_MODE,
            AttachMode::Generic => XdpFlags::SKB_MODE,
        }
    }
}

/// How to attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgramOptions {
    /// Exactly this mode; no fallback to the other.
    pub mode: AttachMode,
    /// Detach an XDP program already on the interface (one attached over
    /// netlink; one held by another process's BPF link cannot be).
    pub replace: bool,
}

/// The XDP program attached to one interface, with its two maps.
pub struct Program {
    link: LinkInfo,
    mode: AttachMode,
    xsks: XskMap<MapData>,
    filters: HashMap<MapData, [u8; 20], u32>,
    /// Owns the program and its link; dropped last.
    _ebpf: Ebpf,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("link", &self.link)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// XDP_FLAGS_SKB_MODE | XDP_FLAGS_DRV_MODE: which mode to detach.
fn flags_of(mode: &str) -> u32 {
    match mode {
        "generic" => XdpFlags::SKB_MODE.bits(),
        "native" => XdpFlags::DRV_MODE.bits(),
        _ => 0,
    }
}

impl Program {
    /// Loads the program and attaches it to interface `iface` of this
    /// thread's network namespace.
    pub fn attach(iface: &str, opts: &ProgramOptions) -> Result<Program, XdpError> {
        caps::check()?;
        let link = netlink::link_by_name(iface)?;
        if link.loopback {
            return Err(XdpError::Loopback(link.name));
        }
        if let Some(existing) = link.xdp {
            if !opts.replace {
                return Err(XdpError::AlreadyAttached {
                    iface: link.name,
                    prog_id: existing.prog_id,
                    mode: existing.mode,
                });
            }
            netlink::detach(link.ifindex, flags_of(existing.mode)).map_err(|_| {
                XdpError::AlreadyAttached {
                    iface: link.name.clone(),
                    prog_id: existing.prog_id,
                    mode: existing.mode,
                }
            })?;
        }
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| XdpError::Load(e.to_string()))?;
        let xdp: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| XdpError::Load(format!("no program {PROGRAM} in the object")))?
            .try_into()
            .map_err(|e: ProgramError| XdpError::Load(e.to_string()))?;
        xdp.load().map_err(|e| XdpError::Load(e.to_string()))?;
        xdp.attach_to_if_index(link.ifindex, opts.mode.flags())
            .map_err(|e| attach_error(&link, opts.mode, e))?;
        let xsks = take(&mut ebpf, "xsks", XskMap::try_from)?;
        let filters = take(&mut ebpf, "filters", HashMap::try_from)?;
        Ok(Program {
            link,
            mode: opts.mode,
            xsks,
            filters,
            _ebpf: ebpf,
        })
    }

    /// The interface, as it was when attached.
    pub fn link(&self) -> &LinkInfo {
        &self.link
    }

    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Redirects datagrams to `dst` (address and UDP port; an unspecified
    /// address matches any) to the AF_XDP socket of their queue.
    pub fn allow(&mut self, dst: SocketAddr) -> Result<(), XdpError> {
        self.filters
            .insert(filter_key(dst), 1, 0)
            .map_err(|e| map_error("filters", e))
    }

    /// Stops redirecting datagrams to `dst`.
    pub fn disallow(&mut self, dst: SocketAddr) -> Result<(), XdpError> {
        self.filters
            .remove(&filter_key(dst))
            .map_err(|e| map_error("filters", e))
    }

    /// Sends what arrives on `queue`'s queue (and passes the filters) to
    /// its socket.
    pub fn register(&mut self, queue: &Queue) -> Result<(), XdpError> {
        let fd = queue.as_raw_fd();
        self.xsks
            .set(queue.queue_id(), fd, 0)
            .map_err(|e| map_error("xsks", e))
    }
}

/// A `filters` key: the address IPv4-mapped, the port big-endian, then
/// two zero bytes (`struct filter_key` in redirect.c).
fn filter_key(dst: SocketAddr) -> [u8; 20] {
    let mut key = [0u8; 20];
    if !dst.ip().is_unspecified() {
        key[..16].copy_from_slice(&linerate_proto::packet::mapped(dst.ip()));
    }
    key[16..18].copy_from_slice(&dst.port().to_be_bytes());
    key
}

fn take<T>(
    ebpf: &mut Ebpf,
    name: &'static str,
    conv: impl FnOnce(aya::maps::Map) -> Result<T, aya::maps::MapError>,
) -> Result<T, XdpError> {
    let map = ebpf.take_map(name).ok_or_else(|| XdpError::Map {
        map: name,
        reason: "missing from the object".into(),
    })?;
    conv(map).map_err(|e| map_error(name, e))
}

fn map_error(map: &'static str, e: aya::maps::MapError) -> XdpError {
    XdpError::Map {
        map,
        reason: e.to_string(),
    }
}

/// The attach failure, with what to do about the usual causes.
fn attach_error(link: &LinkInfo, mode: AttachMode, e: ProgramError) -> XdpError {
    let source = match e {
        ProgramError::SyscallError(s) => s.io_error,
        other => io::Error::other(other.to_string()),
    };
    let hint = match (source.raw_os_error(), mode) {
        (Some(libc::EOPNOTSUPP), AttachMode::Native) => {
            " (the driver has no native XDP: ask for generic mode)"
        }
        (Some(libc::EBUSY | libc::EEXIST), _) => {
            " (another XDP program is attached, possibly in the other mode)"
        }
        (Some(libc::EPERM), _) => " (needs CAP_NET_ADMIN and CAP_BPF)",
        (Some(libc::ERANGE | libc::EINVAL), AttachMode::Native) => {
            " (the driver refuses this MTU or configuration for native XDP)"
        }
        _ => "",
    };
    XdpError::Attach {
        iface: link.name.clone(),
        mode,
        source,
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_keys_match_the_c_layout() {
        let k = filter_key("198.18.0.2:5201".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(&k[10..16], &[0xff, 0xff, 198, 18, 0, 2]);
        assert_eq!(&k[16..20], &[0x14, 0x51, 0, 0]);
        let any = filter_key("0.0.0.0:9".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(&any[..16], &[0; 16]);
    }
}
