//! `--plot` files as users ask for them: a stream test's throughput per
//! interval, and with `--repeat` each flow's mean ± 1 sd (issue 11).

use std::time::Duration;

use crate::helpers::*;

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

#[test]
fn issue_11_plot_for_repeated_and_single_tcp_and_udp_runs() {
    let dir = scratch("plots");
    for (args, wants) in [
        (
            &["tcp", "-t", "0.3", "--repeat", "2"][..],
            &[
                "mean ± 1 sd over 2 trials",
                "receiver bit/s",
                "client→server",
            ][..],
        ),
        (
            &["udp", "-t", "0.3", "-b", "20M", "-R", "--repeat", "2"],
            &["mean ± 1 sd over 2 trials", "server→client"],
        ),
        (
            &["tcp", "-t", "0.6", "-i", "0.2", "--bidir"],
            &["throughput per interval", "time (s)", "bit/s", "UTC"],
        ),
        (
            &["udp", "-t", "0.6", "-i", "0.2", "-b", "20M"],
            &[
                "throughput per interval",
                "received (Mbit/s)",
                "udp client → server",
            ],
        ),
    ] {
        let svg = dir.join("p.svg");
        let _ = std::fs::remove_file(&svg);
        let mut all: Vec<&str> = args.to_vec();
        let path = svg.to_string_lossy().to_string();
        all.extend(["--plot", &path]);
        let out = run_client(&all, Duration::from_secs(60));
        assert_ok(&out, &all);
        let text = std::fs::read_to_string(&svg).unwrap_or_default();
        assert!(text.starts_with("<svg"), "{all:?}: no SVG written");
        for w in wants {
            assert!(text.contains(w), "{all:?}: no {w:?} in the plot");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--plot FILE` of a `--flows` test writes FILE as before and, beside
/// it, FILE-flows.svg: the CDF of the flows' rates (issue 26).
#[test]
fn issue_26_plot_of_a_flows_test_adds_the_per_flow_rate_cdf() {
    let dir = scratch("flowplots");
    for (args, unit) in [
        (
            &["crr", "--flows", "8", "--threads", "2", "-t", "0.3"][..],
            "connections/s",
        ),
        (
            &["tcp", "--flows", "4", "-t", "0.3", "-l", "16K"][..],
            "bit/s",
        ),
    ] {
        let svg = dir.join("p.svg");
        let beside = dir.join("p-flows.svg");
        let _ = std::fs::remove_file(&svg);
        let _ = std::fs::remove_file(&beside);
        let mut all: Vec<&str> = args.to_vec();
        let path = svg.to_string_lossy().to_string();
        all.extend(["--plot", &path]);
        let out = run_client(&all, Duration::from_secs(60));
        assert_ok(&out, &all);
        let main = std::fs::read_to_string(&svg).unwrap_or_default();
        assert!(main.starts_with("<svg"), "{all:?}: no SVG written");
        let cdf = std::fs::read_to_string(&beside).unwrap_or_default();
        for w in ["<svg", "per-flow rate distribution (CDF)", unit, "Jain"] {
            assert!(cdf.contains(w), "{all:?}: no {w:?} in {}", beside.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
