//! Would AF_XDP (the `xdp` engine's kernel bypass, issue 25) work on the
//! interface the test leaves by, and why not: capabilities, the kernel's
//! AF_XDP sockets, the interface itself (loopback, an XDP program already
//! there) and what its driver says it can do (native mode, zero-copy).
//! Read only: nothing is attached or bound (`linerate_xdp::readiness`).

use super::check::{Check, Place, Status};

/// The AF_XDP check of interface `dev`, its `ip` commands for `at` (the
/// other fixes are advice, or host-wide like a file's capabilities).
pub fn af_xdp(dev: &str, at: &Place) -> Check {
    let r = linerate_xdp::readiness(dev);
    let mode = |v: Option<bool>, yes: &str, no: &str| match v {
        Some(true) => yes.to_owned(),
        Some(false) => no.to_owned(),
        None => "unknown".to_owned(),
    };
    let value = if r.usable {
        format!(
            "usable: {} XDP, {}",
            mode(r.native, "native", "generic only"),
            mode(r.zero_copy, "zero-copy", "copy only")
        )
    } else {
        "not usable".to_owned()
    };
    let mut why = String::from(
        "AF_XDP bypasses the kernel's socket layer for UDP (the xdp engine); \
         it needs the capabilities, kernel support and an interface that takes it",
    );
    for note in &r.notes {
        why.push_str("; ");
        why.push_str(note);
    }
    Check {
        name: format!("{dev} AF_XDP"),
        status: if r.usable { Status::Ok } else { Status::Warn },
        value: Some(value),
        why,
        fix: r
            .fix
            .map(|f| if f.starts_with("ip ") { at.cmd(f) } else { f }),
        apply: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_25_doctor_says_why_af_xdp_would_not_work_on_loopback() {
        let c = af_xdp("lo", &Place::default());
        assert_eq!(c.name, "lo AF_XDP");
        assert_eq!(c.status, Status::Warn);
        assert_eq!(c.value.as_deref(), Some("not usable"));
        assert!(c.why.contains("loopback interface"), "{}", c.why);
        assert!(c.fix.is_some(), "a warning says how to fix it");
    }
}
