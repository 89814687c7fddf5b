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
