//! `linerate server`'s flags (its guard and fleet flags are
//! `cli::server`'s, flattened in).

use std::net::IpAddr;

use clap::Args;

use super::engine::EngineArgs;
use crate::cli::common::{OutputArgs, DEFAULT_PORT};
use crate::cli::server::{FleetArgs, GuardArgs};

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on (default: all, IPv6 and IPv4).
    #[arg(short = 'B', long)]
    pub bind: Option<IpAddr>,
    /// TCP port for control and data connections.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Exit after the first test (completed or failed).
    #[arg(short = '1', long)]
    pub once: bool,
    /// Tests allowed at once; further clients are refused as busy. It
    /// counts tests, not streams or flows: a --flows test is one test
    /// (--max-flows bounds each test's flows).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub max_concurrent: usize,
    /// Refuse tests with more streams per direction than this (default 128).
    #[arg(long, value_name = "N")]
    pub max_streams: Option<u16>,
    /// Refuse --flows tests with more flows per direction than this
    /// (default 10000), before any data connection opens.
    #[arg(long, value_name = "N")]
    pub max_flows: Option<u32>,
    /// Event-loop threads serving a --flows test (default: the client's
    /// --threads); crr: threads accepting and answering its connections.
    #[arg(long, value_name = "T")]
    pub threads: Option<u16>,
    /// Refuse tests longer than this (default 24h).
    #[arg(long, value_name = "DURATION")]
    pub max_time: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Pin stream threads to these CPUs, round robin (e.g. 0-3,6).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
    #[command(flatten)]
    pub fleet: FleetArgs,
}
