//! `linerate doctor`: reads the host settings that decide what a test can
//! reach and says, for each, whether it is fine for the kind of test asked
//! about, why it matters, and the exact command that would change it.
//!
//! Nothing is changed unless [`apply`] is called, and that changes only
//! sysctls (the checks that name one), returning the command that puts the
//! old values back.

mod af_xdp;
mod check;
mod checks;

use serde::{Deserialize, Serialize};

use crate::sysctl;

pub use check::{Check, Kind, Place, Setting, Status};

/// What `--apply` did to one sysctl.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub name: String,
    pub old: String,
    /// The value read back after writing (the kernel may clamp it).
    pub new: String,
}

/// Everything `doctor` found (and changed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// The test kind the advice is for.
    #[serde(rename = "for")]
    pub kind: Kind,
    /// The host whose route was checked, if one was given.
    pub host: Option<String>,
    /// The interface the checks of offloads, MTU and NUMA looked at.
    pub interface: Option<String>,
    pub checks: Vec<Check>,
    /// Sysctls changed by `--apply` (empty otherwise).
    pub applied: Vec<Applied>,
    /// Errors writing sysctls under `--apply`.
    pub apply_errors: Vec<String>,
    /// A command that restores the changed sysctls' old values (prefixed
    /// with `ip netns exec NAME` when run in a named namespace).
    pub restore_command: Option<String>,
}

impl DoctorReport {
    pub fn warnings(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Warn)
            .count()
    }
}

/// Runs every check for `kind`; `host` selects the route (and with it the
/// interface) to check, else the default route's interface.
pub fn run(kind: Kind, host: Option<&str>) -> DoctorReport {
    run_at(kind, host, &Place::current())
}

/// [`run`], with the network checks' commands for `at`.
pub fn run_at(kind: Kind, host: Option<&str>, at: &Place) -> DoctorReport {
    let (route_check, dev) = checks::route(kind, host, at);
    let mut checks = checks::sysctls(kind, at);
    checks.extend(route_check);
    if let Some(dev) = &dev {
        checks.extend(checks::offloads(kind, dev, at));
        checks.push(checks::numa(dev, at));
        checks.push(af_xdp::af_xdp(dev, at));
    }
    checks.push(checks::governor(kind));
    checks.push(checks::irqbalance(kind));
    checks.extend(checks::rlimits(kind));
    checks.push(checks::isolation(kind));
    DoctorReport {
        kind,
        host: host.map(str::to_owned),
        interface: dev,
        checks,
        applied: Vec::new(),
        apply_errors: Vec::new(),
        restore_command: None,
    }
}

/// Writes the recommended value of every warned sysctl, records what
/// changed and the command that restores the old values.
pub fn apply(report: &mut DoctorReport) {
    let mut restore = Vec::new();
    for c in &report.checks {
        let (Status::Warn, Some(set), Some(old)) = (c.status, &c.apply, &c.value) else {
            continue;
        };
        match sysctl::write(&set.name, &set.value) {
            Ok(new) => {
                restore.push((set.name.clone(), old.clone()));
                report.applied.push(Applied {
                    name: set.name.clone(),
                    old: old.clone(),
                    new: new.unwrap_or_else(|| set.value.clone()),
                });
            }
            Err(e) => report.apply_errors.push(e.to_string()),
        }
    }
    if !restore.is_empty() {
        // Run where doctor ran: in its named namespace, if any (issue 28).
        report.restore_command = Some(Place::current().cmd(sysctl::command(&restore)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reports_every_sysctl_once() {
        for kind in [Kind::Tcp, Kind::Udp, Kind::Latency] {
            let r = run(kind, Some("127.0.0.1"));
            assert_eq!(r.interface.as_deref(), Some("lo"));
            for name in [
                "net.core.rmem_max",
                "net.ipv4.tcp_rmem",
                "net.core.busy_read",
                "route MTU",
            ] {
                assert_eq!(
                    r.checks.iter().filter(|c| c.name == name).count(),
                    1,
                    "{name}"
                );
            }
            for c in &r.checks {
                assert!(!c.why.is_empty(), "{c:?}");
                if c.status == Status::Warn {
                    assert!(c.fix.is_some(), "a warning says how to fix it: {c:?}");
                }
                if c.status == Status::Unknown {
                    assert!(c.value.is_none() || c.apply.is_none(), "{c:?}");
                }
            }
        }
    }

    /// In a named namespace every network check's command carries `ip
    /// netns exec NAME`, as the restore command does; host-wide ones do not
    /// (issue 28).
    #[test]
    fn issue_28_network_fixes_run_in_the_doctors_namespace() {
        let prefix = "ip netns exec lab-a ";
        let host_wide = ["cpu governor", "irqbalance", "RLIMIT", "isolcpus"];
        for kind in [Kind::Tcp, Kind::Udp, Kind::Latency] {
            let here = run_at(kind, Some("127.0.0.1"), &Place::default());
            let there = run_at(kind, Some("127.0.0.1"), &Place::netns("lab-a"));
            let mut prefixed = 0;
            for (h, t) in here.checks.iter().zip(&there.checks) {
                let (Some(hf), Some(tf)) = (&h.fix, &t.fix) else {
                    assert_eq!(h.fix, t.fix, "{t:?}");
                    continue;
                };
                // AF_XDP's fixes are advice but for its `ip` commands.
                let advice = t.name.ends_with("AF_XDP") && !hf.starts_with("ip ");
                if advice || host_wide.iter().any(|n| t.name.contains(n)) {
                    assert_eq!(hf, tf, "a host-wide fix is the same: {t:?}");
                    continue;
                }
                assert!(tf.starts_with(prefix), "{tf}");
                assert_eq!(tf.replace(prefix, ""), *hf, "only the prefix is added");
                if t.name == "net.core.default_qdisc" {
                    // Every command of the line, not just the first.
                    assert_eq!(tf.matches(prefix).count(), 2, "{tf}");
                }
                prefixed += 1;
            }
            // The sysctls and congestion control, lo's four offloads, NUMA.
            assert!(prefixed >= 7, "{kind:?}: {prefixed} prefixed fixes");
        }
    }
}
