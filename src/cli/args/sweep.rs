//! `linerate sweep`'s subcommands and their flags.

use clap::{Args, Subcommand};

use super::engine::EngineArgs;
use crate::cli::common::{OutputArgs, DEFAULT_PORT};
use crate::cli::repeat::RepeatArgs;

#[derive(Debug, Subcommand)]
pub enum SweepCmd {
    /// UDP: every --sizes × --pps (or --rates) point, one short test each.
    Udp(SweepUdpArgs),
}

#[derive(Debug, Args)]
pub struct SweepUdpArgs {
    /// Server to test against; omit to use an embedded loopback server.
    pub host: Option<String>,
    /// Server port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Datagram sizes, bytes, header included (e.g. 64,1472,8972).
    #[arg(long, value_name = "LIST", default_value = "1472")]
    pub sizes: String,
    /// Datagram rates per stream: START:STOP:STEP or a list (e.g. 50k:1M:50k).
    #[arg(long, value_name = "RANGE", conflicts_with = "rates")]
    pub pps: Option<String>,
    /// Payload bit rates per stream: START:STOP:STEP or a list (e.g. 100M:1G:100M).
    #[arg(long, value_name = "RANGE")]
    pub rates: Option<String>,
    /// Duration of each trial.
    #[arg(short, long, value_name = "DURATION", default_value = "2s")]
    pub time: String,
    /// Parallel streams per direction.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u16,
    /// Server sends, client receives.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Socket buffers on both ends (forced past the sysctl limits as root).
    #[arg(short, long, value_name = "SIZE")]
    pub window: Option<String>,
    /// Datagrams back to back per pacing tick.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub burst: u32,
    /// After the grid, binary-search (RFC 2544 style) each size for the
    /// highest rate in the grid's range with loss ≤ --max-loss.
    #[arg(long)]
    pub find_zero_loss: bool,
    /// Loss the zero-loss search accepts, percent.
    #[arg(long, value_name = "PERCENT", default_value = "0")]
    pub max_loss: f64,
    /// Write an SVG plot of received vs sent data and packet rates here.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Give up connecting after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub connect_timeout: String,
    #[command(flatten)]
    pub run: RepeatArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}
