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
