//! What the arguments of several subcommands share and nothing else: the
//! default port and the output-format flags. A leaf: `args/` and the
//! subcommands' own flag groups (`msg.rs`, …) import it, it imports none of
//! them.

use clap::Args;

pub const DEFAULT_PORT: u16 = 5201;

#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct OutputArgs {
    /// One JSON document at the end (the result model; see docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// JSON Lines: a start record, one record per interval as it happens, a summary.
    #[arg(long)]
    pub json_lines: bool,
    /// CSV: interval rows as they happen, then per-stream and sum rows.
    #[arg(long)]
    pub csv: bool,
}
