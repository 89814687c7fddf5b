//! `linerate ping HOST`: replies as they come (human output), statistics at
//! the end; Ctrl-C ends the run early and still prints them.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use linerate_host::{ping, render};

use crate::cli::PingConfig;

static STOP: AtomicBool = AtomicBool::new(false);

/// Runs the command. Exit status: 0 if any request was answered, 1 if none
/// was (100% loss) or the socket failed.
pub fn run(cfg: &PingConfig) -> ExitCode {
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::Relaxed) {
            std::process::exit(130);
        }
    });
    let stdout = std::io::stdout();
    if !cfg.json {
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "PING {} ({}): {} bytes of payload{}",
            cfg.host,
            cfg.params.dest,
            cfg.params.size,
            cfg.params
                .count
                .map_or(String::new(), |c| format!(", {c} requests")),
        );
    }
    let json = cfg.json;
    let mut print = |r: &ping::ReplyRecord| {
        if !json {
            let mut out = stdout.lock();
            let _ = writeln!(out, "{}", render::ping_reply(r));
        }
    };
    let report = match ping::run(&cfg.host, &cfg.params, &STOP, &mut print) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("linerate: ping {}: {e}", cfg.host);
            return ExitCode::from(1);
        }
    };
    let mut out = stdout.lock();
    let written = if json {
        serde_json::to_writer_pretty(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        render::ping_summary(&mut out, &report)
    };
    if let Err(e) = written.and_then(|()| out.flush()) {
        eprintln!("linerate: writing output: {e}");
        return ExitCode::from(1);
    }
    if report.received == 0 {
        eprintln!(
            "linerate: ping {}: no reply to {} request(s): 100% loss",
            cfg.host, report.sent
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
