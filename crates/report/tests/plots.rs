//! Every plot rendered and looked at by a test (issue 13): each SVG is
//! drawn to pixels with `resvg` and must have ink in every panel, and its
//! text elements must carry the units, the caption (what was measured),
//! readable ticks (no "7000.0", no exponents) and, where the axis is
//! logarithmic, the decade ticks. Fed the committed fixture reports (real
//! reports captured from the binary), so nothing here needs a network.

use std::path::PathBuf;

use linerate_report::model::{Report, SweepReport};
use linerate_report::{plot, plot_extra, plot_flows, plot_rr};
use resvg::{tiny_skia, usvg};

fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The SVG drawn to pixels.
fn pixels(svg: &str) -> tiny_skia::Pixmap {
    let tree = usvg::Tree::from_str(svg, &usvg::Options::default()).expect("a valid SVG");
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).expect("pixmap");
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    // To look at them: PLOTS_PNG_DIR=/tmp/plots cargo test -p linerate-report --test plots
    if let Some(dir) = std::env::var_os("PLOTS_PNG_DIR") {
        let name = format!(
            "{:016x}.png",
            svg.len() as u64 * 31 + u64::from(size.width())
        );
        let _ = std::fs::create_dir_all(&dir);
        let _ = pixmap.save_png(PathBuf::from(dir).join(name));
    }
    pixmap
}

/// Share of the pixels in the rectangle (fractions of the image) that are
/// not (nearly) white.
fn ink(p: &tiny_skia::Pixmap, x0: f64, y0: f64, x1: f64, y1: f64) -> f64 {
    let (w, h) = (p.width() as f64, p.height() as f64);
    let (cx0, cx1) = ((x0 * w) as u32, (x1 * w) as u32);
    let (cy0, cy1) = ((y0 * h) as u32, (y1 * h) as u32);
    let mut inked = 0u64;
    let mut all = 0u64;
    for y in cy0..cy1 {
        for x in cx0..cx1 {
            let c = p.pixel(x, y).expect("in the image");
            all += 1;
            if c.red() < 230 || c.green() < 230 || c.blue() < 230 {
                inked += 1;
            }
        }
    }
    inked as f64 / all.max(1) as f64
}

/// The text of every `<text>` element, entities decoded.
fn texts(svg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text") {
        rest = &rest[i..];
        let Some(open_end) = rest.find('>') else {
            break;
        };
        let Some(close) = rest.find("</text>") else {
            break;
        };
        out.push(
            rest[open_end + 1..close]
                .trim()
                .replace("&gt;", ">")
                .replace("&lt;", "<")
                .replace("&apos;", "'")
                .replace("&amp;", "&"),
        );
        rest = &rest[close..];
    }
    out
}

fn has(texts: &[String], needle: &str) -> bool {
    texts.iter().any(|t| t.contains(needle))
}

/// Tick labels people can read: no float noise, no exponents.
fn assert_readable_ticks(texts: &[String], what: &str) {
    for t in texts {
        let number = t
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | '+' | ' '));
        if !number || t.is_empty() {
            continue;
        }
        assert!(!t.contains('e'), "{what}: exponent in tick {t:?}");
        assert!(
            !(t.contains('.') && t.ends_with('0')),
            "{what}: trailing zero in tick {t:?}"
        );
    }
}

/// Every panel of a `cols`-wide row between heights `y0` and `y1` has ink.
fn assert_panels_inked(p: &tiny_skia::Pixmap, cols: usize, y0: f64, y1: f64, what: &str) {
    for c in 0..cols {
        let (x0, x1) = (c as f64 / cols as f64, (c + 1) as f64 / cols as f64);
        let share = ink(p, x0, y0, x1, y1);
        assert!(
            share > 0.01,
            "{what}: panel {c} is blank ({:.4} inked)",
            share
        );
    }
}

fn sweep_with_a_slow_sender() -> SweepReport {
    let mut r: SweepReport = fixture("sweep");
    // The largest grid trial: the sender fell short and 2.5% was lost.
    let t = r
        .trials
        .iter_mut()
        .filter(|t| !t.search)
        .max_by(|a, b| a.sent_bits_per_second.total_cmp(&b.sent_bits_per_second))
        .expect("a grid trial");
    t.kept_up = false;
    t.loss_percent = 2.5;
    r
}

#[test]
fn issue_13_sweep_plot_marks_slow_senders_and_plots_loss_on_a_log_axis() {
    let r = sweep_with_a_slow_sender();
    let svg = plot::sweep_svg(&r).expect("draws");
    let p = pixels(&svg);
    assert_panels_inked(&p, 3, 0.15, 0.95, "sweep");
    let t = texts(&svg);
    for needle in [
        "received vs sent",
        "UDP loss vs sent rate (log)",
        "loss (%)",
        "sent (Mbit/s)",
        "received (kpps)",
        "100 B",
        "200 B",
        "sender did not keep up",
        // The caption: version, what, where, when, how.
        "linerate",
        "sweep to 127.0.0.1",
        "UTC",
        "s, 1 stream each",
        "1 trial(s) where the sender did not keep up",
    ] {
        assert!(has(&t, needle), "no {needle:?} in {t:?}");
    }
    // The log axis: "0" for no loss at the bottom, decades above it.
    assert!(t.iter().any(|x| x == "0"), "{t:?}");
    assert!(t.iter().any(|x| x == "1" || x == "0.1"), "{t:?}");
    assert_readable_ticks(&t, "sweep");
    // A red cross per slow trial: drawn in the not-kept-up colour.
    assert!(svg.contains("#C80000"), "no not-kept-up mark");

    // Every sender kept up: no mark, no legend for it.
    let svg = plot::sweep_svg(&fixture("sweep")).expect("draws");
    assert!(!has(&texts(&svg), "did not keep up"));
}

#[test]
fn issue_13_rr_plot_has_a_log_tail_axis_and_a_caption() {
    let r: Report = fixture("rr");
    let svg = plot_rr::svg(&r).expect("draws");
    let p = pixels(&svg);
    // Caption band, then the size panel, then the tail.
    assert_panels_inked(&p, 1, 0.06, 0.52, "rr sizes");
    assert_panels_inked(&p, 1, 0.52, 1.0, "rr tail");
    let t = texts(&svg);
    for needle in [
        "Round-trip latency vs request size",
        "request size (bytes)",
        "latency (µs)",
        "fraction slower than x (log)",
        "fraction of round trips > x",
        "round trip (µs)",
        "1 B",
        "64 B",
        "linerate",
        "tcp rr to",
        "UTC",
        "1 flow",
        "engine syscall",
    ] {
        assert!(has(&t, needle), "no {needle:?} in {t:?}");
    }
    // Decades on the tail axis, down to the slowest of 200 transactions.
    for decade in ["1", "0.1", "0.01"] {
        assert!(t.iter().any(|x| x == decade), "no {decade} tick: {t:?}");
    }
    assert_readable_ticks(&t, "rr");
}

#[test]
fn issue_13_rr_plot_of_one_size_has_no_one_point_panel() {
    let mut r: Report = fixture("rr");
    if let Some(rr) = &mut r.rr {
        rr.phases.truncate(1);
    }
    let svg = plot_rr::svg(&r).expect("draws");
    let t = texts(&svg);
    assert!(!has(&t, "vs request size"), "{t:?}");
    assert!(has(&t, "no latency-vs-size panel"), "{t:?}");
    assert!(has(&t, "p99.9"), "{t:?}");
    let p = pixels(&svg);
    assert_panels_inked(&p, 1, 0.2, 1.0, "rr one size tail");

    // Loaded and unloaded at one size: a note line for each.
    let svg = plot_rr::svg(&fixture("rr_loaded")).expect("draws");
    let t = texts(&svg);
    assert!(has(&t, "32 B under load: round trip"), "{t:?}");
    assert!(has(&t, "under load: 1 bulk stream"), "{t:?}");
}

#[test]
fn issue_13_rr_plot_names_the_response_size_where_it_differs() {
    let mut r: Report = fixture("rr");
    if let Some(rr) = &mut r.rr {
        for p in &mut rr.phases {
            p.response_size = 4096;
        }
    }
    let svg = plot_rr::svg(&r).expect("draws");
    let t = texts(&svg);
    assert!(has(&t, "64 B → 4096 B"), "{t:?}");
    assert!(has(&t, "(responses 4096 B)"), "{t:?}");
    // Equal sizes: no arrow.
    let svg = plot_rr::svg(&fixture("rr")).expect("draws");
    assert!(!has(&texts(&svg), "→"));
}

#[test]
fn issue_13_crr_and_udp_rr_plots_render() {
    for name in ["crr", "rr_udp"] {
        let svg = plot_rr::svg(&fixture(name)).expect("draws");
        let p = pixels(&svg);
        assert!(ink(&p, 0.0, 0.0, 1.0, 1.0) > 0.01, "{name}: blank");
        let t = texts(&svg);
        assert!(has(&t, "linerate"), "{name}: {t:?}");
        assert_readable_ticks(&t, name);
    }
}

#[test]
fn issue_13_interval_plot_renders_with_units_and_caption() {
    for name in ["tcp", "tcp_bidir", "udp"] {
        let svg = plot_extra::intervals_svg(&fixture(name)).expect("draws");
        let p = pixels(&svg);
        assert_panels_inked(&p, 1, 0.1, 0.95, name);
        let t = texts(&svg);
        assert!(has(&t, "time (s)"), "{name}: {t:?}");
        assert!(has(&t, "bit/s"), "{name}: {t:?}");
        assert!(has(&t, "UTC"), "{name}: {t:?}");
        assert_readable_ticks(&t, name);
    }
}

#[test]
fn issue_13_repeat_plot_renders_mean_and_sd_per_group() {
    for (name, want) in [("tcp_bidir", "receiver bit/s"), ("rr", "transactions/s")] {
        let a: Report = fixture(name);
        let mut b = a.clone();
        for s in &mut b.sums {
            s.receiver_bits_per_second *= 0.8;
        }
        if let Some(rr) = &mut b.rr {
            for p in &mut rr.phases {
                p.transactions_per_second *= 0.8;
            }
        }
        let r = linerate_report::repeat::build(2, &[a, b], vec![]).expect("repeat report");
        let svg = plot_extra::repeat_svg(&r).expect("draws");
        let p = pixels(&svg);
        assert_panels_inked(&p, 1, 0.1, 0.9, name);
        let t = texts(&svg);
        assert!(has(&t, want), "{name}: {t:?}");
        assert!(has(&t, "mean ± 1 sd over 2 trials"), "{name}: {t:?}");
        assert!(has(&t, "2 of 2 trials completed"), "{name}: {t:?}");
        assert!(has(&t, "UTC"), "{name}: {t:?}");
        assert_readable_ticks(&t, name);
    }
}

/// A comparison of `test` from fixture reports: a base variant, one at
/// 1.5× its headline figure over two runs (1.4× and 1.6×), and one that
/// did not run.
fn comparison(test: &str, fixture_name: &str) -> linerate_report::compare::CompareReport {
    use linerate_report::compare::{set_ratios, summarise, CompareReport, CompareVariant};
    let base: Report = fixture(fixture_name);
    let scaled = |k: f64| {
        let mut r = base.clone();
        for s in &mut r.sums {
            s.receiver_bits_per_second *= k;
            if let Some(u) = &mut s.udp {
                u.received_pps *= k;
            }
        }
        if let Some(rr) = &mut r.rr {
            for p in &mut rr.phases {
                p.transactions_per_second *= k;
            }
        }
        r
    };
    let variant = |name: &str, runs: &[Report], error: Option<&str>| CompareVariant {
        name: name.into(),
        engine: name.into(),
        client_engine: None,
        server_engine: None,
        engine_note: None,
        busy_poll: false,
        waits: None,
        threading: None,
        preload: None,
        client_ld_preload: None,
        server_ld_preload: None,
        runs: runs.len() as u32,
        failed: Vec::new(),
        error: error.map(str::to_owned),
        metrics: summarise(runs),
    };
    let mut variants = vec![
        variant("syscall", std::slice::from_ref(&base), None),
        variant("batch", &[scaled(1.4), scaled(1.6)], None),
        variant("uring", &[], Some("io_uring is disabled")),
    ];
    set_ratios(&mut variants);
    CompareReport {
        schema: linerate_report::compare::COMPARE_SCHEMA,
        test: test.into(),
        server: Some("127.0.0.1:5201".into()),
        interrupted: false,
        start_unix_ms: base.test.start_unix_ms,
        args: vec!["-t".into(), "2".into()],
        flows: None,
        repeat: 2,
        variants,
    }
}

#[test]
fn issue_8_compare_plot_has_a_labelled_bar_per_variant() {
    for (test, name, want) in [
        ("tcp", "tcp", "Received data rate per variant"),
        ("udp", "udp", "Received datagram rate per variant"),
        ("rr", "rr", "Transaction rate per variant"),
    ] {
        let r = comparison(test, name);
        let svg = linerate_report::compare_plot::svg(&r).expect("draws");
        let p = pixels(&svg);
        // The two bars that ran have ink (left and middle thirds of the
        // plot area); the third is a note, not a bar.
        assert_panels_inked(&p, 2, 0.3, 0.85, test);
        let t = texts(&svg);
        for needle in [
            want,
            "syscall",
            "batch",
            "uring",
            "×1.00",
            "×1.50",
            "did not run",
            "linerate compare: tcp -t 2",
            "UTC",
            "2 runs per variant",
            "ratios to the first variant (syscall)",
        ] {
            let needle = needle.replace("tcp -t 2", &format!("{test} -t 2"));
            assert!(has(&t, &needle), "{test}: no {needle:?} in {t:?}");
        }
        assert_readable_ticks(&t, test);
    }
    // Nothing to draw is an error, not an empty figure.
    let mut r = comparison("tcp", "tcp");
    for v in &mut r.variants {
        v.metrics.clear();
    }
    assert!(linerate_report::compare_plot::svg(&r).is_err());
}

/// `--flows` reports (captured from the binary: crr with 8 flows on 2
/// threads, tcp with 8 flows): the CDF of the flows' rates, a line with
/// its flows and Jain's index as the report gives them, the unit, the
/// caption; a report without flows has none to draw.
#[test]
fn issue_26_flows_plot_the_cdf_of_their_rates() {
    for (name, unit, line) in [
        (
            "crr_flows",
            "rate of a flow (connections/s)",
            "1 B requests: 8 flows, Jain's index 0.998",
        ),
        (
            "tcp_flows",
            "rate of a flow (Mbit/s)",
            "client→server: 8 flows, Jain's index 0.999",
        ),
    ] {
        let r: Report = fixture(name);
        let svg = plot_flows::svg(&r).expect("draws");
        let p = pixels(&svg);
        assert_panels_inked(&p, 1, 0.15, 0.95, name);
        let t = texts(&svg);
        for needle in [
            "per-flow rate distribution (CDF)",
            "share of flows at or below",
            unit,
            line,
            "linerate",
            "UTC",
        ] {
            assert!(has(&t, needle), "{name}: no {needle:?} in {t:?}");
        }
        assert_readable_ticks(&t, name);
    }
    let e = plot_flows::svg(&fixture("crr")).expect_err("no flows");
    assert!(e.to_string().contains("--flows"), "{e}");
}
