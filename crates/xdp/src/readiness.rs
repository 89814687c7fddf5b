//! Would AF_XDP work on an interface, and why not: what `linerate doctor`
//! reports. Everything is read (capabilities, the kernel's socket family,
//! the interface, its driver's XDP features); nothing is attached or bound.

use crate::features::{self, XDP_ACT_REDIRECT, XDP_ACT_XSK_ZEROCOPY};
use crate::{caps, netlink, queue};

/// What was found for one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub iface: String,
    /// Nothing found stands in the way.
    pub usable: bool,
    /// The driver redirects to AF_XDP in native mode (`None`: the kernel
    /// does not say; trying tells).
    pub native: Option<bool>,
    /// The driver offers AF_XDP zero-copy (`None`: not said).
    pub zero_copy: Option<bool>,
    /// Why not, and the caveats, each with what to do.
    pub notes: Vec<String>,
    /// The command (or step) that removes the first thing in the way.
    pub fix: Option<String>,
}

fn refuse(r: &mut Readiness, note: String, fix: String) {
    r.usable = false;
    r.notes.push(note);
    r.fix.get_or_insert(fix);
}

/// Checks interface `iface` of this thread's network namespace.
pub fn readiness(iface: &str) -> Readiness {
    let mut r = Readiness {
        iface: iface.to_owned(),
        usable: true,
        native: None,
        zero_copy: None,
        notes: Vec::new(),
        fix: None,
    };
    if let Err(e) = caps::check() {
        let fix = "run as root, or: sudo setcap cap_net_raw,cap_net_admin,cap_bpf+ep \
                   $(command -v linerate)";
        refuse(&mut r, e.to_string(), fix.into());
    } else if let Err(e) = queue::probe_af_xdp() {
        let fix = "a kernel built with CONFIG_XDP_SOCKETS=y (Linux 4.18 or later)";
        refuse(&mut r, e.to_string(), fix.into());
    }
    let link = match netlink::link_by_name(iface) {
        Ok(l) => l,
        Err(e) => {
            refuse(&mut r, e.to_string(), "ip link show".into());
            return r;
        }
    };
    if link.loopback {
        let e = crate::error::XdpError::Loopback(link.name.clone());
        let fix = "test a peer reached over a real interface or a veth pair";
        refuse(&mut r, e.to_string(), fix.into());
        return r;
    }
    if let Some(p) = link.xdp {
        let e = crate::error::XdpError::AlreadyAttached {
            iface: link.name.clone(),
            prog_id: p.prog_id,
            mode: p.mode,
        };
        let fix = format!(
            "ip link set dev {} xdp off   # if that program is not needed",
            link.name
        );
        refuse(&mut r, e.to_string(), fix);
    }
    match features::xdp_features(link.ifindex) {
        None => r.notes.push(
            "the kernel does not report the driver's XDP features (before Linux 6.3): \
             native mode and zero-copy are found by trying"
                .into(),
        ),
        Some(f) => {
            r.native = Some(f & XDP_ACT_REDIRECT != 0);
            r.zero_copy = Some(f & XDP_ACT_XSK_ZEROCOPY != 0);
            if f & XDP_ACT_REDIRECT == 0 {
                r.notes
                    .push("the driver has no native XDP redirect: generic mode only".into());
            }
            if f & XDP_ACT_XSK_ZEROCOPY == 0 {
                r.notes
                    .push("the driver has no AF_XDP zero-copy: copy mode only".into());
            }
        }
    }
    r
}
