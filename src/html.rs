//! `--report FILE.html`: gathers what the page shows besides the results —
//! the host and kernel (from `/proc`, `iface` and `doctor`), the command
//! line, the version — and writes `report::html`'s page.

use std::path::Path;

use anyhow::{Context, Result};
use linerate_host::doctor::{self, Kind, Status};
use linerate_host::iface;
use linerate_report::compare::CompareReport;
use linerate_report::html::{Page, Section};
use linerate_report::model::SweepReport;
use linerate_report::render::{self, export, Format};
use linerate_report::repeat::RepeatReport;
use linerate_report::{plot, plot_extra, plot_rr, Report};

use crate::cli::{ClientConfig, CompareConfig, Target};

/// The command line, quoted for a POSIX shell where needed.
fn command_line() -> String {
    std::env::args()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn host_rows() -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let mut add = |k: &str, v: Option<String>| {
        rows.push((k.to_owned(), v.unwrap_or_else(|| "not readable".into())));
    };
    add("hostname", read("/proc/sys/kernel/hostname"));
    add("kernel", read("/proc/version"));
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = read("/proc/cpuinfo").and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, m)| m.trim().to_owned())
    });
    add(
        "CPUs",
        Some(format!(
            "{cpus} × {}",
            model.unwrap_or_else(|| "model not reported".into())
        )),
    );
    add(
        "memory",
        read("/proc/meminfo").and_then(|t| {
            t.lines()
                .next()
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        }),
    );
    add("kernel command line", read("/proc/cmdline"));
    rows
}

fn interface_lines() -> Vec<String> {
    let onoff = |v: Option<bool>| match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    };
    iface::all()
        .iter()
        .map(|i| {
            format!(
                "{:<10} {:<8} mtu {:<6} speed {:<8} driver {:<12} gro {} gso {} tso {} lro {}  {}",
                i.name,
                i.state,
                i.mtu.map_or("?".into(), |m| m.to_string()),
                i.speed_mbps.map_or("?".into(), |s| format!("{s}M")),
                i.driver.as_deref().unwrap_or("?"),
                onoff(i.offloads.gro),
                onoff(i.offloads.gso),
                onoff(i.offloads.tso),
                onoff(i.offloads.lro),
                i.addresses.join(" "),
            )
        })
        .collect()
}

/// A page with everything but the results.
fn page(title: String, engines: String, cfg: &ClientConfig, kind: Kind) -> Page {
    let host = match &cfg.target {
        Target::Remote { host, .. } => host.clone(),
        Target::Embedded => "127.0.0.1".into(),
    };
    let checks = doctor::run(kind, Some(&host))
        .checks
        .into_iter()
        .map(|c| {
            let status = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Unknown => "unknown",
            };
            (
                status.to_owned(),
                c.name,
                c.value.unwrap_or_else(|| "not readable".into()),
            )
        })
        .collect();
    Page {
        title,
        command_line: command_line(),
        version: format!("linerate {}", env!("CARGO_PKG_VERSION")),
        engines,
        generated: utc_now(),
        host: host_rows(),
        interfaces: interface_lines(),
        checks,
        sections: Vec::new(),
    }
}

/// Now as `YYYY-MM-DD hh:mm:ss UTC`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let ((y, m, d), rem) = linerate_report::civil::split_secs(secs);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn kind_of(r: &Report) -> Kind {
    match (r.rr.is_some(), r.test.protocol.as_str()) {
        (true, _) => Kind::Latency,
        (false, "udp") => Kind::Udp,
        _ => Kind::Tcp,
    }
}

fn engines(r: &Report) -> String {
    format!(
        "client {}, server {}",
        r.test.client_engine, r.test.server_engine
    )
}

/// The human output of a test, as text.
fn human_text(r: &Report) -> Result<String> {
    let mut buf = Vec::new();
    {
        let mut sink = render::sink(Format::Human, Box::new(&mut buf));
        sink.start(&r.test)?;
        for rec in &r.intervals {
            sink.interval(rec)?;
        }
        sink.finish(r)?;
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn write(path: &Path, p: &Page) -> Result<()> {
    std::fs::write(path, linerate_report::html::page(p))
        .with_context(|| format!("--report: writing {}", path.display()))
}

/// `--report` of one test (tcp, udp, rr, crr), if asked for.
pub fn test(cfg: &ClientConfig, r: &Report) -> Result<()> {
    let Some(path) = &cfg.report else {
        return Ok(());
    };
    let mut p = page(
        format!(
            "linerate {} {} test to {}",
            r.test.protocol,
            r.test.kind.name(),
            r.test.server
        ),
        engines(r),
        cfg,
        kind_of(r),
    );
    let svg = if r.rr.is_some() {
        plot_rr::svg(r).ok()
    } else {
        plot_extra::intervals_svg(r).ok()
    };
    p.sections.push(Section {
        heading: "Results".into(),
        text: Some(human_text(r)?),
        svg,
    });
    if r.test.flows.is_some() {
        p.sections.push(Section {
            heading: "Per-flow rates".into(),
            text: None,
            svg: linerate_report::plot_flows::svg(r).ok(),
        });
    }
    write(path, &p)
}

/// `--report` of a sweep, if asked for.
pub fn sweep(cfg: &ClientConfig, r: &SweepReport) -> Result<()> {
    let Some(path) = &cfg.report else {
        return Ok(());
    };
    let mut p = page(
        format!("linerate sweep udp to {}", r.test.server),
        format!("client {}", cfg.engine),
        cfg,
        Kind::Udp,
    );
    let mut buf = Vec::new();
    {
        let mut sink = render::sweep_sink(Format::Human, Box::new(&mut buf));
        sink.start(&r.test)?;
        for t in &r.trials {
            sink.trial(t)?;
        }
        sink.finish(r)?;
    }
    p.sections.push(Section {
        heading: "Results".into(),
        text: Some(String::from_utf8_lossy(&buf).into_owned()),
        svg: plot::sweep_svg(r).ok(),
    });
    write(path, &p)
}

/// `--report` of a repeated test, if asked for.
pub fn repeated(cfg: &ClientConfig, r: &RepeatReport, last: Option<&Report>) -> Result<()> {
    let Some(path) = &cfg.report else {
        return Ok(());
    };
    let kind = last.map_or(Kind::Tcp, kind_of);
    let mut p = page(
        format!(
            "linerate {} {} test to {}, {} trials",
            r.test.protocol,
            r.test.kind.name(),
            r.test.server,
            r.repeat
        ),
        format!(
            "client {}, server {}",
            r.test.client_engine, r.test.server_engine
        ),
        cfg,
        kind,
    );
    let mut buf = Vec::new();
    export(r, Format::Human, &mut buf)?;
    p.sections.push(Section {
        heading: format!("{} trials", r.completed),
        text: Some(String::from_utf8_lossy(&buf).into_owned()),
        svg: plot_extra::repeat_svg(r).ok(),
    });
    if let Some(last) = last {
        p.sections.push(Section {
            heading: "The last trial".into(),
            text: Some(human_text(last)?),
            svg: None,
        });
    }
    write(path, &p)
}

/// `--report` of `linerate compare`, if asked for: the table and the bar
/// chart, and every variant's engines.
pub fn compare(cfg: &CompareConfig, r: &CompareReport) -> Result<()> {
    let Some(path) = &cfg.report else {
        return Ok(());
    };
    // The host facts need one test's target: every variant has the same.
    let Some(test) = cfg.variants.iter().find_map(|v| v.config.as_ref().ok()) else {
        anyhow::bail!("--report: no variant could run, so there is nothing to report");
    };
    let kind = match r.test.as_str() {
        "rr" | "crr" => Kind::Latency,
        "udp" => Kind::Udp,
        _ => Kind::Tcp,
    };
    let engines = r
        .variants
        .iter()
        .map(|v| match (&v.client_engine, &v.server_engine) {
            (Some(c), Some(s)) => format!("{}: client {c}, server {s}", v.name),
            _ => format!("{}: did not run", v.name),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut p = page(
        format!("linerate compare {} {}", r.test, r.args.join(" ")),
        engines,
        test,
        kind,
    );
    let mut buf = Vec::new();
    export(r, Format::Human, &mut buf)?;
    p.sections.push(Section {
        heading: "Comparison".into(),
        text: Some(String::from_utf8_lossy(&buf).into_owned()),
        svg: linerate_report::compare_plot::svg(r).ok(),
    });
    write(path, &p)
}
