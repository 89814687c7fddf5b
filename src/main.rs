//! linerate's entry point: parse the command line, run the command, map
//! failures to exit codes and print them. Nothing else lives here.

mod cli;
mod client;
mod control;
mod server;
mod sweep;
mod test_type;

use std::process::ExitCode;
use std::sync::atomic::Ordering;

fn main() -> ExitCode {
    let command = match cli::parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout with status 0, errors with 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match command {
        cli::Command::Server(cfg) => match server::run(&cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("linerate: {e:#}");
                ExitCode::from(1)
            }
        },
        cli::Command::Rr(cfg) => {
            let _ = ctrlc::set_handler(|| {
                if client::INTERRUPTED.swap(true, Ordering::Relaxed) {
                    std::process::exit(130);
                }
            });
            match client::run_rr(&cfg) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("linerate: {e:#}");
                    ExitCode::from(e.exit_code() as u8)
                }
            }
        }
        cli::Command::Sweep(cfg) => {
            let _ = ctrlc::set_handler(|| {
                if client::INTERRUPTED.swap(true, Ordering::Relaxed) {
                    std::process::exit(130);
                }
            });
            match sweep::run(&cfg) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("linerate: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        cli::Command::Tcp(cfg) | cli::Command::Udp(cfg) => {
            // First Ctrl-C: abort the test cleanly (tell the server, report
            // nothing false); a second one: the default, immediate exit.
            let _ = ctrlc::set_handler(|| {
                if client::INTERRUPTED.swap(true, Ordering::Relaxed) {
                    std::process::exit(130);
                }
            });
            match client::run(&cfg) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("linerate: {e:#}");
                    ExitCode::from(e.exit_code() as u8)
                }
            }
        }
    }
}
