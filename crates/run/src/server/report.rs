//! What the server records when a native test ends: the report in the
//! server's format on stdout (handed to its printer, which writes it off
//! the test's thread), the `--json-lines` file and the `--metrics`
//! counters for a completed test; the log line and counters for a refused
//! or failed one.

use std::net::SocketAddr;

use linerate_proto::session::server::ServerOutcome;
use linerate_proto::session::SessionError;
use linerate_proto::wire::Side;
use linerate_report::model::TestInfo;

use super::ServerTest;
use crate::about::software;
use crate::test_type;

pub(super) fn report(test: &ServerTest<'_>, peer: SocketAddr) {
    let shared = test.shared;
    match test.session.outcome() {
        Some(ServerOutcome::Completed {
            spec,
            local,
            remote,
        }) => {
            if shared.quiet {
                return;
            }
            let info = TestInfo {
                server: test.local_addr.clone(),
                client: Some(peer.to_string()),
                client_software: test.session.client_software().unwrap_or("").to_owned(),
                server_software: software(),
                client_engine: remote.engine.clone(),
                client_loop: remote.event_loop,
                server_engine: local.engine.clone(),
                server_loop: local.event_loop,
                client_ld_preload: remote.ld_preload.clone(),
                server_ld_preload: local.ld_preload.clone(),
                start_unix_ms: test.start_unix_ms,
                ..TestInfo::from_spec(spec, Side::Server)
            };
            let build = test_type::of(spec).build;
            let mut report = build(info.clone(), spec, remote, local, test.notes.clone());
            if test.session.stopped_early() {
                // The client's user interrupted it: what ran, marked so.
                report.interrupted = true;
                if let Some(rr) = &mut report.rr {
                    report
                        .notes
                        .push(linerate_report::build::keep_phases_run(rr));
                }
            }
            shared
                .metrics
                .completed(spec, local, &report, &peer.ip().to_string());
            if let Some(j) = &shared.json_lines {
                j.append(&report);
            }
            if let Some(out) = &shared.out {
                out.report(&info, &report);
            }
        }
        Some(ServerOutcome::Refused(r)) => {
            shared.metrics.refused(&crate::metrics::wire_name(&r.code));
            // Proto's limits name the flag in the refusal.
            for (flag, limit) in [
                ("(--max-rate)", "max_rate"),
                ("; --max-total-rate)", "max_total_rate"),
            ] {
                if r.message.contains(flag) {
                    shared.metrics.limit_hit(limit);
                }
            }
            if !shared.quiet {
                shared
                    .guard
                    .log
                    .log(format_args!("refused {peer} ({:?}): {}", r.code, r.message));
            }
        }
        // An embedded server's client reports the failure itself.
        Some(ServerOutcome::Failed(e)) if !shared.quiet => {
            shared.metrics.failed(test.session.spec());
            // The session words the --max-time cut (proto's server session).
            if e.to_string().contains("(--max-time)") {
                shared.metrics.limit_hit("max_time");
            }
            if matches!(e, SessionError::PeerSilent(_)) {
                shared.metrics.limit_hit("heartbeat");
            }
            shared
                .guard
                .outcomes
                .log(format_args!("test from {peer} failed: {e}"))
        }
        Some(ServerOutcome::Failed(_)) => {}
        None => shared
            .guard
            .log
            .log(format_args!("test from {peer} ended unexpectedly")),
    }
}
