//! One doctor check and its parts: the test kind the advice is for, the
//! verdict, the sysctl `--apply` would write, and where the checks run.

use serde::{Deserialize, Serialize};

/// The kind of test the advice is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Tcp,
    Udp,
    Latency,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "tcp" => Some(Kind::Tcp),
            "udp" => Some(Kind::Udp),
            "latency" | "rr" => Some(Kind::Latency),
            _ => None,
        }
    }
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Warn,
    /// The value could not be read here (absent in this namespace, not
    /// reported by this kernel or driver): nothing is claimed about it.
    Unknown,
}

/// One setting, read and judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The setting (`net.core.rmem_max`, `route MTU`, `cpu governor`, …).
    pub name: String,
    pub status: Status,
    /// The value as read (`None` when unreadable).
    pub value: Option<String>,
    /// Why this setting matters for the test kind, and what was judged.
    pub why: String,
    /// The exact command that would change it (when it can be changed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fix: Option<String>,
    /// The sysctl and value `--apply` would write (warnings about sysctls
    /// this process may write only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub apply: Option<Setting>,
}

/// A sysctl and a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub name: String,
    pub value: String,
}

/// Where the checks run: this process's named network namespace, if any.
/// Every command a network check prints (sysctls of the namespace, its
/// interfaces' MTU and offloads, `tc`, `ping`, a pinned `linerate`) goes
/// through [`Place::cmd`], so it runs where doctor looked (issue 28).
/// Host-wide checks (CPU governor, irqbalance, rlimits, the kernel command
/// line) print their commands as they are: they are the same in every
/// namespace, and `ulimit` is a shell builtin `ip netns exec` cannot run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    netns: Option<String>,
}

impl Place {
    /// This process's place.
    pub fn current() -> Place {
        Place {
            netns: crate::netns::current_name(),
        }
    }

    /// Inside the named namespace `name`.
    pub fn netns(name: &str) -> Place {
        Place {
            netns: Some(name.to_owned()),
        }
    }

    /// `command` as run here: `ip netns exec NAME command` in a named
    /// namespace, else unchanged.
    pub fn cmd(&self, command: impl Into<String>) -> String {
        crate::netns::wrap(command.into(), self.netns.as_deref())
    }
}
