//! Before any method: the route to the server (egress interface, path
//! MTU), `ping`, `iface` of the egress, `doctor`'s findings, and one short
//! probe beside a light load, which tells whether the server runs probes
//! beside a stream (two tests at once) and whether one-way delay is
//! measurable (the clock offset known or bounded). An SLA threshold this
//! path cannot measure is refused here, before anything else runs.

use std::net::IpAddr;
use std::time::Duration;

use linerate_host::doctor::{self, Kind};
use linerate_host::ping::{self, PingParams};
use linerate_report::qualify::{PingSummary, Preflight, Sla};

use super::trials::{self, Stop};
use crate::cli::{QualifyConfig, QualifyEngine};
use linerate_run::outcome::INTERRUPTED;

/// The preflight's probe: 64-byte probes for this long, beside 1 Mbit/s.
const PROBE_MS: u64 = 500;

/// What the preflight found, and the server's address family.
pub struct Found {
    pub preflight: Preflight,
    pub v6: bool,
}

fn ping_server(host: &str, dest: IpAddr, quick: bool) -> (Option<PingSummary>, Option<String>) {
    let p = PingParams {
        dest,
        count: Some(if quick { 3 } else { 5 }),
        interval: Duration::from_millis(200),
        size: 56,
        wait: Duration::from_secs(1),
        force_raw: false,
    };
    match ping::run(host, &p, &INTERRUPTED, &mut |_| {}) {
        Ok(r) => (Some(PingSummary::from(&r)), None),
        Err(e) => (None, Some(format!("{e}"))),
    }
}

/// A preflight that found nothing yet (the run's record until it ran).
pub fn blank(address: String) -> Preflight {
    Preflight {
        address,
        ping: None,
        ping_error: None,
        interface: None,
        doctor: None,
        path_mtu: None,
        one_way_delay: false,
        one_way_unavailable: None,
        probes_beside_load: false,
        probe: None,
        notes: Vec::new(),
    }
}

/// Runs the checks; `Err` when the server cannot be reached or refuses.
pub fn run(cfg: &QualifyConfig, t: &QualifyEngine) -> Result<Found, Stop> {
    let dest = linerate_host::route::resolve(&cfg.host).map_err(|e| Stop::Failed(e.to_string()))?;
    let route = linerate_host::route::to(dest).map_err(|e| Stop::Failed(e.to_string()))?;
    let (ping, ping_error) = ping_server(&cfg.host, dest, cfg.quick);
    let mut notes = Vec::new();
    let load = trials::udp_at(t, 64, 1e6, PROBE_MS);
    let stalls = trials::Stalls::for_run(cfg.quick);
    let (l, p) = trials::beside(&load, &trials::probe_config(t, 64, PROBE_MS), &stalls);
    // The server refusing or unreachable (the load could not run) ends
    // the run here.
    l?;
    let (one_way_delay, one_way_unavailable, probes_beside_load, probe) = match p {
        Ok(r) => {
            let c2s =
                r.rr.as_ref()
                    .and_then(|rr| rr.phases.first())
                    .map(|ph| &ph.client_to_server);
            let why = match c2s {
                Some(o) if o.latency.is_some() => None,
                Some(o) => Some(o.unavailable.clone().unwrap_or_else(|| "no samples".into())),
                None => Some("the probe measured no phase".into()),
            };
            notes.push(trials::pacing_words());
            (why.is_none(), why, true, Some(r))
        }
        Err(e) => {
            notes.push(format!(
                "probes beside a stream were refused ({e}): latency under load is not measured \
                 (a server older than this client runs them only with --max-concurrent 2)"
            ));
            (
                false,
                Some("no probe ran (see the note)".into()),
                false,
                None,
            )
        }
    };
    Ok(Found {
        v6: dest.is_ipv6(),
        preflight: Preflight {
            address: dest.to_string(),
            ping,
            ping_error,
            interface: route.dev.as_deref().and_then(linerate_host::iface::status),
            doctor: Some(doctor::run(Kind::Udp, Some(&cfg.host))),
            path_mtu: route.mtu,
            one_way_delay,
            one_way_unavailable,
            probes_beside_load,
            probe,
            notes,
        },
    })
}

/// An SLA threshold the preflight showed this path cannot measure, by
/// its KPI's name.
pub fn unmeasurable(sla: &Sla, p: &Preflight) -> Option<String> {
    if sla.delay_ns.is_some() && !p.one_way_delay {
        return Some(format!(
            "SLA delay (one-way frame transfer delay) cannot be measured on this path: {} \
             (judge the round trip with rtt=… instead)",
            p.one_way_unavailable
                .as_deref()
                .unwrap_or("no clock offset")
        ));
    }
    if sla.rtt_ns.is_some() && !p.probes_beside_load {
        return Some(
            "SLA rtt (delay under load) cannot be measured: the server refused probes beside \
             a stream (see the preflight's note)"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A threshold the preflight showed unmeasurable is refused naming
    /// its KPI (`run_engine` then stops before any method).
    #[test]
    fn issue_27_an_unmeasurable_sla_names_its_kpi() {
        let mut p = blank("192.0.2.1".into());
        p.one_way_unavailable = Some("no clock offset".into());
        let delay = Sla {
            delay_ns: Some(5_000_000),
            ..Sla::default()
        };
        let why = unmeasurable(&delay, &p).expect("refused");
        assert!(
            why.starts_with("SLA delay") && why.contains("no clock offset"),
            "{why}"
        );
        let rtt = Sla {
            rtt_ns: Some(5_000_000),
            ..Sla::default()
        };
        assert!(unmeasurable(&rtt, &p).is_some_and(|w| w.starts_with("SLA rtt")));
        p.one_way_delay = true;
        p.probes_beside_load = true;
        assert_eq!(unmeasurable(&delay, &p), None);
        assert_eq!(unmeasurable(&rtt, &p), None);
        assert_eq!(unmeasurable(&Sla::default(), &blank(String::new())), None);
    }
}
