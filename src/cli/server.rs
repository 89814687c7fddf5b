//! The server's protection flags (limits, address filters, timeouts) as
//! typed by clap, and their validation into plain config.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use linerate_proto::auth::{AuthKey, MAX_KEY_FILE_LEN, WEAK_KEY_BITS};

use linerate_proto::limits::ServerLimits;
use linerate_stats::units::{parse_duration, parse_rate, parse_size};

use linerate_run::config::engine_offers;
use linerate_run::guard::{AddressFilter, GuardConfig, DEFAULT_MAX_CONNECTIONS};

/// Limits a server enforces, named in every refusal or clamp they cause.
#[derive(Debug, Args)]
#[command(next_help_heading = "Server limits")]
pub struct GuardArgs {
    /// Most bit/s one TCP or UDP stream test may use, all its streams of
    /// both directions together (e.g. 1G): clients asking to send more, or
    /// unpaced, are refused (they pace with --rate); the server's own
    /// senders are paced down to it.
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<String>,
    /// Most bit/s all running tests may use together (with
    /// --max-concurrent): each test reserves its rate while it runs; one
    /// that does not fit what is left is refused as busy, or clamped when
    /// only the server sends.
    #[arg(long, value_name = "RATE")]
    pub max_total_rate: Option<String>,
    /// Most buffer memory one test may cost (connections × (len + 4 ×
    /// window)); larger tests are refused (default 1G).
    #[arg(long, value_name = "SIZE")]
    pub max_test_memory: Option<String>,
    /// Connections waiting for their first frame at once (each holds a
    /// thread), one address at most three quarters of them; further ones
    /// are closed at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Tests one client address may start per minute (0: no limit); counted
    /// when a test asks for admission, after --auth-key's proof.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_tests_per_minute: u32,
    /// Accept connections only from these addresses (comma-separated CIDR
    /// blocks or addresses, e.g. 10.0.0.0/8,2001:db8::/32).
    #[arg(long, value_name = "CIDR,…")]
    pub allow: Option<String>,
    /// Engines a client may ask this server to use for its side with
    /// `--server-engine` (comma-separated, `auto` among them for the
    /// server's rule over the listed ones; `none`: no requests; default:
    /// every engine this kernel supports, and `auto`).
    #[arg(long, value_name = "LIST")]
    pub allow_engines: Option<String>,
    /// Refuse connections from these addresses (checked before --allow).
    #[arg(long, value_name = "CIDR,…")]
    pub deny: Option<String>,
    /// Time allowed for each handshake step of a test, and for everything
    /// from a connection's accept to its admission (first frame, --auth-key
    /// exchange, Hello) together (default 10s).
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
    limits.max_rate_bps = rate_flag("--max-rate", a.max_rate.as_deref())?;
    limits.max_total_rate_bps = rate_flag("--max-total-rate", a.max_total_rate.as_deref())?;
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
        limits.handshake(),
    )?;
    limits.handshake_timeout_ms = handshake.as_millis() as u64;
    limits.server_engines = engine_offers(a.allow_engines.as_deref()).context("--allow-engines")?;
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
        idle: timeout("--idle-timeout", &a.idle_timeout, defaults.idle)?,
    })
}

/// A server rate limit: at least 8 bit/s (TCP senders are paced in whole
/// bytes per second).
fn rate_flag(flag: &str, v: Option<&str>) -> Result<Option<u64>> {
    let Some(r) = v else {
        return Ok(None);
    };
    let bps = parse_rate(r).with_context(|| flag.to_owned())?;
    if bps.is_nan() || bps < 8.0 {
        bail!("{flag} must be at least 8 bit/s");
    }
    Ok(Some(bps as u64))
}

/// Reads the `--auth-key` file: a regular file of at most
/// [`MAX_KEY_FILE_LEN`] bytes (a device or FIFO is refused, never read);
/// warns when others may read it or the key looks weak.
pub fn load_key(path: Option<&std::path::Path>) -> Result<Option<AuthKey>> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = path else {
        return Ok(None);
    };
    let shown = path.display();
    let meta =
        std::fs::metadata(path).with_context(|| format!("--auth-key: cannot read {shown}"))?;
    if !meta.is_file() {
        bail!(
            "--auth-key {shown}: not a regular file (a key is one line of random text in a file)"
        );
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| {
            // One byte past the cap tells an over-long file from a full one.
            f.take(MAX_KEY_FILE_LEN as u64 + 1).read_to_end(&mut bytes)
        })
        .with_context(|| format!("--auth-key: cannot read {shown}"))?;
    let key = AuthKey::from_file_contents(&bytes).with_context(|| format!("--auth-key {shown}"))?;
    if meta.permissions().mode() & 0o077 != 0 {
        eprintln!(
            "linerate: warning: --auth-key {shown} can be read by other users (mode {:o}): chmod 600 {shown}",
            meta.permissions().mode() & 0o777
        );
    }
    let bits = key.estimated_bits();
    if bits < WEAK_KEY_BITS {
        eprintln!(
            "linerate: warning: --auth-key {shown} looks weak (about {bits:.0} bits of entropy): make one with `head -c 32 /dev/urandom | base64 > {shown}`"
        );
    }
    Ok(Some(key))
}
