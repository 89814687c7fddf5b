//! What a user reads, pinned: every renderer fed fixed reports (real
//! reports of every test kind, captured once from the binary on loopback
//! into `tests/fixtures/`) and compared byte for byte with the committed
//! output in `tests/snapshots/`. No network, no clock: deterministic.
//!
//! A deliberate change of the output: run
//! `UPDATE_SNAPSHOTS=1 cargo test -p linerate-report --test snapshots`
//! and review the diff of `tests/snapshots/` like any other change.

use std::path::PathBuf;

use linerate_proto::wire::Side;
use linerate_report::model::{Report, SweepReport};
use linerate_report::render::{self, Format};

fn dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(sub)
}

fn fixture_text(name: &str) -> String {
    let path = dir("fixtures").join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(name: &str) -> Report {
    serde_json::from_str(&fixture_text(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// Compares `actual` with the committed snapshot `file` (or writes it, with
/// `UPDATE_SNAPSHOTS` set).
fn assert_snapshot(file: &str, actual: &str) {
    let path = dir("snapshots").join(file);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(dir("snapshots")).expect("create snapshots/");
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no snapshot {}; run with UPDATE_SNAPSHOTS=1 to create it",
            path.display()
        )
    });
    if expected == actual {
        return;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let at = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    panic!(
        "{file} changed, first at line {}:\n  expected: {:?}\n  actual:   {:?}\n\nwhole output:\n{actual}\n\
         (a deliberate change: rerun with UPDATE_SNAPSHOTS=1 and review the diff)",
        at + 1,
        e.get(at),
        a.get(at)
    );
}

/// What a client prints in `format`: the start, its intervals as they
/// happen, the summary.
fn render(format: Format, r: &Report) -> String {
    let mut buf = Vec::new();
    {
        let mut sink = render::sink(format, Box::new(&mut buf));
        sink.start(&r.test).expect("start");
        for i in &r.intervals {
            sink.interval(i).expect("interval");
        }
        sink.finish(r).expect("finish");
    }
    String::from_utf8(buf).expect("utf-8 output")
}

/// Every format of one fixture: human, CSV and JSON Lines against their
/// snapshots; `--json` is the fixture itself, byte for byte (it was made by
/// `--json`, so this is also the model's serde round trip).
fn all_formats(name: &str) {
    let r = fixture(name);
    assert_snapshot(&format!("{name}.human.txt"), &render(Format::Human, &r));
    assert_snapshot(&format!("{name}.csv"), &render(Format::Csv, &r));
    assert_snapshot(&format!("{name}.jsonl"), &render(Format::JsonLines, &r));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        // A fixture edited by hand (or by a script) for a deliberate model
        // change is written back in the model's own form.
        let path = dir("fixtures").join(format!("{name}.json"));
        std::fs::write(path, render(Format::Json, &r)).expect("write fixture");
    }
    assert_eq!(
        render(Format::Json, &r),
        fixture_text(name),
        "{name}: --json output differs from the report it was made from"
    );
    if r.rr.is_some() {
        let mut csv = Vec::new();
        render::histogram_csv(&r, &mut csv).expect("histogram csv");
        assert_snapshot(
            &format!("{name}.histogram.csv"),
            &String::from_utf8(csv).expect("utf-8"),
        );
    }
}

#[test]
fn snapshot_tcp() {
    all_formats("tcp");
}

#[test]
fn snapshot_tcp_reverse_with_omit() {
    all_formats("tcp_reverse");
}

#[test]
fn snapshot_tcp_bidir_parallel() {
    all_formats("tcp_bidir");
}

#[test]
fn snapshot_udp_parallel() {
    all_formats("udp");
}

#[test]
fn snapshot_udp_reverse_verify_burst() {
    all_formats("udp_reverse");
}

#[test]
fn snapshot_rr() {
    all_formats("rr");
}

#[test]
fn snapshot_rr_batch_busy_poll_under_load() {
    all_formats("rr_loaded");
}

#[test]
fn snapshot_rr_udp_probed_clock() {
    all_formats("rr_udp");
}

#[test]
fn snapshot_crr() {
    all_formats("crr");
}

/// Issue 28: a paced sender whose thread was busy but kept its rate is not
/// told "one core is the limit"; one that fell behind (or an unpaced one)
/// is.
#[test]
fn issue_28_a_busy_core_is_blamed_only_when_the_paced_rate_was_missed() {
    let human = |kept_up: bool, paced: bool| {
        let mut r = fixture("udp");
        r.cpu.client.busiest_thread = Some("stream 1 sender".into());
        r.cpu.client.busiest_thread_percent = Some(99.5);
        for s in &mut r.sums {
            let u = s.udp.as_mut().expect("a UDP sum");
            u.kept_up = kept_up;
            if !paced {
                u.requested_pps = None;
            }
        }
        render(Format::Human, &r)
    };
    let met = human(true, true);
    assert!(!met.contains("one core is the limit"), "{met}");
    assert!(
        met.contains("the requested rate was met, so that core was not the limit"),
        "{met}"
    );
    for text in [human(false, true), human(true, false)] {
        assert!(text.contains("one core is the limit"), "{text}");
        assert!(!text.contains("rate was met"), "{text}");
    }
}

/// An xdp receiver spins on its rings by default: its line says it was the
/// engine's default, so it is not read as `--busy-poll`; with the flag it
/// is labelled as the flag's.
#[test]
fn issue_28_a_default_spin_is_not_labelled_as_busy_poll() {
    let human = |asked: bool| {
        let mut r = fixture("udp");
        r.test.busy_poll = asked;
        for s in &mut r.streams {
            s.receiver.busy_poll = Some("spinning on the AF_XDP rings".into());
            s.receiver.poll_sleeps = Some(0);
        }
        render(Format::Human, &r)
    };
    let default = human(false);
    assert!(
        default.contains(
            "busy poll (the engine's default, not --busy-poll): spinning on the AF_XDP rings"
        ),
        "{default}"
    );
    assert!(!default.contains("busy poll: "), "{default}");
    let asked = human(true);
    assert!(
        asked.contains("busy poll: spinning on the AF_XDP rings"),
        "{asked}"
    );
    assert!(!asked.contains("engine's default"), "{asked}");
}

/// The server prints a report per test too (start line and summary).
#[test]
fn snapshot_server_side_reports() {
    for name in ["tcp", "udp", "rr"] {
        let mut r = fixture(name);
        r.test.reported_by = Side::Server;
        r.test.client = Some("127.0.0.1:40000".into());
        let mut buf = Vec::new();
        {
            let mut sink = render::sink(Format::Human, Box::new(&mut buf));
            sink.start(&r.test).expect("start");
            sink.finish(&r).expect("finish");
        }
        assert_snapshot(
            &format!("{name}.server.human.txt"),
            &String::from_utf8(buf).expect("utf-8"),
        );
    }
}

fn render_sweep(format: Format, r: &SweepReport) -> String {
    let mut buf = Vec::new();
    {
        let mut sink = render::sweep_sink(format, Box::new(&mut buf));
        sink.start(&r.test).expect("start");
        for t in &r.trials {
            sink.trial(t).expect("trial");
        }
        sink.finish(r).expect("finish");
    }
    String::from_utf8(buf).expect("utf-8 output")
}

#[test]
fn snapshot_sweep() {
    let text = fixture_text("sweep");
    let r: SweepReport = serde_json::from_str(&text).expect("sweep fixture");
    assert_snapshot("sweep.human.txt", &render_sweep(Format::Human, &r));
    assert_snapshot("sweep.csv", &render_sweep(Format::Csv, &r));
    assert_snapshot("sweep.jsonl", &render_sweep(Format::JsonLines, &r));
    assert_eq!(render_sweep(Format::Json, &r), text, "sweep --json");
}

/// crr times connect to close: its header says so (not "before the
/// request, after the response").
#[test]
fn issue_13_crr_header_names_connect_and_close() {
    let text = render(Format::Human, &fixture("crr"));
    assert!(
        text.contains("clock read before the connect, after the close"),
        "{text}"
    );
    assert!(!text.contains("before the request"), "{text}");
}

/// Late responses (after their request was counted lost) are reported in
/// JSON and, only when there are any, on the transactions line.
#[test]
fn issue_26_late_responses_are_reported_only_when_there_are_some() {
    let mut r = fixture("rr_udp");
    let text = render(Format::Human, &r);
    assert!(!text.contains("late"), "{text}");
    let rr = r.rr.as_mut().expect("rr");
    rr.phases[0].lost = 3;
    rr.phases[0].late = 2;
    let text = render(Format::Human, &r);
    assert!(
        text.contains("3 lost (no response within the timeout")
            && text.contains("2 late responses (came after their request was counted lost"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, &r)).expect("json report");
    assert_eq!(json["rr"]["phases"][0]["late"], 2, "{json}");
}

/// Everything the human format prints, for every kind of test, on either
/// side, and for sweeps.
fn all_human_outputs() -> Vec<(String, String)> {
    let mut outs = Vec::new();
    for name in [
        "tcp",
        "tcp_reverse",
        "tcp_bidir",
        "udp",
        "udp_reverse",
        "rr",
        "rr_loaded",
        "rr_udp",
        "crr",
    ] {
        let mut r = fixture(name);
        outs.push((name.to_string(), render(Format::Human, &r)));
        r.test.reported_by = Side::Server;
        r.test.client = Some("127.0.0.1:40000".into());
        outs.push((format!("{name} (server)"), render(Format::Human, &r)));
    }
    let sweep: SweepReport = serde_json::from_str(&fixture_text("sweep")).expect("sweep");
    outs.push(("sweep".into(), render_sweep(Format::Human, &sweep)));
    outs
}

/// Human output stays within 100 columns (UDP summaries reached 180, the
/// rr table 127), with no trailing blanks.
#[test]
fn issue_13_human_output_fits_100_columns() {
    for (name, text) in all_human_outputs() {
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "{name}: {} columns: {line:?}",
                line.chars().count()
            );
            assert_eq!(line, line.trim_end(), "{name}: trailing blanks");
        }
    }
}

/// The interval table shows the columns that carry figures for this side:
/// TCP_INFO columns where it sends, UDP loss columns where it receives.
#[test]
fn issue_13_interval_columns_only_where_they_carry_figures() {
    let header = |name: &str| {
        let text = render(Format::Human, &fixture(name));
        text.lines()
            .find(|l| l.starts_with("[  ID] Interval"))
            .unwrap_or_else(|| panic!("{name}: no interval header in\n{text}"))
            .to_string()
    };
    let tcp = header("tcp");
    assert!(tcp.contains("Retr") && tcp.contains("RTT"), "{tcp}");
    let reverse = header("tcp_reverse");
    assert!(
        !reverse.contains("Retr") && !reverse.contains("Cwnd"),
        "{reverse}"
    );
    assert!(header("tcp_bidir").contains("Retr"));
    let udp = header("udp");
    assert!(udp.contains("Datagrams"), "{udp}");
    for col in ["Lost", "Recv", "Reord", "Dup", "Corr", "Jitter"] {
        assert!(!udp.contains(col), "forward UDP client shows {col}: {udp}");
    }
    let udp_reverse = header("udp_reverse");
    for col in ["Lost", "Recv", "Jitter"] {
        assert!(udp_reverse.contains(col), "{udp_reverse}");
    }
}

/// The CSV column named `col` in every row whose `record` is `record`.
fn csv_column(text: &str, record: &str, col: &str) -> Vec<String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let i = header
        .iter()
        .position(|h| *h == col)
        .unwrap_or_else(|| panic!("no column {col} in {header:?}"));
    lines
        .map(|l| l.split(',').map(str::to_owned).collect::<Vec<_>>())
        .filter(|f| f[0] == record)
        .map(|f| {
            assert_eq!(f.len(), header.len(), "{f:?}");
            f[i].clone()
        })
        .collect()
}

/// CSV rows carry the test's parameters, each side's CPU on the rows that
/// cover the whole test, and (sweeps) whether the sender kept up.
#[test]
fn issue_13_csv_rows_carry_parameters_cpu_and_kept_up() {
    let udp = fixture("udp");
    let text = render(Format::Csv, &udp);
    for (col, want) in [
        ("test", "stream"),
        ("protocol", "udp"),
        ("direction", "forward"),
        ("len", "1472"),
        ("client_engine", udp.test.client_engine.as_str()),
    ] {
        for record in ["interval", "stream", "sum"] {
            let got = csv_column(&text, record, col);
            assert!(
                !got.is_empty() && got.iter().all(|v| v == want),
                "{record} {col}: {got:?}"
            );
        }
    }
    let streams = udp.test.streams.to_string();
    assert!(csv_column(&text, "sum", "streams")
        .iter()
        .all(|v| *v == streams));
    let cpu = csv_column(&text, "sum", "client_cpu_percent");
    assert_eq!(cpu[0], format!("{:.1}", udp.cpu.client.percent_of_cpu));
    assert!(csv_column(&text, "interval", "client_cpu_percent")
        .iter()
        .all(String::is_empty));
    assert!(!csv_column(&text, "sum", "rate_bits_per_second")[0].is_empty());

    let rr = render(Format::Csv, &fixture("rr"));
    assert!(csv_column(&rr, "phase", "test").iter().all(|v| v == "rr"));
    assert!(csv_column(&rr, "phase", "client_cpu_us_per_transaction")
        .iter()
        .all(|v| v.parse::<f64>().is_ok()));

    let sweep: SweepReport = serde_json::from_str(&fixture_text("sweep")).expect("sweep");
    let text = render_sweep(Format::Csv, &sweep);
    assert!(csv_column(&text, "trial", "kept_up")
        .iter()
        .all(|v| v == "true"));
    assert!(csv_column(&text, "trial", "direction")
        .iter()
        .all(|v| v == "forward"));
}

/// `--repeat`'s human table keeps within 100 columns (issue 13), wide
/// confidence intervals going under their row.
#[test]
fn issue_13_repeat_table_keeps_within_100_columns() {
    for name in ["tcp_bidir", "udp", "rr"] {
        let a = fixture(name);
        let mut b = a.clone();
        // A second trial that differs, so every figure has an interval.
        for s in &mut b.sums {
            s.receiver_bits_per_second *= 0.5;
            s.sender_bits_per_second *= 0.5;
        }
        b.cpu.client.percent_of_cpu *= 3.0;
        let r = linerate_report::repeat::build(2, &[a, b], vec![]).expect("a repeat report");
        let mut out = Vec::new();
        linerate_report::render::export(&r, Format::Human, &mut out).expect("render");
        let text = String::from_utf8(out).expect("utf-8");
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "{name}: {line:?}");
        }
        assert!(text.contains("95% CI"), "{name}");
    }
}

/// A crr transaction waits several times on each side (connect or accept,
/// the message, the close), so its busy-poll sleeps can outnumber its
/// transactions: the report gives them as a rate, never as a share above
/// 100%.
#[test]
fn issue_8_crr_poll_sleeps_are_a_rate_not_a_share() {
    use linerate_proto::rr_core::SpinMode;
    let mut r = fixture("crr");
    let rr = r.rr.as_mut().expect("crr report");
    rr.busy_poll = true;
    rr.spin_client = Some(SpinMode::Shared);
    rr.spin_server = Some(SpinMode::Shared);
    let n = rr.phases[0].transactions;
    rr.phases[0].client_poll_sleeps = Some(vec![n * 2]);
    rr.phases[0].server_poll_sleeps = Some(vec![n / 2]);
    let text = render(Format::Human, &r);
    assert!(
        text.contains(
            "sleeps per flow (waits that outlasted the spin budget; sleeps per transaction)"
        ) && text.contains("client 100 (2.000 per transaction), server 25 (0.500 per transaction)"),
        "{text}"
    );
    assert!(!text.contains("200.00%"), "{text}");
}

/// Issue 8's "CPU per interval on both sides" holds in CSV too: the
/// server's interval rows (sent with its results) follow the client's.
#[test]
fn issue_8_csv_has_interval_rows_from_both_sides() {
    for name in ["tcp", "udp_reverse"] {
        let r = fixture(name);
        let text = render(Format::Csv, &r);
        let sides = csv_column(&text, "interval", "side");
        let count = |s: &str| sides.iter().filter(|x| *x == s).count();
        let want = |v: &[linerate_report::model::IntervalRecord]| {
            v.iter().map(|i| i.streams.len()).sum::<usize>()
        };
        assert!(
            want(&r.server_intervals) > 0,
            "{name}: fixture has server intervals"
        );
        assert_eq!(count("client"), want(&r.intervals), "{name}: {text}");
        assert_eq!(count("server"), want(&r.server_intervals), "{name}: {text}");
    }
}
