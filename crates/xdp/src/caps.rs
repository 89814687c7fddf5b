//! The capabilities AF_XDP needs, read from `/proc/self/status`, so a
//! refusal names the missing ones before any syscall fails with a bare
//! EPERM.

/// CAP_NET_ADMIN: attach an XDP program (and create an XSKMAP).
const NET_ADMIN: u32 = 12;
/// CAP_NET_RAW: create an AF_XDP socket.
const NET_RAW: u32 = 13;
/// CAP_SYS_ADMIN: stands in for CAP_BPF.
const SYS_ADMIN: u32 = 21;
/// CAP_BPF (Linux 5.8): load BPF programs and create maps.
const BPF: u32 = 39;

/// The effective capability set of this thread.
fn effective() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .or_else(|_| std::fs::read_to_string("/proc/self/status"))
        .ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

/// The capabilities AF_XDP needs that this thread lacks (empty when it
/// has them all, or when they cannot be read: the syscalls then say).
pub fn missing() -> Vec<&'static str> {
    let Some(eff) = effective() else {
        return Vec::new();
    };
    missing_from(eff)
}

fn missing_from(eff: u64) -> Vec<&'static str> {
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    let mut out = Vec::new();
    if !has(NET_RAW) {
        out.push("CAP_NET_RAW");
    }
    if !has(NET_ADMIN) {
        out.push("CAP_NET_ADMIN");
    }
    if !has(BPF) && !has(SYS_ADMIN) {
        out.push("CAP_BPF");
    }
    out
}

/// Refuses when a capability is missing.
pub(crate) fn check() -> Result<(), crate::error::XdpError> {
    let missing = missing();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(crate::error::XdpError::Capabilities {
            missing: missing.join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_25_missing_capabilities_are_named() {
        assert_eq!(missing_from(0), ["CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_BPF"]);
        let root = (1u64 << NET_RAW) | (1 << NET_ADMIN) | (1 << SYS_ADMIN);
        assert!(missing_from(root).is_empty());
        assert_eq!(missing_from(1 << NET_RAW | 1 << BPF), ["CAP_NET_ADMIN"]);
    }
}
