//! The test in one line, from the reporting side's point of view: the
//! head of a human report, of `--repeat`'s and of a plot's caption.

use linerate_proto::spec::{Direction, Limit, Pace};
use linerate_proto::test_type::Shape;
use linerate_proto::wire::Side;
use linerate_stats::units::{format_bytes, format_count_rate, format_rate, format_size};

use super::text::wrap;
use crate::model::TestInfo;

/// The test in one line, from the reporting side's point of view: who
/// talks to whom, what kind, direction, streams, sizes and rates, limit
/// and engine (the start of a report, and the head of `--repeat`'s).
pub(crate) fn test_line(i: &TestInfo) -> String {
    let (who, route, engine) = speakers(i);
    if i.rules().shape != Shape::Stream {
        return exchange_line(i, who, &route, engine);
    }
    let len = i.len.unwrap_or(0);
    let unit = match &i.udp {
        Some(u) => format!(
            "{} B datagrams at {}{}{}",
            len,
            pace_words(u.pace),
            if u.burst > 1 {
                format!(" in bursts of {}", u.burst)
            } else {
                String::new()
            },
            if u.verify { ", payloads verified" } else { "" }
        ),
        None => format!(
            "{} writes{}",
            format_size(u64::from(len)),
            if i.tcp.skip_rx_copy {
                ", receivers skip the copy (MSG_TRUNC)"
            } else {
                ""
            }
        ),
    };
    let streams = match i.flows {
        Some(f) => format!(
            "{} flow{}{}",
            f.count,
            if f.count == 1 { "" } else { "s" },
            loop_words(i, f.threads)
        ),
        None => format!(
            "{} stream{}",
            i.streams,
            if i.streams == 1 { "" } else { "s" }
        ),
    };
    let line = format!(
        "{who}: {} {} {route} · {streams} · {unit} · {} · engine {}",
        i.protocol,
        i.direction.map_or("", direction_words),
        i.limit.map(limit_words).unwrap_or_default(),
        engine,
    );
    if i.busy_poll {
        format!("{line} · busy polling")
    } else {
        line
    }
}

/// ` on T event-loop threads (KIND)`: the loops of `--flows`, named for
/// what the reporting side's loops waited with, as its results recorded
/// it ([`TestInfo::client_loop`], [`TestInfo::server_loop`]; left out
/// where none was recorded).
fn loop_words(i: &TestInfo, threads: u16) -> String {
    let kind = match i.reported_by {
        Side::Server => i.server_loop,
        Side::Client => i.client_loop,
    };
    format!(
        " on {threads} event-loop thread{}{}",
        if threads == 1 { "" } else { "s" },
        kind.map_or(String::new(), |k| format!(" ({})", k.name()))
    )
}

/// Who talks to whom, from the reporting side's point of view: the
/// reporter, the route (`to HOST`, `from CLIENT`) and the reporter's engine.
fn speakers(i: &TestInfo) -> (&'static str, String, &str) {
    match i.reported_by {
        Side::Server => (
            "linerate server",
            format!("from {}", i.client.as_deref().unwrap_or("a client")),
            &i.server_engine,
        ),
        Side::Client => (
            "linerate",
            format!(
                "to {}{}",
                i.server,
                if i.embedded_server {
                    " (embedded server)"
                } else {
                    ""
                }
            ),
            &i.client_engine,
        ),
    }
}

/// The line of a request/response or message test: its kind and how many
/// flows or transfers carry it.
fn exchange_line(i: &TestInfo, who: &str, route: &str, engine: &str) -> String {
    let rules = i.rules();
    let (one, many) = rules.unit;
    format!(
        "{who}: {} {} {route} · {} {}{} · engine {}",
        i.protocol,
        rules.title,
        i.streams,
        if i.streams == 1 { one } else { many },
        i.flows.map_or(String::new(), |f| loop_words(i, f.threads)),
        engine,
    )
}

/// [`test_line`] wrapped for a terminal.
pub(crate) fn test_heading(i: &TestInfo) -> String {
    wrap(&test_line(i), " · ", 2)
}

pub(super) fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "client→server (stream)",
        Direction::Reverse => "server→client (maerts)",
        Direction::Bidir => "both ways (bidir)",
    }
}

fn pace_words(p: Pace) -> String {
    match p {
        Pace::Unlimited => "full speed (unpaced)".into(),
        Pace::Rate(bps) => format!("{} per stream", format_rate(bps as f64)),
        Pace::MilliPps(m) => format!(
            "{} datagrams/s per stream",
            format_count_rate(m as f64 / 1000.0)
        ),
    }
}

fn limit_words(l: Limit) -> String {
    match l {
        Limit::TimeMs(ms) => format!("{} s", ms as f64 / 1e3),
        Limit::Bytes(b) => format!("{} per direction", format_bytes(b)),
        Limit::Datagrams(n) => format!("{n} datagrams per direction"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::measure::LoopKind;
    use linerate_proto::spec::{Flows, Protocol, TestKind, TestSpec};

    /// The heading names the loop the reporting side's results recorded,
    /// not one guessed from its engine's name (a uring server's rr over
    /// UDP once ran on epoll under that name); none recorded, none named.
    #[test]
    fn issue_26_the_heading_names_the_loop_each_side_recorded() {
        let spec = TestSpec {
            kind: TestKind::Rr,
            protocol: Protocol::Udp,
            flows: Some(Flows {
                count: 8,
                threads: 2,
            }),
            ..TestSpec::default()
        };
        let mut i = TestInfo::from_spec(&spec, Side::Client);
        i.client_engine = "uring".into();
        i.server_engine = "uring".into();
        i.client_loop = Some(LoopKind::IoUring);
        i.server_loop = Some(LoopKind::Epoll);
        let line = test_line(&i);
        assert!(
            line.contains("on 2 event-loop threads (io_uring)"),
            "{line}"
        );
        i.reported_by = Side::Server;
        let line = test_line(&i);
        assert!(line.contains("on 2 event-loop threads (epoll)"), "{line}");
        i.server_loop = None;
        let line = test_line(&i);
        assert!(line.contains("on 2 event-loop threads ·"), "{line}");
        // Stream flows too.
        let stream = TestSpec {
            kind: TestKind::Stream,
            ..spec
        };
        let mut i = TestInfo::from_spec(&stream, Side::Client);
        i.client_engine = "syscall".into();
        i.client_loop = Some(LoopKind::Epoll);
        let line = test_line(&i);
        assert!(
            line.contains("8 flows on 2 event-loop threads (epoll)"),
            "{line}"
        );
    }

    #[test]
    fn issue_26_the_loop_is_spelled_in_json_as_in_the_heading() {
        for k in [LoopKind::Epoll, LoopKind::IoUring] {
            let json = serde_json::to_string(&k).expect("json");
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<LoopKind>(&json).ok(), Some(k));
        }
    }
}
