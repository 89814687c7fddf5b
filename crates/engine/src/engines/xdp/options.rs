//! The `xdp` engine's value and options (`--xdp-mode`, `--xdp-copy`,
//! `--xdp-zerocopy`, `--xdp-sleep`), and its AF_XDP failures as engine
//! errors.

use std::io;

use linerate_xdp::{AttachMode, CopyMode, XdpError};

use crate::EngineError;

/// Where the XDP program runs (`--xdp-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XdpMode {
    Native,
    Generic,
}

/// The `xdp` engine and its options; `None`: the fastest the driver has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Xdp {
    pub mode: Option<XdpMode>,
    /// `Some(true)`: `--xdp-zerocopy`; `Some(false)`: `--xdp-copy`.
    pub zero_copy: Option<bool>,
    /// `--xdp-sleep`: rr flows and stream receivers wait for a datagram
    /// asleep in `poll(2)` on the AF_XDP socket; otherwise they spin on
    /// its rings (issue 25: a round trip that never enters the kernel's
    /// socket layer; a stream receiver that a wake-up per batch would
    /// slow, on the sender's CPU over veth).
    pub sleep: bool,
}

impl Xdp {
    /// The options as flags, for reports (`xdp --xdp-mode generic`).
    pub fn flags(self) -> Vec<&'static str> {
        let mut f = Vec::new();
        match self.mode {
            Some(XdpMode::Native) => f.push("--xdp-mode native"),
            Some(XdpMode::Generic) => f.push("--xdp-mode generic"),
            None => {}
        }
        match self.zero_copy {
            Some(true) => f.push("--xdp-zerocopy"),
            Some(false) => f.push("--xdp-copy"),
            None => {}
        }
        if self.sleep {
            f.push("--xdp-sleep");
        }
        f
    }

    /// Whether this side's rr flows and stream receivers spin on the
    /// rings without `--busy-poll` ([`crate::engines::Engine::spins`]).
    pub fn spins(self) -> bool {
        !self.sleep
    }

    /// The options an interface's port (program and sockets) is made
    /// with: how a flow waits is its own.
    pub(super) fn for_port(self) -> Xdp {
        Xdp {
            sleep: false,
            ..self
        }
    }

    /// This host can use AF_XDP at all (capabilities, the kernel's socket
    /// family); the interface is known only per stream.
    pub fn check(self) -> Result<(), EngineError> {
        linerate_xdp::check_host().map_err(|e| xdp_error(e, self))
    }

    /// The modes to use on `iface`: as asked, else the fastest its driver
    /// says it has.
    pub(super) fn modes(self, iface: &str) -> (AttachMode, CopyMode) {
        let found = (self.mode.is_none() || self.zero_copy.is_none())
            .then(|| linerate_xdp::readiness(iface));
        let mode = match (self.mode, found.as_ref().and_then(|r| r.native)) {
            (Some(XdpMode::Native), _) | (None, Some(true) | None) => AttachMode::Native,
            (Some(XdpMode::Generic), _) | (None, Some(false)) => AttachMode::Generic,
        };
        let copy = match (self.zero_copy, found.as_ref().and_then(|r| r.zero_copy)) {
            (Some(true), _) | (None, Some(true) | None) => CopyMode::ZeroCopy,
            (Some(false), _) | (None, Some(false)) => CopyMode::Copy,
        };
        (mode, copy)
    }
}

/// An AF_XDP failure as an engine refusal, with the option that asks for
/// the other mode where the mode was the trouble.
pub(super) fn xdp_error(e: XdpError, opts: Xdp) -> EngineError {
    let hint = match &e {
        XdpError::Attach {
            mode: AttachMode::Native,
            ..
        } if opts.mode.is_none() => "; --xdp-mode generic asks for generic XDP",
        XdpError::Bind {
            copy: CopyMode::ZeroCopy,
            ..
        } if opts.zero_copy.is_none() => "; --xdp-copy asks for copy mode",
        _ => "",
    };
    EngineError::Xdp(format!("{e}{hint}"))
}

pub(super) fn io_error(e: XdpError) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal for missing capabilities reads "AF_XDP needs …" once,
    /// not "AF_XDP: AF_XDP needs …" (the engine's error adds no prefix).
    #[test]
    fn issue_25_a_refusal_names_af_xdp_once() {
        let e = xdp_error(
            XdpError::Capabilities {
                missing: "CAP_NET_RAW".into(),
            },
            Xdp::default(),
        );
        let s = e.to_string();
        assert!(s.starts_with("AF_XDP needs CAP_NET_RAW:"), "{s}");
        assert_eq!(s.matches("AF_XDP").count(), 1, "{s}");
    }
}
