//! `linerate doctor`: runs the checks, applies sysctls when asked, prints.

use std::io::Write;

use anyhow::{bail, Result};
use linerate_host::{doctor, render};

use crate::cli::DoctorConfig;

/// Runs the command. Exit status 0 whatever the findings (they are advice);
/// 1 if `--apply` could not write a sysctl.
pub fn run(cfg: &DoctorConfig) -> Result<()> {
    let mut report = doctor::run(cfg.kind, cfg.host.as_deref());
    if cfg.apply {
        doctor::apply(&mut report);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if cfg.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        render::doctor(&mut super::Clean(&mut out), &report)?;
    }
    out.flush()?;
    if !report.apply_errors.is_empty() {
        bail!(
            "--apply: {} sysctl(s) not written (root needed?): {}",
            report.apply_errors.len(),
            report.apply_errors.join("; ")
        );
    }
    Ok(())
}
