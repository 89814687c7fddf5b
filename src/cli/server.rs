//! The server's protection flags (limits, address filters, timeouts) as
//! typed by clap, and their validation into plain config.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use linerate_proto::auth::AuthKey;
use linerate_proto::spec::ServerLimits;
use linerate_stats::units::{parse_duration, parse_rate, parse_size};

use crate::server::guard::{AddressFilter, GuardConfig, DEFAULT_MAX_CONNECTIONS};

/// Limits a server enforces, named in every refusal or clamp they cause.
#[derive(Debug, Args)]
#[command(next_help_heading = "Server limits")]
pub struct GuardArgs {
    /// Most bit/s one UDP test may ask for, all streams together: clients
    /// asking to send more are refused, the server's own senders are paced
    /// down to it (e.g. 1G).
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<String>,
    /// Most buffer memory one test may cost (connections × (len + 4 ×
    /// window)); larger tests are refused (default 1G).
    #[arg(long, value_name = "SIZE")]
    pub max_test_memory: Option<String>,
    /// Connections waiting for their first frame at once (each holds a
    /// thread); further ones are closed at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Tests one client address may start per minute (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_tests_per_minute: u32,
    /// Accept connections only from these addresses (comma-separated CIDR
    /// blocks or addresses, e.g. 10.0.0.0/8,2001:db8::/32).
    #[arg(long, value_name = "CIDR,…")]
    pub allow: Option<String>,
    /// Refuse connections from these addresses (checked before --allow).
    #[arg(long, value_name = "CIDR,…")]
    pub deny: Option<String>,
    /// Time allowed for a connection's first frame and for each handshake
    /// step of a test (default 10s).
    #[arg(long, value_name = "DURATION")]
    pub handshake_timeout: Option<String>,
    /// A running stream test on which no data moves for this long is ended
    /// (default 30s; stretched for slow UDP paces and long intervals).
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,
}

/// Running one server per host in a fleet: what it exposes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Fleet")]
pub struct FleetArgs {
    /// Serve Prometheus/OpenMetrics text at http://ADDR:PORT/metrics (tests
    /// served and refused, bytes, datagrams, loss, limits hit, active tests).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Append one JSON record (the --json report) per completed test to
    /// FILE, one line each, for log shippers (--json-lines alone selects
    /// the format of stdout).
    #[arg(long = "json-lines-file", value_name = "FILE")]
    pub json_lines_file: Option<std::path::PathBuf>,
}

/// Applies the flags to `limits` and returns the connection-level config.
pub fn validate(a: &GuardArgs, limits: &mut ServerLimits) -> Result<GuardConfig> {
    if let Some(r) = &a.max_rate {
        let bps = parse_rate(r).context("--max-rate")?;
        if bps.is_nan() || bps < 1.0 {
            bail!("--max-rate must be at least 1 bit/s");
        }
        limits.max_rate_bps = Some(bps as u64);
    }
    if let Some(m) = &a.max_test_memory {
        limits.max_test_memory = parse_size(m).context("--max-test-memory")?;
    }
    if a.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    let timeout = |flag: &str, v: &Option<String>, default: Duration| -> Result<Duration> {
        match v {
            None => Ok(default),
            Some(v) => {
                let d = parse_duration(v).with_context(|| flag.to_owned())?;
                if d.is_zero() {
                    bail!("{flag} must be greater than zero");
                }
                Ok(d)
            }
        }
    };
    let defaults = GuardConfig::default();
    let handshake = timeout(
        "--handshake-timeout",
        &a.handshake_timeout,
        defaults.handshake,
    )?;
    limits.handshake_timeout_ms = handshake.as_millis() as u64;
    Ok(GuardConfig {
        filter: AddressFilter {
            allow: match &a.allow {
                Some(l) => AddressFilter::parse_list("--allow", l)?,
                None => Vec::new(),
            },
            deny: match &a.deny {
                Some(l) => AddressFilter::parse_list("--deny", l)?,
                None => Vec::new(),
            },
        },
        max_connections: a.max_connections,
        max_tests_per_minute: a.max_tests_per_minute,
        handshake,
        idle: timeout("--idle-timeout", &a.idle_timeout, defaults.idle)?,
    })
}

/// Reads the `--auth-key` file.
pub fn load_key(path: Option<&std::path::Path>) -> Result<Option<AuthKey>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let bytes = std::fs::read(path)
        .with_context(|| format!("--auth-key: cannot read {}", path.display()))?;
    AuthKey::from_file_contents(&bytes)
        .map(Some)
        .with_context(|| format!("--auth-key {}", path.display()))
}
