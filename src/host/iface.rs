//! `linerate iface [DEV] [--watch [INTERVAL]]`: interface status once, or
//! live counters per interval (redrawn in place on a terminal, one line per
//! interface and interval otherwise).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use linerate_host::counters::{self, Counters, Traffic};
use linerate_host::{iface, render};
use serde::Serialize;

use crate::cli::{HostFormat, IfaceConfig};

/// Runs the command.
pub fn run(cfg: &IfaceConfig) -> Result<()> {
    match cfg.watch {
        Some(every) => watch(cfg, every),
        None => show(cfg),
    }
}

fn show(cfg: &IfaceConfig) -> Result<()> {
    let list = match &cfg.dev {
        Some(d) => vec![iface::status(d).with_context(|| format!("interface {d} vanished"))?],
        None => iface::all(),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cfg.format {
        HostFormat::Human => {
            let mut clean = super::Clean(&mut out);
            for i in &list {
                render::interface(&mut clean, i)?;
            }
        }
        HostFormat::Json => {
            #[derive(Serialize)]
            struct Doc<'a> {
                interfaces: &'a [iface::Interface],
            }
            serde_json::to_writer_pretty(&mut out, &Doc { interfaces: &list })?;
            writeln!(out)?;
        }
        HostFormat::JsonLines => {
            for i in &list {
                serde_json::to_writer(&mut out, i)?;
                writeln!(out)?;
            }
        }
    }
    Ok(())
}

/// One interface over one `--watch` interval.
#[derive(Debug, Serialize)]
struct WatchRecord<'a> {
    /// End of the interval, seconds since the watch began.
    time_s: f64,
    #[serde(flatten)]
    traffic: &'a Traffic,
}

fn clean<W: Write>(w: W) -> super::Clean<W> {
    super::Clean(w)
}

fn watch(cfg: &IfaceConfig, every: Duration) -> Result<()> {
    let names = match &cfg.dev {
        Some(d) => vec![d.clone()],
        None => iface::names(),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let live = cfg.format == HostFormat::Human && out.is_terminal();
    let begin = Instant::now();
    let mut last: Vec<(Option<Counters>, Instant)> = names
        .iter()
        .map(|n| (counters::read(n), Instant::now()))
        .collect();
    if cfg.format == HostFormat::Human && !live {
        writeln!(out, "{:>8} {}", "time", render::TRAFFIC_HEADER)?;
    }
    let mut n = 0u64;
    while cfg.count.map_or(true, |c| n < c) {
        n += 1;
        // An absolute schedule: intervals do not drift by the time spent
        // printing.
        let due = begin + every * n as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let time_s = begin.elapsed().as_secs_f64();
        let mut rows = Vec::new();
        for (name, (prev, at)) in names.iter().zip(last.iter_mut()) {
            let now = Instant::now();
            let cur = counters::read(name);
            let t = match (prev.as_ref(), cur.as_ref()) {
                (Some(a), Some(b)) => Some(Traffic::between(
                    name,
                    a,
                    b,
                    now.duration_since(*at).as_secs_f64(),
                )),
                _ => None,
            };
            *prev = cur;
            *at = now;
            rows.push((name, t));
        }
        if live {
            // Home the cursor and clear the screen, then draw the table.
            write!(out, "\x1b[H\x1b[2J")?;
            writeln!(
                out,
                "linerate iface --watch: every {:?}, interval {n}{} (Ctrl-C to stop)",
                every,
                cfg.count.map_or(String::new(), |c| format!(" of {c}"))
            )?;
            writeln!(out, "{}", render::TRAFFIC_HEADER)?;
        }
        for (name, t) in &rows {
            match (cfg.format, t) {
                (HostFormat::JsonLines, Some(t)) => {
                    serde_json::to_writer(&mut out, &WatchRecord { time_s, traffic: t })?;
                    writeln!(out)?;
                }
                (HostFormat::JsonLines, None) => {
                    writeln!(
                        out,
                        "{}",
                        serde_json::json!({"time_s": time_s, "name": name, "error": "interface not found"})
                    )?;
                }
                // Lines written through `Clean`: names are the system's.
                // The redraw's own escapes above go out raw.
                (_, Some(t)) if live => writeln!(clean(&mut out), "{}", render::traffic_line(t))?,
                (_, Some(t)) => {
                    writeln!(clean(&mut out), "{time_s:>8.2} {}", render::traffic_line(t))?
                }
                (_, None) if live => writeln!(clean(&mut out), "{name:<12} (interface not found)")?,
                (_, None) => writeln!(
                    clean(&mut out),
                    "{time_s:>8.2} {name:<12} (interface not found)"
                )?,
            }
        }
        out.flush()?;
    }
    Ok(())
}
